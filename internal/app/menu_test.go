package app

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/line/line-bot-sdk-go/v8/linebot/messaging_api"

	"github.com/linegate/linegate/internal/linemock"
	"github.com/linegate/linegate/internal/testmessenger"
)

// "menu" answers with a Flex carousel that the local Messaging API accepts
// (message type, alt text, contents), whose Order buttons carry postbacks
// the bot answers and whose other buttons send messages.
func TestMenuIsAFlexCarouselLINEAccepts(t *testing.T) {
	rec := &testmessenger.Messenger{}
	if err := NewWith(Config{}).Dispatch(context.Background(), event(t, text("menu"), rec)); err != nil {
		t.Fatal(err)
	}
	if len(rec.Messages()) != 1 {
		t.Fatalf("sent %d messages, want one Flex message", len(rec.Messages()))
	}
	// Marshalled as the worker's LINE client sends it.
	body, err := json.Marshal(&messaging_api.PushMessageRequest{To: "U0000000000000000000000000000user", Messages: rec.Messages()})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"type":"flex"`, `"type":"carousel"`, `"data":"menu:order=coffee"`, `"type":"message"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("menu lacks %s: %s", want, body)
		}
	}
	srv := httptest.NewServer(linemock.New())
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+linemock.PathPush, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer t")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("LINE's API refused the menu: %d %s", resp.StatusCode, b)
	}
	for _, tc := range []struct{ data, want string }{
		{"menu:order=coffee", "One coffee coming up! (¥450)"},
		{"menu:order=latte", "One matcha latte coming up! (¥520)"},
		{"menu:order=cola", "That drink is not on today's menu"},
	} {
		rec := &testmessenger.Messenger{}
		if err := NewWith(Config{}).Dispatch(context.Background(), event(t, postback("01M", tc.data), rec)); err != nil {
			t.Fatal(err)
		}
		if len(rec.Texts()) != 1 || !strings.HasPrefix(rec.Texts()[0], tc.want) {
			t.Errorf("%s answered %q, want %q", tc.data, rec.Texts(), tc.want)
		}
	}
}
