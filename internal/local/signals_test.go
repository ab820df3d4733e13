package local

import (
	"fmt"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/lineplatform"
)

// The positive signals tests wait for before they check that something did
// not happen: a fixed sleep followed by "nothing happened" tests nothing on
// a slow machine.

// waitSettled waits until a worker has finished with the event for good:
// its outcome is no longer queued or failed (ok, duplicate, held or
// dead-lettered). Whatever its handler did, it has done by then.
func waitSettled(t *testing.T, rt *Runtime, timeout time.Duration, id string) {
	t.Helper()
	waitEvent(t, rt, timeout, id, "settled by a worker", func(e eventView) bool {
		return e.Outcome != "" && e.Outcome != outcomeQueued && e.Outcome != "failed"
	})
}

// fence delivers a text from user and waits for the bot's echo of it:
// events of one chat are handled one at a time in LINE's order, so every
// event of the chat delivered before it has been handled by then, its
// effects included.
func fence(t *testing.T, rt *Runtime, lp *lineplatform.Platform, user string, timeout time.Duration) {
	t.Helper()
	text := fmt.Sprintf("fence %d", time.Now().UnixNano())
	deliver(t, lp, lp.Text(user, text))
	waitMessage(t, rt, timeout, user, "", text)
}

// waitDrained waits until the queue holds no message, visible or in
// flight: every record it had has been handled (a handler's effects come
// before its record's deletion) and none will come back.
func waitDrained(t *testing.T, rt *Runtime, timeout time.Duration, name string) {
	t.Helper()
	var last queueViewJSON
	eventuallySaw(t, timeout, name+" drained", func() bool {
		last = getQueue(t, rt, name)
		return last.Visible == 0 && last.InFlight == 0
	}, func() string { return fmt.Sprintf("%+v", last) })
}
