package crash

import (
	"encoding/base64"
	"os"
	"runtime/debug"
	"strings"
	"testing"
	"unicode"
)

// fakeAccessToken is shaped like a long-lived LINE channel access token:
// 172 characters of standard base64 with "+", "/" and "=" padding.
var fakeAccessToken = func() string {
	b := make([]byte, 128)
	for i := range b {
		b[i] = byte(i*37 + 11)
	}
	return base64.StdEncoding.EncodeToString(b)
}()

const (
	fakeChannelSecret = "8f3c0d6b2a9e4f1c7b5d0e2a4c6f8b1d"         // 32 hex
	fakeAWSSecret     = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY" // AWS docs example, 40 chars
	fakeAccessKeyID   = "AKIAIOSFODNN7EXAMPLE"
	fakeSessionKeyID  = "ASIAXYZ1234567890ABC"
	fakeJWT           = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
	fakeSignature     = "n7b3tB2dAEqEGtB6sfaq0Uv1ToOjHxPHvN8kxU/Z+2w="
)

func TestScrubRedacts(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		secrets []string
		want    string
	}{
		{"explicit secret", "token=mysecretvalue; retry", []string{"mysecretvalue"}, "token=[REDACTED]; retry"},
		{"explicit secret every occurrence", "a hunter22 b hunter22", []string{"hunter22"}, "a [REDACTED] b [REDACTED]"},
		{"overlapping secrets leave no fragment", "xx abcdefghi yy", []string{"abcdef", "defghi"}, "xx [REDACTED] yy"},
		{"bearer token", "Authorization: Bearer abc.def-ghi_jk~l+m/n==", nil, "Authorization: Bearer [REDACTED]"},
		{"bearer lower case", "header bearer xyz123 sent", nil, "header bearer [REDACTED] sent"},
		{"signature header line", "x-line-signature: " + fakeSignature, nil, "x-line-signature: [REDACTED]"},
		{"signature in JSON", `{"x-line-signature":"3q2+7w=="}`, nil, `{"x-line-signature":"[REDACTED]"}`},
		{"signature in printed http.Header", "map[X-Line-Signature:[3q2+7w==]]", nil, "map[X-Line-Signature:[[REDACTED]]]"},
		{"aws access key id", "creds " + fakeAccessKeyID + " leaked", nil, "creds [REDACTED] leaked"},
		{"aws temporary key id", "key=" + fakeSessionKeyID, nil, "key=[REDACTED]"},
		{"aws secret access key", "secret " + fakeAWSSecret + " end", nil, "secret [REDACTED] end"},
		{"channel access token in JSON", `{"token":"` + fakeAccessToken + `"}`, nil, `{"token":"[REDACTED]"}`},
		{"channel access token in error", "line: 401 for token " + fakeAccessToken, nil, "line: 401 for token [REDACTED]"},
		{"channel secret 32 hex", "secret=" + fakeChannelSecret, nil, "secret=[REDACTED]"},
		{"64 hex key", "key " + strings.Repeat("ab12", 16), nil, "key [REDACTED]"},
		{"jwt", "assertion " + fakeJWT + " rejected", nil, "assertion [REDACTED] rejected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Scrub(tt.in, tt.secrets...); got != tt.want {
				t.Errorf("Scrub(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestScrubKeeps(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		secrets []string
	}{
		{"panic text", "runtime error: index out of range [5] with length 0", nil},
		{"nil map", "assignment to entry in nil map", nil},
		{"hex addresses", "panic({0x4bcd40?, 0xc000123456?})\n\t+0x13a", nil},
		{"go source path with digits and capitals",
			"\t/home/runner/work/LineGate2/linegate/internal/worker/someVeryLongDirectoryName1/worker.go:88 +0x1d", nil},
		{"module cache path", "/root/go/pkg/mod/github.com/line/line-bot-sdk-go/v8@v8.14.0/linebot/messaging_api/api_messaging_api.go:120", nil},
		{"function name", "github.com/linegate/linegate/internal/worker.(*Worker).handle(0xc000123456, {0x1234, 0x5})", nil},
		{"line user id", "push to U4af4980629a0e3c1b2d5f6e7a8b9c0d1 failed", nil},
		{"group id", "C4af4980629a0e3c1b2d5f6e7a8b9c0d1", nil},
		{"webhook event id", "webhookEventId=01FZ74A0TDDPYRVKNK77XKC3ZR", nil},
		{"xray trace id", "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1", nil},
		{"uuid", "request c6af9ac6-7b61-11e6-9a41-93e8deadbeef", nil},
		{"long identifier without digits", "handleMessageEventWithoutAnyDigitsInItsNameAtAll failed", nil},
		{"31 hex is not a secret", "id " + fakeChannelSecret[:31], nil},
		{"short explicit secret ignored", "abc is not replaced: abc", []string{"abc", ""}},
		{"bearer without token", "Bearer", nil},
		{"redaction marker is stable", "already [REDACTED] here", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Scrub(tt.in, tt.secrets...); got != tt.in {
				t.Errorf("Scrub changed harmless text\n got %q\nwant %q", got, tt.in)
			}
		})
	}
}

func TestScrubKeepsRealGoStacks(t *testing.T) {
	fixture, err := os.ReadFile("testdata/stack.txt")
	if err != nil {
		t.Fatal(err)
	}
	var live []byte
	func() {
		defer func() {
			if recover() != nil {
				live = debug.Stack()
			}
		}()
		var m map[string]int
		m["boom"]++ //lint:ignore SA5000 the test needs a real runtime panic
	}()
	for name, stack := range map[string]string{"fixture": string(fixture), "live": string(live)} {
		t.Run(name, func(t *testing.T) {
			if !strings.Contains(stack, "goroutine ") || !strings.Contains(stack, ".go:") {
				t.Fatalf("not a Go stack: %q", stack)
			}
			if got := Scrub(stack, "notpresent-secret"); got != stack {
				t.Errorf("stack changed by Scrub:\n%s\n---- want ----\n%s", got, stack)
			}
		})
	}
}

func TestScrubStackWithSecretInside(t *testing.T) {
	fixture, err := os.ReadFile("testdata/stack.txt")
	if err != nil {
		t.Fatal(err)
	}
	// A stack with a secret pasted into a frame line (as a string argument
	// printed by a custom panic) loses the secret and keeps every other line.
	lines := strings.Split(string(fixture), "\n")
	lines[1] += " token=" + fakeAccessToken
	got := Scrub(strings.Join(lines, "\n"))
	if strings.Contains(got, fakeAccessToken) {
		t.Fatal("access token survived")
	}
	gotLines := strings.Split(got, "\n")
	for i, l := range strings.Split(string(fixture), "\n") {
		if i == 1 {
			continue
		}
		if gotLines[i] != l {
			t.Errorf("line %d changed: %q, want %q", i, gotLines[i], l)
		}
	}
}

// FuzzScrub checks that an explicit alphanumeric secret never survives,
// whatever surrounds it. (A secret that is part of the marker itself, such as
// "REDACT", cannot be removed and is excluded.)
func FuzzScrub(f *testing.F) {
	f.Add("token=mysecretvalue", "mysecretvalue")
	f.Add("Bearer abcdef "+fakeAccessToken, "abcdef")
	f.Add("x-line-signature: "+fakeSignature, fakeChannelSecret)
	f.Add("ababababab", "ababab")
	f.Fuzz(func(t *testing.T, s, secret string) {
		got := Scrub(s, secret)
		if len(secret) < MinSecretLen || strings.Contains(Redacted, secret) {
			return
		}
		for _, r := range secret {
			if r > unicode.MaxASCII || !(unicode.IsLetter(r) || unicode.IsDigit(r)) {
				return
			}
		}
		if strings.Contains(got, secret) {
			t.Fatalf("Scrub(%q, %q) = %q still contains the secret", s, secret, got)
		}
	})
}

func TestScrubLargeInputIsLinear(t *testing.T) {
	// A periodic text with a periodic secret was quadratic with an
	// overlapping search; it must finish well within the test timeout, and
	// adjacent occurrences collapse into one marker.
	s := strings.Repeat("a", 1<<20)
	if got := Scrub(s, strings.Repeat("a", 1<<16)); got != Redacted {
		t.Fatalf("Scrub = %d bytes starting %q, want %q", len(got), got[:min(len(got), 30)], Redacted)
	}
}
