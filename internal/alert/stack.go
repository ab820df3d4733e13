package alert

import (
	"strings"
)

// frame is one Go stack frame, compacted for a phone screen.
type frame struct {
	fn  string // "github.com/x/y/pkg.(*T).Method"
	loc string // "pkg/file.go:12"
}

// topFrames returns the first max frames of a Go stack (runtime/debug.Stack
// format) below the panic: the frames of debug.Stack, the deferred recover
// function and runtime panic are dropped. A text that is not a Go stack gives
// no frames.
func topFrames(stack string, max int) []frame {
	lines := strings.Split(strings.ReplaceAll(stack, "\r\n", "\n"), "\n")
	var all []frame
	panicAt := -1
	for i := 0; i+1 < len(lines); i++ {
		fn, loc := lines[i], lines[i+1]
		if fn == "" || strings.HasPrefix(fn, "\t") || strings.HasPrefix(fn, "goroutine ") || !strings.HasPrefix(loc, "\t") {
			continue
		}
		f := frame{fn: funcName(fn), loc: compactLoc(loc)}
		if f.fn == "panic" || strings.HasPrefix(f.fn, "runtime.gopanic") {
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
