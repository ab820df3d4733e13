package channel

import (
	"errors"
	"strings"
	"testing"
)

func TestValid(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"b", true},
		{"brand-tw", true},
		{"staging2", true},
		{"0", true},
		{strings.Repeat("a", 32), true},
		{strings.Repeat("a", 33), false},
		{"", false},
		{"default", false},
		{"B", false},
		{"-b", false},
		{"b-", false},
		{"b_c", false},
		{"b/c", false},
		{"b c", false},
		{"ü", false},
	}
	for _, tt := range tests {
		err := Valid(tt.name)
		if (err == nil) != tt.ok {
			t.Errorf("Valid(%q) = %v, want ok=%v", tt.name, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrName) {
			t.Errorf("Valid(%q) error %v does not wrap ErrName", tt.name, err)
		}
	}
}

func TestParseAndLabel(t *testing.T) {
	for in, want := range map[string]string{"": Default, "default": Default, " b ": "b", "brand-tw": "brand-tw"} {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := Parse("B"); !errors.Is(err, ErrName) {
		t.Errorf("Parse(B) = %v, want ErrName", err)
	}
	if Label(Default) != "default" || Label("b") != "b" {
		t.Errorf("labels %q %q", Label(Default), Label("b"))
	}
	if EnvSuffix("brand-tw") != "BRAND_TW" || EnvSuffix("b") != "B" {
		t.Errorf("env suffixes %q %q", EnvSuffix("brand-tw"), EnvSuffix("b"))
	}
}

// The default channel's keys are the keys of a stack without channels;
// a named channel's never equal another channel's, nor any default key
// (a webhookEventId, a digest, a chat ID, a prefixed kind).
func TestScope(t *testing.T) {
	keys := []string{"01HZXYZABCDEFGHJKMNPQRSTVW", "sha256:00ff", "hashed:00ff", "U0123456789abcdef0123456789abcdef", "session#U1", ""}
	for _, k := range keys {
		if got := Scope(Default, k); got != k {
			t.Errorf("Scope(default, %q) = %q, want it unchanged", k, got)
		}
		a, b := Scope("a", k), Scope("b", k)
		if a == b || a == k || b == k {
			t.Errorf("Scope of %q: a %q, b %q: not apart", k, a, b)
		}
		for _, other := range keys {
			if a == other {
				t.Errorf("Scope(a, %q) = %q, a default key", k, a)
			}
		}
		if ch, key := Of(a); ch != "a" || key != k {
			t.Errorf("Of(%q) = %q, %q", a, ch, key)
		}
		if ch, key := Of(k); ch != Default || key != k {
			t.Errorf("Of(%q) = %q, %q; want the default channel", k, ch, key)
		}
	}
	// "ab" + "/x" and "a" + "b/x" must not meet: names cannot hold "/".
	if Scope("ab", "x") == Scope("a", "b/x") {
		t.Error("scopes meet across the separator")
	}
	if ch, key := Of("ch:NOT A NAME/x"); ch != Default || key != "ch:NOT A NAME/x" {
		t.Errorf("Of of a malformed prefix = %q, %q", ch, key)
	}
}

// FuzzParse: a name as a person or a URL path gives it (linegate send
// --channel, /webhook/NAME, the console) is either refused with ErrName or
// a valid name that scopes keys apart from the default channel's and reads
// back with Of; the environment suffix of a valid name is a valid
// environment variable suffix.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "default", "b", "brand-tw", "B", "-b", "b-", "a/b", "ch:x", " b ", strings.Repeat("x", 33), "ü"} {
		f.Add(s, "01HZXYZABCDEFGHJKMNPQRSTVW")
	}
	f.Fuzz(func(t *testing.T, s, key string) {
		ch, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrName) {
				t.Fatalf("Parse(%q) error %v does not wrap ErrName", s, err)
			}
			return
		}
		if ch == Default {
			return
		}
		if Valid(ch) != nil {
			t.Fatalf("Parse(%q) = %q, which Valid refuses", s, ch)
		}
		scoped := Scope(ch, key)
		if scoped == key || scoped == Scope(Default, key) {
			t.Fatalf("Scope(%q, %q) = %q: not apart from the default channel's key", ch, key, scoped)
		}
		if gotCh, gotKey := Of(scoped); gotCh != ch || gotKey != key {
			t.Fatalf("Of(Scope(%q, %q)) = %q, %q", ch, key, gotCh, gotKey)
		}
		for _, r := range EnvSuffix(ch) {
			if !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_') {
				t.Fatalf("EnvSuffix(%q) = %q: not an environment variable suffix", ch, EnvSuffix(ch))
			}
		}
	})
}
