package console

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"sync"

	"github.com/linegate/linegate/internal/ring"
)

// Bounds of a LogRing.
const (
	DefaultLogLines = 5000
	maxLogLine      = 16 << 10 // longer lines are cut (and no longer JSON: dropped)
)

// LogRing is an io.Writer that keeps the newest JSON log lines the local
// functions write (slog's JSON, one object per line), for the console's
// Logs pane. EMF metric lines (an "_aws" member and no log message) are left
// out: they are metrics, not events. A record's log line that carries its
// invocation's metrics (the worker folds them into it) is a log line. The logs never hold a secret, a token or a
// message text (internal/local's log-scan test), so neither does the ring.
type LogRing struct {
	onChange func(topics ...string)

	mu      sync.Mutex
	partial []byte
	lines   *ring.Buffer[json.RawMessage]
}

// NewLogRing keeps at most n lines (DefaultLogLines when n ≤ 0).
func NewLogRing(n int, onChange func(topics ...string)) *LogRing {
	if n <= 0 {
		n = DefaultLogLines
	}
	if onChange == nil {
		onChange = func(...string) {}
	}
	return &LogRing{onChange: onChange, lines: ring.New[json.RawMessage](n)}
}

// Write takes any number of bytes; each complete line that is a JSON
// object (and not an EMF record) is kept.
func (l *LogRing) Write(p []byte) (int, error) {
	l.mu.Lock()
	kept := false
	data := p
	if len(l.partial) > 0 {
		data = append(l.partial, p...)
		l.partial = nil
	}
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		if l.keepLocked(data[:i]) {
			kept = true
		}
		data = data[i+1:]
	}
	if len(data) > 0 && len(data) <= maxLogLine {
		l.partial = slices.Clone(data)
	}
	l.mu.Unlock()
	if kept {
		l.onChange(TopicLogs)
	}
	return len(p), nil
}

func (l *LogRing) keepLocked(line []byte) bool {
	line = bytes.TrimSpace(line)
	if len(line) < 2 || len(line) > maxLogLine || line[0] != '{' || !json.Valid(line) {
		return false
	}
	if bytes.Contains(line, []byte(`"_aws"`)) {
		var head struct {
			Message *string `json:"message"`
		}
		if json.Unmarshal(line, &head) != nil || head.Message == nil {
			return false // metrics only
		}
	}
	l.lines.Push(slices.Clone(line))
	return true
}

// Lines returns the newest lines, oldest first, at most limit; with an id,
// only the lines whose webhookEventId is id.
func (l *LogRing) Lines(id string, limit int) []json.RawMessage {
	l.mu.Lock()
	all := l.lines.All()
	l.mu.Unlock()
	out := []json.RawMessage{}
	for _, line := range all {
		if id != "" {
			if !bytes.Contains(line, []byte(id)) {
				continue
			}
			var h struct {
				WebhookEventID string `json:"webhookEventId"`
			}
			if json.Unmarshal(line, &h) != nil || h.WebhookEventID != id {
				continue
			}
		}
		out = append(out, line)
	}
	if limit > 0 && len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out
}

// Handler serves GET /_local/logs[?webhookEventId=ID][&limit=N] (default
// 500): the kept lines as a JSON array of the log objects.
func (l *LogRing) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		limit := 500
		if n, err := strconv.Atoi(r.URL.Query().Get("limit")); err == nil && n > 0 {
			limit = min(n, DefaultLogLines)
		}
		WriteJSON(w, http.StatusOK, l.Lines(r.URL.Query().Get("webhookEventId"), limit))
	})
}
