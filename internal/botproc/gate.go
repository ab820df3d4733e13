package botproc

import (
	"context"
	"sync"
)

// When the child dies during dispatches, the parent cannot tell which
// event killed it: every event that was in flight becomes a suspect, and
// runs alone from then on — no other dispatch in flight beside it — until
// it runs on a child without killing it. So a crashing event (an os.Exit, a
// panic in a goroutine of its own) takes only itself down on its later
// receives, and the other chats' events, which were merely in flight with
// it once, are cleared on their next receive instead of failing beside it
// until their retries run out.

// gate lets dispatches run together, and a suspect run alone. A suspect
// waiting to run holds back new dispatches, so it is not starved.
type gate struct {
	mu       sync.Mutex
	shared   int  // dispatches running together
	alone    bool // a suspect runs
	waiting  int  // suspects waiting to run alone
	changed  chan struct{}
	suspects map[string]bool // events in flight when a child died
}

func newGate() *gate { return &gate{changed: make(chan struct{}), suspects: map[string]bool{}} }

// enter waits until the event key may run (alone, when it is a suspect),
// or ctx ends; leave must be called once it has.
func (g *gate) enter(ctx context.Context, key string) (leave func(), err error) {
	g.mu.Lock()
	alone := g.suspects[key]
	if alone {
		g.waiting++
	}
	g.mu.Unlock()
	for {
		g.mu.Lock()
		ok := !g.alone && (alone && g.shared == 0 || !alone && g.waiting == 0)
		if ok {
			if alone {
				g.waiting--
				g.alone = true
			} else {
				g.shared++
			}
			g.mu.Unlock()
			return func() { g.leave(alone) }, nil
		}
		ch := g.changed
		g.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			if alone {
				g.mu.Lock()
				g.waiting--
				g.wakeLocked()
				g.mu.Unlock()
			}
			return nil, ctx.Err()
		}
	}
}

func (g *gate) leave(alone bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if alone {
		g.alone = false
	} else {
		g.shared--
	}
	g.wakeLocked()
}

func (g *gate) wakeLocked() {
	close(g.changed)
	g.changed = make(chan struct{})
}

// suspect marks key: it was in flight when a child died.
func (g *gate) suspect(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.suspects[key] = true
}

// clear unmarks key: it ran on a child that lived.
func (g *gate) clear(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.suspects, key)
}
