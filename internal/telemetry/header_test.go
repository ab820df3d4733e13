package telemetry

import (
	"errors"
	"strings"
	"testing"
)

func TestParseTraceHeader(t *testing.T) {
	const root = "1-5759e988-bd862e3fe1be46a994272793"
	tests := []struct {
		name    string
		in      string
		want    Header
		wantErr bool
	}{
		{"full", "Root=" + root + ";Parent=53995c3f42cd8ad8;Sampled=1", Header{root, "53995c3f42cd8ad8", true}, false},
		{"not sampled", "Root=" + root + ";Parent=53995c3f42cd8ad8;Sampled=0", Header{root, "53995c3f42cd8ad8", false}, false},
		{"sampling requested", "Root=" + root + ";Sampled=?", Header{root, "", false}, false},
		{"root only", "Root=" + root, Header{Root: root}, false},
		{"spaces and order", " Sampled=1 ; Parent=53995c3f42cd8ad8 ; Root=" + root + " ", Header{root, "53995c3f42cd8ad8", true}, false},
		{"lambda extras", "Root=" + root + ";Parent=53995c3f42cd8ad8;Sampled=1;Lineage=a87bd80c:1|68fd508a:5", Header{root, "53995c3f42cd8ad8", true}, false},
		{"self ignored", "Self=1-67891233-12456789abcdef012345678;Root=" + root, Header{Root: root}, false},
		{"empty", "", Header{}, true},
		{"no root", "Parent=53995c3f42cd8ad8;Sampled=1", Header{}, true},
		{"bad root version", "Root=2-5759e988-bd862e3fe1be46a994272793", Header{}, true},
		{"short root", "Root=1-5759e988-bd862e3f", Header{}, true},
		{"non-hex root", "Root=1-5759e98g-bd862e3fe1be46a994272793", Header{}, true},
		{"bad parent", "Root=" + root + ";Parent=xyz", Header{}, true},
		{"too long", "Root=" + root + ";" + strings.Repeat("a", 3000), Header{}, true},
		{"lowercase key", "root=" + root, Header{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseTraceHeader(tt.in)
			if tt.wantErr {
				if !errors.Is(err, ErrInvalidTraceHeader) {
					t.Fatalf("ParseTraceHeader(%q) error = %v, want ErrInvalidTraceHeader", tt.in, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseTraceHeader(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Fatalf("ParseTraceHeader(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestHeaderString(t *testing.T) {
	const root = "1-5759e988-bd862e3fe1be46a994272793"
	tests := []struct {
		h    Header
		want string
	}{
		{Header{root, "53995c3f42cd8ad8", true}, "Root=" + root + ";Parent=53995c3f42cd8ad8;Sampled=1"},
		{Header{root, "", false}, "Root=" + root + ";Sampled=0"},
		{Header{}, ""},
	}
	for _, tt := range tests {
		if got := tt.h.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.h, got, tt.want)
		}
		if tt.want == "" {
			continue
		}
		back, err := ParseTraceHeader(tt.want)
		if err != nil || back != tt.h {
			t.Errorf("round trip of %q = %+v, %v; want %+v", tt.want, back, err, tt.h)
		}
	}
}

func TestTraceIDBytes(t *testing.T) {
	id := [16]byte{0x57, 0x59, 0xe9, 0x88, 0xbd, 0x86, 0x2e, 0x3f, 0xe1, 0xbe, 0x46, 0xa9, 0x94, 0x27, 0x27, 0x93}
	const want = "1-5759e988-bd862e3fe1be46a994272793"
	if got := FormatTraceID(id); got != want {
		t.Fatalf("FormatTraceID = %q, want %q", got, want)
	}
	back, err := ParseTraceID(want)
	if err != nil || back != id {
		t.Fatalf("ParseTraceID(%q) = %x, %v; want %x", want, back, err, id)
	}
	if up, err := ParseTraceID("1-5759E988-BD862E3FE1BE46A994272793"); err != nil || up != id {
		t.Fatalf("upper-case id = %x, %v", up, err)
	}
	for _, bad := range []string{"", "2-5759e988-bd862e3fe1be46a994272793", "1-5759e988bd862e3fe1be46a994272793", "1-5759e98g-bd862e3fe1be46a994272793"} {
		if _, err := ParseTraceID(bad); !errors.Is(err, ErrInvalidTraceHeader) {
			t.Errorf("ParseTraceID(%q) error = %v, want ErrInvalidTraceHeader", bad, err)
		}
		if IsTraceID(bad) {
			t.Errorf("IsTraceID(%q) = true", bad)
		}
	}
}

// FuzzParseTraceHeader checks that any input either fails with
// ErrInvalidTraceHeader or yields a header that survives a format/parse round
// trip unchanged.
func FuzzParseTraceHeader(f *testing.F) {
	f.Add("Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1")
	f.Fuzz(func(t *testing.T, s string) {
		h, err := ParseTraceHeader(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidTraceHeader) {
				t.Fatalf("error %v does not wrap ErrInvalidTraceHeader", err)
			}
			return
		}
		if !validTraceID(h.Root) {
			t.Fatalf("accepted invalid root %q", h.Root)
		}
		back, err := ParseTraceHeader(h.String())
		if err != nil || back != h {
			t.Fatalf("round trip %q -> %+v -> %q -> %+v, %v", s, h, h.String(), back, err)
		}
	})
}

// FuzzParseTraceID checks that any input either fails with
// ErrInvalidTraceHeader or is an X-Ray trace id whose bytes format back to
// it (in lower case).
func FuzzParseTraceID(f *testing.F) {
	f.Add("1-5759e988-bd862e3fe1be46a994272793")
	f.Add("1-5759E988-BD862E3FE1BE46A994272793")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseTraceID(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidTraceHeader) {
				t.Fatalf("error %v does not wrap ErrInvalidTraceHeader", err)
			}
			return
		}
		if got := FormatTraceID(id); got != strings.ToLower(s) {
			t.Fatalf("ParseTraceID(%q) formats back as %q", s, got)
		}
	})
}
