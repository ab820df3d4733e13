package alert

import (
	"strings"
	"testing"
)

func TestStackLinesForeignText(t *testing.T) {
	lines := stackLines("Traceback (most recent call last):\n\n  File \"x.py\", line 1\n" + strings.Repeat("more\n", 20))
	if len(lines) != maxFrames || lines[0] != "Traceback (most recent call last):" || lines[1] != `File "x.py", line 1` {
		t.Errorf("stackLines = %q", lines)
	}
}
