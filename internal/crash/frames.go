package crash

import (
	"strings"
)

// Frame is one Go stack frame, compacted for a phone screen.
type Frame struct {
	Func string // "github.com/x/y/pkg.(*T).Method"
	Loc  string // "pkg/file.go:12"
}

// TopFrames returns the first max frames of a Go stack (runtime/debug.Stack
// format) below the panic: the frames of debug.Stack, the deferred recover
// function and runtime panic are dropped. A text that is not a Go stack gives
// no frames.
func TopFrames(stack string, max int) []Frame {
	lines := strings.Split(strings.ReplaceAll(stack, "\r\n", "\n"), "\n")
	var all []Frame
	panicAt := -1
	for i := 0; i+1 < len(lines); i++ {
		fn, loc := lines[i], lines[i+1]
		if fn == "" || strings.HasPrefix(fn, "\t") || strings.HasPrefix(fn, "goroutine ") || !strings.HasPrefix(loc, "\t") {
			continue
		}
		f := Frame{Func: funcName(fn), Loc: compactLoc(loc)}
		if f.Func == "panic" || strings.HasPrefix(f.Func, "runtime.gopanic") {
			panicAt = len(all)
		}
		all = append(all, f)
		i++
	}
	if panicAt >= 0 {
		all = all[panicAt+1:]
	}
	if len(all) > max {
		all = all[:max]
	}
	return all
}

// funcName drops the argument list of a frame's function line:
// "main.(*T).M(0xc000010000, {0x1, 0x2})" -> "main.(*T).M".
func funcName(line string) string {
	line = strings.TrimSpace(line)
	if !strings.HasSuffix(line, ")") {
		return line // "created by main.main in goroutine 1"
	}
	depth := 0
	for i := len(line) - 1; i >= 0; i-- {
		switch line[i] {
		case ')':
			depth++
		case '(':
			depth--
			if depth == 0 {
				if i == 0 {
					return line
				}
				return line[:i]
			}
		}
	}
	return line
}

// compactLoc turns "\t/long/path/pkg/file.go:12 +0x1d" into "pkg/file.go:12".
func compactLoc(line string) string {
	line = strings.TrimSpace(line)
	if i := strings.LastIndex(line, " +0x"); i >= 0 {
		line = line[:i]
	}
	parts := strings.Split(line, "/")
	if len(parts) > 2 {
		parts = parts[len(parts)-2:]
	}
	return strings.Join(parts, "/")
}

// SignatureFrames is how many frames below the panic make a crash's stack
// signature: enough to tell two bugs apart, few enough that a panic reached
// through different callers of the same code still groups.
const SignatureFrames = 5

// Signature is what every crash of one bug shares, whichever event hit it:
// the crashed function and the first SignatureFrames frames below the panic
// (function and file:line); a stack that is not a Go stack signs with the
// error text instead. The worker puts it on the dead-letter notice of an
// event that panicked and the notifier computes it from each crash report,
// so both land on the same card (docs/adr/0005-every-failure-pages.md).
func Signature(function, stack, errText string) string {
	var b strings.Builder
	b.WriteString(function)
	frames := TopFrames(stack, SignatureFrames)
	for _, f := range frames {
		b.WriteString("\n" + f.Func + " " + f.Loc)
	}
	if len(frames) == 0 {
		b.WriteString("\n" + errText)
	}
	return b.String()
}

// Signature is the report's stack signature (see the function Signature).
func (r Report) Signature() string { return Signature(r.Function, r.Stack, r.Error) }
