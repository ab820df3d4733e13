package crash

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/linegate/linegate/internal/golden"
)

var crashTime = time.Date(2026, 3, 14, 1, 2, 3, 456_000_000, time.UTC)

// workerReport is the report of a crash of linegate-worker on a message
// event, at crashTime, with every field set.
func workerReport(errText, stack string, receiveCount int) Report {
	return Report{
		Error:          errText,
		Stack:          stack,
		Function:       "linegate-worker",
		EventType:      "message",
		WebhookEventID: "01FZ74A0TDDPYRVKNK77XKC3ZR",
		TraceID:        "1-5759e988-bd862e3fe1be46a994272793",
		Region:         "ap-northeast-1",
		Time:           crashTime,
		ReceiveCount:   receiveCount,
	}
}

func TestNewFillsAndScrubs(t *testing.T) {
	stack := []byte("goroutine 1 [running]:\nmain.f()\n\t/src/main.go:3 +0x1d\nAuthorization: Bearer " + fakeAccessToken + "\n")
	r := New(fmt.Errorf("push failed with secret %s and token %s", "s3cr3t-value", fakeAccessToken), stack,
		WithSecrets("s3cr3t-value"),
		WithFunction("linegate-worker"),
		WithEvent("message", "01FZ74A0TDDPYRVKNK77XKC3ZR"),
		WithTraceID(" 1-5759e988-bd862e3fe1be46a994272793 "),
		WithRegion("ap-northeast-1"),
		WithReceiveCount(3),
		WithTime(crashTime.In(time.FixedZone("JST", 9*3600))),
	)
	want := workerReport("push failed with secret [REDACTED] and token [REDACTED]",
		"goroutine 1 [running]:\nmain.f()\n\t/src/main.go:3 +0x1d\nAuthorization: Bearer [REDACTED]\n", 3)
	if r != want {
		t.Errorf("New =\n%+v\nwant\n%+v", r, want)
	}
	if r.Time.Location() != time.UTC {
		t.Errorf("Time location = %v, want UTC", r.Time.Location())
	}
}

func TestNewPanicValues(t *testing.T) {
	tests := []struct {
		name      string
		recovered any
		want      string
	}{
		{"string", "boom", "boom"},
		{"error", errors.New("db down"), "db down"},
		{"int", 42, "42"},
		{"empty string", "", "panic(string)"},
		{"runtime error", func() (v any) {
			defer func() { v = recover() }()
			var m map[string]int
			m["x"] = 1 //lint:ignore SA5000 the test needs a real runtime panic
			return nil
		}(), "assignment to entry in nil map"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(tt.recovered, nil, WithTime(crashTime))
			if r.Error != tt.want {
				t.Errorf("Error = %q, want %q", r.Error, tt.want)
			}
		})
	}
}

func TestNewDefaultsTimeToNow(t *testing.T) {
	before := time.Now()
	r := New("x", nil)
	if r.Time.Before(before.Add(-time.Second)) || r.Time.After(time.Now().Add(time.Second)) {
		t.Errorf("Time = %v, want about now", r.Time)
	}
}

func TestNewCapsSizes(t *testing.T) {
	r := New(strings.Repeat("é", MaxErrorBytes), []byte(strings.Repeat("frame\n", MaxStackBytes)), WithTime(crashTime))
	if len(r.Error) > MaxErrorBytes || !utf8.ValidString(r.Error) || !strings.HasSuffix(r.Error, "[truncated]") {
		t.Errorf("Error: %d bytes, valid UTF-8 %v, suffix %q", len(r.Error), utf8.ValidString(r.Error), r.Error[len(r.Error)-20:])
	}
	if len(r.Stack) > MaxStackBytes || !strings.HasPrefix(r.Stack, "frame\nframe\n") {
		t.Errorf("Stack: %d bytes, want ≤ %d and the first frames kept", len(r.Stack), MaxStackBytes)
	}
	small := New("ok", []byte("s"), WithTime(crashTime))
	if small.Error != "ok" || small.Stack != "s" {
		t.Errorf("small report changed: %+v", small)
	}
}

func TestMarshalGolden(t *testing.T) {
	r := workerReport("runtime error: index out of range [5] with length 0", "goroutine 7 [running]:\nmain.f()\n\t/src/main.go:3 +0x1d\n", 2)
	got, err := r.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "report.golden.json"), append(got, '\n'))
	back, err := Parse(got)
	if err != nil {
		t.Fatal(err)
	}
	if back != r {
		t.Errorf("round trip =\n%+v\nwant\n%+v", back, r)
	}
}

func TestParseRejects(t *testing.T) {
	tests := []struct {
		name, body, wantMsg string
	}{
		{"not json", "ALARM: something", "invalid crash report"},
		{"json array", `[1,2]`, "invalid crash report"},
		{"missing error", `{"time":"2026-03-14T01:02:03Z","stack":"s"}`, "missing error"},
		{"blank error", `{"error":"  ","time":"2026-03-14T01:02:03Z"}`, "missing error"},
		{"missing time", `{"error":"boom"}`, "missing time"},
		{"missing both", `{}`, "missing error, time"},
		{"bad time", `{"error":"boom","time":"yesterday"}`, "invalid crash report"},
		{"wrong type", `{"error":1,"time":"2026-03-14T01:02:03Z"}`, "invalid crash report"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.body))
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse error = %v, want ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %q does not say %q", err, tt.wantMsg)
			}
		})
	}
}

// FuzzParse feeds arbitrary SNS message bodies to Parse: it must never panic,
// and whatever it accepts must satisfy the contract and survive a round trip.
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := Parse(body)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if strings.TrimSpace(r.Error) == "" || r.Time.IsZero() {
			t.Fatalf("accepted a report without error or time: %+v", r)
		}
		b, err := r.Marshal()
		if err != nil {
			return // e.g. a year outside RFC 3339's range cannot be re-encoded
		}
		back, err := Parse(b)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", b, err)
		}
		if back.Error != r.Error || !back.Time.Equal(r.Time) || back.Stack != r.Stack {
			t.Fatalf("round trip changed the report: %+v vs %+v", back, r)
		}
	})
}

// A named channel's crash report carries its channel through Marshal and
// Parse; the default channel's writes no channel key.
func TestReportChannel(t *testing.T) {
	for _, ch := range []string{"", "brand-tw"} {
		r := New(errors.New("boom"), []byte("goroutine 1"), WithChannel(ch), WithTime(crashTime))
		b, err := r.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if ch == "" && strings.Contains(string(b), `"channel"`) {
			t.Fatalf("the default channel's report has a channel key: %s", b)
		}
		back, err := Parse(b)
		if err != nil || back.Channel != ch {
			t.Fatalf("Parse(Marshal) channel = %q (%v), want %q", back.Channel, err, ch)
		}
	}
}
