package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/linemock"
	"github.com/linegate/linegate/internal/lineplatform"
	"github.com/linegate/linegate/internal/local"
	"github.com/linegate/linegate/internal/localstate"
)

// crashToken is the channel access token the test's LINE API accepts.
const crashToken = "crash-test-token"

// freeAddr is a loopback address nothing listens on now: both runs of the
// crash test serve on it, so LINE's redeliveries reach the second.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// completedAt reads the idempotency records a killed process left in its
// state directory: which webhookEventIds were completed when it died.
func completedAt(t *testing.T, dir string) map[string]bool {
	t.Helper()
	st, err := localstate.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	done := map[string]bool{}
	err = st.Each("dynamodb.items", func(_, v []byte) error {
		var it map[string]map[string]string
		if json.Unmarshal(v, &it) == nil && it["status"]["S"] == "completed" {
			done[it["id"]["S"]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return done
}

// TestSIGKILLMidBurstLosesNothingAcknowledged kills `linegate local --state
// DIR` (a real process) with SIGKILL in the middle of a burst, starts it
// again on the same DIR and address, and checks what LINE sees.
//
// LINE is played by the test, in the test's own process, so it outlives the
// kill as LINE outlives a crashed bot: it delivers the burst with webhook
// redelivery on (a body whose request the kill cut is sent again, to the
// restarted process), and it is the Messaging API the bot replies to
// (LINE_CHANNEL_ACCESS_TOKEN and LINE_API_BASE_URL point the functions at
// it); its record of sent messages is the durable observable.
//
// "Handled exactly once" means: every event whose webhook request got a 200
// (before or after the kill) has its echo recorded by LINE, and no event's
// echo is recorded twice — except an event whose handler had already sent
// its reply and whose completion the kill cut off (its idempotency record,
// read from DIR between the kill and the restart, not "completed"): that
// window, between a handler's effect and its completion mark, exists in
// Lambda too (README: wrap such effects in bot.Once), and the test counts
// those events and requires that every duplicate is one of them.
func TestSIGKILLMidBurstLosesNothingAcknowledged(t *testing.T) {
	mock := linemock.New(linemock.WithTokens(crashToken), linemock.WithMaxRecords(10_000))
	lineAPI := httptest.NewServer(mock)
	defer lineAPI.Close()
	dir, addr := t.TempDir(), freeAddr(t)
	env := []string{"LINE_CHANNEL_ACCESS_TOKEN=" + crashToken, "LINE_API_BASE_URL=" + lineAPI.URL}
	// Time scale 5: the chat queue's 190 s visibility timeout takes 38 s,
	// longer than the 30 s (unscaled) claim a killed handler leaves behind,
	// so its event is received again after the claim expired. At 30, five
	// receives (6.3 s apart) would all find the claim held and dead-letter
	// the event: see the report of issue 15b.
	args := []string{"--addr", addr, "--time-scale", "5", "--state", dir}
	p := startProcessWith(t, "", env, args...)

	lp := lineplatform.New(p.webhook, []byte(local.DefaultSecret), lineplatform.WithRedelivery(60, 500*time.Millisecond),
		lineplatform.WithTimeout(5*time.Second), lineplatform.WithReplyTokenHook(mock.IssueReplyToken))
	const total, perBody, conc, killAfter = 400, 2, 8, 150
	text := func(i int) string { return fmt.Sprintf("crash %d", i) }
	var (
		mu      sync.Mutex
		acked   = map[string]int{} // webhookEventId -> event index
		idOf    = map[int]string{}
		killed  = make(chan struct{})
		killAt  time.Time
		failed  []string
		inBurst sync.WaitGroup
	)
	jobs := make(chan int)
	for range conc {
		inBurst.Add(1)
		go func() {
			defer inBurst.Done()
			for start := range jobs {
				var evs []json.RawMessage
				for i := start; i < start+perBody; i++ {
					evs = append(evs, lp.Text(fmt.Sprintf("U%032x", i), text(i)))
				}
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				d, err := lp.Deliver(ctx, evs...)
				cancel()
				mu.Lock()
				for k, id := range d.WebhookEventIDs {
					idOf[start+k] = id
					if d.Delivered {
						acked[id] = start + k
					}
				}
				if !d.Delivered {
					failed = append(failed, fmt.Sprintf("body from %d: %v (%d attempts)", start, err, len(d.Attempts)))
				}
				n := len(acked)
				mu.Unlock()
				if n >= killAfter {
					select {
					case <-killed:
					default:
						mu.Lock()
						select {
						case <-killed:
						default:
							killAt = time.Now()
							if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
								t.Error(err)
							}
							close(killed)
						}
						mu.Unlock()
					}
				}
			}
		}()
	}
	go func() {
		for i := 0; i < total; i += perBody {
			if i == total/2 {
				<-killed // the second half goes to the restarted process (through redelivery first)
			}
			jobs <- i
		}
		close(jobs)
	}()

	// While the rest of the burst waits for redelivery: read what the
	// killed process left, then start it again on the same directory.
	<-killed
	_ = p.cmd.Wait()
	mu.Lock()
	t.Logf("SIGKILL after %d acknowledged events", len(acked))
	mu.Unlock()
	doneAtKill := completedAt(t, dir)
	echoedAtKill := map[string]int{}
	for _, r := range mock.Messages() {
		if r.At.Before(killAt) {
			for _, m := range r.Messages {
				echoedAtKill[string(m)]++
			}
		}
	}
	restarted := startProcessWith(t, "", env, args...)
	inBurst.Wait()
	if len(failed) > 0 {
		t.Fatalf("%d bodies never acknowledged, with redelivery on: %v", len(failed), failed[:min(3, len(failed))])
	}

	// Wait until LINE has an echo of every acknowledged event. An event
	// claimed when the process died waits for its claim to expire (the
	// function timeout, 30 s) before it runs again.
	count := func() map[int]int {
		n := map[int]int{}
		for _, r := range mock.Messages() {
			for _, m := range r.Messages {
				var msg struct{ Text string }
				if json.Unmarshal(m, &msg) == nil && strings.HasPrefix(msg.Text, "crash ") {
					var i int
					if _, err := fmt.Sscanf(msg.Text, "crash %d", &i); err == nil {
						n[i]++
					}
				}
			}
		}
		return n
	}
	deadline := time.Now().Add(150 * time.Second)
	var echoes map[int]int
	for {
		echoes = count()
		missing := 0
		for _, i := range acked {
			if echoes[i] == 0 {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d acknowledged events never echoed after the restart", missing, len(acked))
		}
		time.Sleep(200 * time.Millisecond)
	}
	restarted.drained(t, 30*time.Second)
	time.Sleep(time.Second) // a late duplicate would show now
	echoes = count()

	once, window := 0, 0
	for id, i := range acked {
		switch n := echoes[i]; {
		case n == 1:
			once++
		case n == 2 && !doneAtKill[id] && echoedAtKill[fmt.Sprintf(`{"type":"text","text":%q}`, text(i))] > 0:
			window++ // replied before the kill, completion cut off by it
		default:
			t.Errorf("event %d (%s): %d echoes; completed at the kill %v", i, id, n, doneAtKill[id])
		}
	}
	t.Logf("%d events acknowledged (%d completed in DIR at the kill): %d echoed exactly once, %d twice in the effect-to-completion window the kill cut; restart and drain in %v",
		len(acked), len(doneAtKill), once, window, time.Since(killAt).Round(100*time.Millisecond))
	if len(acked) != total {
		t.Errorf("%d of %d events acknowledged", len(acked), total)
	}
	if !strings.Contains(restarted.console.String(), "state: kept in "+dir) {
		t.Errorf("the banner does not say where the state is kept:\n%s", restarted.console.String())
	}
}
