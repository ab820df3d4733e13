package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/linegate/linegate/pkg/signature"
)

func runSend(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("send", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "http://127.0.0.1:3000/webhook", "webhook URL")
	secret := fs.String("secret", envOr("LINE_CHANNEL_SECRET", "local-channel-secret"), "channel secret")
	text := fs.String("text", "", "send a text message with this text")
	user := fs.String("user", "U0000000000000000000000000000user", "the sending user's ID")
	event := fs.String("event", "", "send an event of this type: follow, unfollow or postback")
	data := fs.String("data", "action=demo", "postback data (with --event postback)")
	file := fs.String("file", "", "send this webhook body as it is")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	chosen := 0
	for _, s := range []string{*text, *event, *file} {
		if s != "" {
			chosen++
		}
	}
	if chosen != 1 {
		return usageError{"give exactly one of --text, --event or --file"}
	}
	var body []byte
	var err error
	switch {
	case *file != "":
		body, err = os.ReadFile(*file)
	case *text != "":
		body, err = webhookBody(newEvent("message", *user, map[string]any{"message": map[string]any{"id": fmt.Sprint(time.Now().UnixNano()), "type": "text", "quoteToken": "q", "text": *text}}))
	default:
		switch *event {
		case "follow":
			body, err = webhookBody(newEvent("follow", *user, map[string]any{"follow": map[string]any{"isUnblocked": false}}))
		case "unfollow":
			e := newEvent("unfollow", *user, nil)
			delete(e, "replyToken")
			body, err = webhookBody(e)
		case "postback":
			body, err = webhookBody(newEvent("postback", *user, map[string]any{"postback": map[string]any{"data": *data}}))
		default:
			return usageError{fmt.Sprintf("--event must be follow, unfollow or postback, not %q", *event)}
		}
	}
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, *url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "LineBotWebhook/2.0")
	req.Header.Set(signature.Header, signature.Sign([]byte(*secret), body))
	start := time.Now()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("post %s: %w", *url, err)
	}
	defer resp.Body.Close()
	ack := time.Since(start)
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	fmt.Fprintf(stdout, "%d %s in %s: %s\n", resp.StatusCode, http.StatusText(resp.StatusCode), ack.Round(time.Microsecond), bytes.TrimSpace(out))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("webhook answered %d", resp.StatusCode)
	}
	return nil
}

// newEvent builds a LINE webhook event of the given type from a user, with a
// fresh webhookEventId and reply token.
func newEvent(typ, user string, extra map[string]any) map[string]any {
	now := time.Now()
	e := map[string]any{
		"type":            typ,
		"mode":            "active",
		"timestamp":       now.UnixMilli(),
		"source":          map[string]any{"type": "user", "userId": user},
		"webhookEventId":  fmt.Sprintf("01SEND%020d", now.UnixNano()),
		"deliveryContext": map[string]any{"isRedelivery": false},
		"replyToken":      fmt.Sprintf("%032x", now.UnixNano()),
	}
	for k, v := range extra {
		e[k] = v
	}
	return e
}

func webhookBody(events ...map[string]any) ([]byte, error) {
	return json.Marshal(map[string]any{"destination": "U0123456789abcdef0123456789abcdef", "events": events})
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
