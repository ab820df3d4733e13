package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/linegate/linegate/pkg/signature"
)

func runCLI(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{}, {"nope"}, {"sign"}, {"send"}, {"send", "--text", "a", "--event", "follow"}, {"send", "--event", "dance"},
		{"redrive"}, {"local", "--time-scale", "0"},
	} {
		if code, _, _ := runCLI(args...); code != 2 {
			t.Errorf("linegate %v exited %d, want 2", args, code)
		}
	}
}

func TestSign(t *testing.T) {
	f := filepath.Join(t.TempDir(), "body.json")
	body := []byte(`{"events":[]}`)
	if err := os.WriteFile(f, body, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runCLI("sign", "--secret", "s3cret", f)
	if code != 0 || strings.TrimSpace(out) != signature.Sign([]byte("s3cret"), body) {
		t.Fatalf("exit %d, out %q", code, out)
	}
}

// send signs what it posts: the receiving end verifies with the same secret.
func TestSendSignsWhatItPosts(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !signature.Verify(body, r.Header.Get(signature.Header), []byte("s3cret")) {
			w.WriteHeader(401)
			return
		}
		got = append(got, string(body))
		w.Write([]byte(`{"accepted":1}`))
	}))
	defer srv.Close()
	for _, args := range [][]string{{"--text", "hi there"}, {"--event", "follow"}, {"--event", "postback", "--data", "a=1"}, {"--event", "unfollow"}} {
		code, out, errOut := runCLI(append([]string{"send", "--url", srv.URL, "--secret", "s3cret"}, args...)...)
		if code != 0 || !strings.HasPrefix(out, "200 OK in ") {
			t.Fatalf("send %v: exit %d, out %q, err %q", args, code, out, errOut)
		}
	}
	if len(got) != 4 || !strings.Contains(got[0], `"text":"hi there"`) || !strings.Contains(got[2], `"data":"a=1"`) {
		t.Fatalf("bodies %q", got)
	}
	code, _, _ := runCLI("send", "--url", srv.URL, "--secret", "wrong", "--text", "x")
	if code != 1 {
		t.Fatalf("a refused send exited %d, want 1", code)
	}
}
