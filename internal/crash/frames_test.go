package crash

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

func TestTopFramesOfARealStack(t *testing.T) {
	b, err := os.ReadFile("testdata/stack.txt")
	if err != nil {
		t.Fatal(err)
	}
	got := TopFrames(string(b), 8)
	want := []Frame{
		{"github.com/Example2/LineGateBot/internal/handlers.(*Handler).OnMessage-fm.(*Handler).OnMessage.func1", "handlers/h.go:11"},
		{"github.com/Example2/LineGateBot/internal/handlers.(*Handler).OnMessage", "handlers/h.go:12"},
		{"github.com/Example2/LineGateBot/internal/handlers.(*Router[...]).Dispatch", "handlers/h.go:5"},
		{"main.main.func1", "LineGateBot/main.go:25"},
		{"created by main.main in goroutine 1", "LineGateBot/main.go:13"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("topFrames =\n%v\nwant\n%v", got, want)
	}
}

func TestTopFrames(t *testing.T) {
	var long strings.Builder
	long.WriteString("goroutine 1 [running]:\n")
	for i := range 40 {
		fmt.Fprintf(&long, "main.f%d(0xc000010000, {0x1, 0x2})\n\t/src/app/main.go:%d +0x1d\n", i, i)
	}
	tests := []struct {
		name, stack string
		want        int
		first       Frame
	}{
		{"caps at max", long.String(), 8, Frame{"main.f0", "app/main.go:0"}},
		{"windows line ends", "goroutine 1 [running]:\r\nmain.g()\r\n\t/src/x.go:1 +0x1\r\n", 1, Frame{"main.g", "src/x.go:1"}},
		{"not a go stack", "Traceback (most recent call last):\n  File \"x.py\"", 0, Frame{}},
		{"empty", "", 0, Frame{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := TopFrames(tt.stack, 8)
			if len(got) != tt.want {
				t.Fatalf("%d frames, want %d: %v", len(got), tt.want, got)
			}
			if tt.want > 0 && got[0] != tt.first {
				t.Errorf("first frame %v, want %v", got[0], tt.first)
			}
		})
	}
}

func TestFuncName(t *testing.T) {
	tests := []struct{ in, want string }{
		{"main.f(0xc000010000, {0x1, 0x2})", "main.f"},
		{"main.(*T).M(...)", "main.(*T).M"},
		{"pkg.(*Router[...]).Dispatch(...)", "pkg.(*Router[...]).Dispatch"},
		{"panic({0x4bcd40?, 0xc000123456?})", "panic"},
		{"created by main.main in goroutine 1", "created by main.main in goroutine 1"},
		{"unbalanced)", "unbalanced)"},
		{"(x)", "(x)"},
	}
	for _, tt := range tests {
		if got := funcName(tt.in); got != tt.want {
			t.Errorf("funcName(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestCompactLoc(t *testing.T) {
	tests := []struct{ in, want string }{
		{"\t/usr/local/go/src/runtime/panic.go:860 +0x13a", "runtime/panic.go:860"},
		{"\t/src/h.go:11", "src/h.go:11"},
		{"\th.go:11", "h.go:11"},
	}
	for _, tt := range tests {
		if got := compactLoc(tt.in); got != tt.want {
			t.Errorf("compactLoc(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
