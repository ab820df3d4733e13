package postback_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/postback"
	"github.com/linegate/linegate/internal/testclock"
)

func signer(t *testing.T, key string, clk *testclock.Clock) *postback.Signer {
	t.Helper()
	s, err := postback.NewSigner([]byte(key), clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSignAndVerify(t *testing.T) {
	clk := testclock.New(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	s := signer(t, "a key only the stack knows, 32b", clk)
	data, err := s.Sign(postback.Redrive, "linegate-InteractiveDLQ", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Verify(data)
	if err != nil || c.Action != postback.Redrive || c.Target != "linegate-InteractiveDLQ" || c.ID == "" {
		t.Fatalf("Verify = %+v, %v", c, err)
	}
	other := signer(t, "another stack's key, 32 bytes!!", clk)
	tampered := strings.Replace(data, "redrive", "silence", 1)
	retargeted := strings.Replace(data, data[len(postback.Prefix+"redrive."):strings.LastIndex(data[:strings.LastIndex(data, ".")], ".")], "bGluZWdhdGUtQmFja2dyb3VuZERMUQ", 1)
	tests := []struct {
		name string
		s    *postback.Signer
		data string
		want error
	}{
		{"another key", other, data, postback.ErrForged},
		{"action altered", s, tampered, postback.ErrForged},
		{"target altered", s, retargeted, postback.ErrForged},
		{"mac altered", s, data[:len(data)-2] + "AA", postback.ErrForged},
		// A MAC compared as a prefix, either way round, would pass these.
		{"empty mac", s, data[:strings.LastIndexByte(data, '.')+1], postback.ErrForged},
		{"truncated mac", s, data[:len(data)-1], postback.ErrForged},
		{"one character of mac", s, data[:strings.LastIndexByte(data, '.')+2], postback.ErrForged},
		{"mac with more after it", s, data + "A", postback.ErrForged},
		{"the bot's own data", s, "action=buy&item=1", postback.ErrNotOurs},
		{"no mac", s, postback.Prefix + "x", postback.ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.s.Verify(tt.data); !errors.Is(err, tt.want) {
				t.Fatalf("Verify(%q) = %v, want %v", tt.data, err, tt.want)
			}
		})
	}
	clk.Advance(time.Hour)
	if _, err := s.Verify(data); !errors.Is(err, postback.ErrExpired) {
		t.Fatalf("after the expiry: %v, want ErrExpired", err)
	}
}

func TestSignRefusesWhatLINECannotCarry(t *testing.T) {
	s := signer(t, "0123456789abcdef", testclock.New(time.Now()))
	if _, err := s.Sign(postback.Ack, strings.Repeat("a", 250), time.Hour); !errors.Is(err, postback.ErrTooLong) {
		t.Fatalf("err = %v, want ErrTooLong", err)
	}
	if _, err := postback.NewSigner([]byte("short"), nil); err == nil {
		t.Fatal("a 5-byte key was accepted")
	}
}

// FuzzVerify: no data a user can send in a postback makes Verify panic or
// accept it without the key.
func FuzzVerify(f *testing.F) {
	clk := testclock.New(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	s, _ := postback.NewSigner([]byte("fuzzing key 0123456789"), clk.Now)
	good, _ := s.Sign(postback.Redrive, "q", time.Hour)
	f.Add(good)
	f.Add("lg1.redrive.cQ.1798761600.AAAAAAAAAAAAAAAAAAAAAA")
	f.Add("action=buy")
	f.Fuzz(func(t *testing.T, data string) {
		c, err := s.Verify(data)
		if err == nil && data != good {
			// Only data signed with the key verifies; the fuzzer cannot sign.
			if again, _ := s.Sign(c.Action, c.Target, c.Expires.Sub(clk.Now())); again != data {
				t.Fatalf("accepted %q as %+v", data, c)
			}
		}
	})
}
