package local

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// coalescedCount reads the count on a crash card: "CRASH ×N", or 1 for a
// card of a single report.
var coalescedCount = regexp.MustCompile(`\[CRASH ×(\d+)\]`)

func crashCount(raw string) int {
	if m := coalescedCount.FindStringSubmatch(raw); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	if strings.Contains(raw, "[CRASH]") {
		return 1
	}
	return 0
}

// 50 probe:panic messages in one second, through linegate local at the
// template's settings (time scale 60: a 15 s window): at most 3 crash
// pushes to each operator, the card at once and the window's digest, and
// the counts on the cards add up to 50.
func TestPanicBurstPagesEachOperatorAtMostThreeTimes(t *testing.T) {
	const operatorGroup = "C0000000000000000000000000000beef"
	env := map[string]string{"OPERATOR_LINE_IDS": DefaultOperator + "," + operatorGroup}
	rt, lp := start(t, Config{Getenv: func(k string) string { return env[k] }, TimeScale: 60})
	operators := []string{DefaultOperator, operatorGroup}

	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user := fmt.Sprintf("U%032x", 0xbad0000+i) // 50 chats: nothing orders them behind each other
			d, err := lp.Deliver(context.Background(), lp.Text(user, "probe:panic"))
			if err != nil || !d.Delivered {
				errs <- fmt.Errorf("delivery %d: %+v %v", i, d, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	counted := func(op string) (pushes, crashes int, cards []string) {
		for _, m := range messages(t, rt) {
			if m.To != op || m.Via != "push" {
				continue
			}
			n := 0
			for _, raw := range m.Messages {
				if c := crashCount(string(raw)); c > 0 {
					n += c
					cards = append(cards, coalescedCount.FindString(string(raw)))
				}
			}
			if n > 0 {
				pushes++
				crashes += n
			}
		}
		return pushes, crashes, cards
	}
	eventually(t, 60*time.Second, "crash cards counting all 50 panics for each operator", func() bool {
		for _, op := range operators {
			if _, n, _ := counted(op); n < 50 {
				return false
			}
		}
		return true
	})
	// Each panicking event published its one crash report before its card
	// counted it, so no report is still to come; once the ops queue holds
	// nothing, visible or in flight (the notifier pushes before its records
	// are deleted), a straggling batch of them has been pushed too.
	ops, ok := rt.queue("OpsQueue")
	if !ok {
		t.Fatal("the template has no OpsQueue")
	}
	waitDrained(t, rt, 60*time.Second, ops.Name)
	// A straggler would be held and paged in a digest: wait for a whole
	// window of sweeps (15 s at time scale 60, a sweep a scaled minute).
	waitSweeps(t, rt, 17)
	for _, op := range operators {
		pushes, n, cards := counted(op)
		t.Logf("operator %s: %d push(es), cards %v, %d crashes counted", op, pushes, cards, n)
		if pushes > 3 {
			t.Errorf("operator %s got %d crash pushes for one burst; want at most 3", op, pushes)
		}
		if n != 50 {
			t.Errorf("operator %s: the counts on the cards add up to %d; want 50 (one per event, none twice)", op, n)
		}
	}
}

// waitSweeps waits until the notifier has swept n more times.
func waitSweeps(t *testing.T, rt *Runtime, n int) {
	t.Helper()
	from := rt.sweeps.view()["sweeps"].(int)
	eventually(t, time.Duration(n)*5*time.Second+30*time.Second, fmt.Sprintf("%d more sweeps of the notifier", n), func() bool {
		return rt.sweeps.view()["sweeps"].(int) >= from+n
	})
}
