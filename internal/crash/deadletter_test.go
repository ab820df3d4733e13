package crash

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

func TestDeadLetterRoundTripAndScrub(t *testing.T) {
	stack, err := os.ReadFile("testdata/stack.txt")
	if err != nil {
		t.Fatal(err)
	}
	rep := New("boom", stack, WithFunction("linegate-worker"))
	tests := []struct {
		name     string
		err      error
		panicked *Report
		wantSig  bool
	}{
		{"a permanent failure", errors.New("bad input, token " + fakeAccessToken), nil, false},
		{"a panic", fmt.Errorf("handler panicked"), &rep, true},
		{"no error text", nil, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDeadLetter("linegate-InteractiveDLQ.fifo", "linegate-InteractiveQueue.fifo", "permanent", tt.err, tt.panicked,
				crashTime.In(time.FixedZone("JST", 9*3600)))
			if strings.Contains(d.Error, fakeAccessToken) {
				t.Fatalf("the token reached the notice: %q", d.Error)
			}
			if (d.Signature != "") != tt.wantSig || (len(d.Frames) > 0) != tt.wantSig {
				t.Fatalf("signature %q frames %v, want a signature: %v", d.Signature, d.Frames, tt.wantSig)
			}
			if tt.wantSig && d.Signature != rep.Signature() {
				t.Fatalf("the notice's signature differs from its crash report's:\n%s\n%s", d.Signature, rep.Signature())
			}
			b, err := d.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseDeadLetter(b)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(d) || !got.Time.Equal(crashTime) {
				t.Fatalf("round trip:\n%+v\nwant\n%+v", got, d)
			}
		})
	}
}

func TestDeadLetterErrorIsCapped(t *testing.T) {
	d := NewDeadLetter("q", "", "permanent", errors.New(strings.Repeat("é", MaxDeadLetterError)), nil, crashTime)
	if len(d.Error) > MaxDeadLetterError || !strings.HasSuffix(d.Error, "[truncated]") {
		t.Fatalf("error of %d bytes: %q…", len(d.Error), d.Error[:20])
	}
}

func TestParseDeadLetterRefuses(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"not json", "dead", "invalid"},
		{"no queue", `{"reason":"permanent","time":"2026-03-14T01:02:03Z"}`, "missing queue"},
		{"no reason, no time", `{"queue":"q"}`, "missing reason, time"},
		{"an array", `[1]`, "invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseDeadLetter([]byte(tt.body))
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrInvalid saying %q", err, tt.want)
			}
		})
	}
}

// A crash reached through another caller of the same code signs alike; a
// crash at another line does not.
func TestSignature(t *testing.T) {
	stack, err := os.ReadFile("testdata/stack.txt")
	if err != nil {
		t.Fatal(err)
	}
	a := Signature("fn", string(stack), "boom")
	if a != Signature("fn", string(stack), "another value") {
		t.Error("the panic value changed a Go stack's signature")
	}
	if a == Signature("other-fn", string(stack), "boom") {
		t.Error("two functions sign alike")
	}
	moved := strings.Replace(string(stack), "h.go:11", "h.go:12", 1)
	if a == Signature("fn", moved, "boom") {
		t.Error("a panic on another line signs alike")
	}
	if got := Signature("fn", "not a go stack", "boom"); got != "fn\nboom" {
		t.Errorf("foreign stack: %q, want the error text", got)
	}
}

// FuzzParseDeadLetter: no SNS message body makes the parser panic, and
// whatever it accepts has the required fields and survives a round trip.
func FuzzParseDeadLetter(f *testing.F) {
	d := NewDeadLetter("q", "src", "permanent", errors.New("boom"), nil, crashTime)
	b, _ := d.Marshal()
	f.Add(b)
	f.Add([]byte(`{"queue":"q","reason":"r","time":"2026-01-01T00:00:00Z","frames":["a"]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := ParseDeadLetter(body)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if strings.TrimSpace(got.Queue) == "" || strings.TrimSpace(got.Reason) == "" || got.Time.IsZero() {
			t.Fatalf("accepted a notice without its required fields: %+v", got)
		}
		again, err := got.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParseDeadLetter(again); err != nil {
			t.Fatalf("a parsed notice does not parse again: %v", err)
		}
	})
}
