package bot

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
)

// textEventJSON is a text message from user U1 with webhookEventId 01TEXT.
const textEventJSON = `{"type":"message","mode":"active","timestamp":1700000000000,"source":{"type":"user","userId":"U1"},"webhookEventId":"01TEXT","replyToken":"rt","message":{"id":"1","type":"text","text":"x"}}`

// fakeSteps is an in-memory Steps whose store can be made to fail.
type fakeSteps struct {
	done      map[string][]byte
	held      map[string]bool
	beginErr  error
	calls     []string
	finishErr bool // Finish "fails": the result is not recorded
}

func newFakeSteps() *fakeSteps { return &fakeSteps{done: map[string][]byte{}, held: map[string]bool{}} }

// stepEvent is a text event bound to steps, as the worker binds each
// record's event to the step store.
func stepEvent(t *testing.T, steps *fakeSteps) *Event {
	t.Helper()
	ev := mustParse(t, textEventJSON, nil)
	ev.BindSteps(steps)
	return ev
}

func (f *fakeSteps) Begin(_ context.Context, step string) ([]byte, bool, error) {
	f.calls = append(f.calls, "begin "+step)
	if f.beginErr != nil {
		return nil, false, f.beginErr
	}
	if r, ok := f.done[step]; ok {
		return r, true, nil
	}
	if f.held[step] {
		return nil, false, fmt.Errorf("fake: %w", ErrStepInProgress)
	}
	f.held[step] = true
	return nil, false, nil
}

func (f *fakeSteps) Finish(_ context.Context, step string, result []byte) {
	f.calls = append(f.calls, "finish "+step)
	if !f.finishErr {
		f.done[step] = result
		delete(f.held, step)
	}
}

func (f *fakeSteps) Abandon(_ context.Context, step string) {
	f.calls = append(f.calls, "abandon "+step)
	delete(f.held, step)
}

type receipt struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

func TestOnceRunsAStepOnceAndReplaysItsResult(t *testing.T) {
	steps := newFakeSteps()
	charges := 0
	charge := func(context.Context) (receipt, error) {
		charges++
		return receipt{ID: fmt.Sprint("r-", charges), Amount: 500}, nil
	}
	ev := stepEvent(t, steps)
	first, err := Once(context.Background(), ev, "charge", charge)
	if err != nil || first != (receipt{ID: "r-1", Amount: 500}) {
		t.Fatalf("first Once = %+v, %v", first, err)
	}
	// The retry of the event: a new Event, the same store.
	retry := stepEvent(t, steps)
	again, err := Once(context.Background(), retry, "charge", charge)
	if err != nil || again != first || charges != 1 {
		t.Fatalf("retried Once = %+v, %v after %d charges; want the stored %+v and 1 charge", again, err, charges, first)
	}
	// Another step of the same event runs.
	if err := retry.Once(context.Background(), "email", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(steps.calls, ", "); got != "begin charge, finish charge, begin charge, begin email, finish email" {
		t.Fatalf("store calls: %s", got)
	}
}

func TestOnceFailuresReleaseTheStep(t *testing.T) {
	boom := errors.New("card declined")
	tests := []struct {
		name      string
		fn        func(context.Context) (receipt, error)
		wantErr   error
		wantPanic bool
	}{
		{name: "error", fn: func(context.Context) (receipt, error) { return receipt{}, boom }, wantErr: boom},
		{name: "panic", fn: func(context.Context) (receipt, error) { panic("gateway bug") }, wantPanic: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			steps := newFakeSteps()
			ev := stepEvent(t, steps)
			func() {
				defer func() {
					if p := recover(); (p != nil) != tt.wantPanic {
						t.Fatalf("panic = %v; want panic %v", p, tt.wantPanic)
					}
				}()
				_, err := Once(context.Background(), ev, "charge", tt.fn)
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Once = %v; want %v returned as is", err, tt.wantErr)
				}
			}()
			if steps.held["charge"] {
				t.Fatal("a failed step kept its claim: the retry could not run it")
			}
			// The retry runs the step again and succeeds.
			got, err := Once(context.Background(), ev, "charge", func(context.Context) (receipt, error) { return receipt{ID: "ok"}, nil })
			if err != nil || got.ID != "ok" {
				t.Fatalf("retry = %+v, %v", got, err)
			}
		})
	}
}

func TestOnceStoreFailures(t *testing.T) {
	unreachable := errors.New("dynamodb: throttled")
	ran := false
	fn := func(context.Context) (receipt, error) { ran = true; return receipt{ID: "r"}, nil }

	// Without a claim the step does not run; Once says why.
	for _, tt := range []struct {
		name    string
		steps   func(*fakeSteps)
		wantErr error
	}{
		{"claim fails", func(s *fakeSteps) { s.beginErr = unreachable }, unreachable},
		{"held by another attempt", func(s *fakeSteps) { s.held["charge"] = true }, ErrStepInProgress},
	} {
		t.Run(tt.name, func(t *testing.T) {
			steps := newFakeSteps()
			tt.steps(steps)
			ran = false
			if _, err := Once(context.Background(), stepEvent(t, steps), "charge", fn); !errors.Is(err, tt.wantErr) || ran {
				t.Fatalf("Once = %v, ran %v; want %v and no effect", err, ran, tt.wantErr)
			}
		})
	}
	t.Run("save fails: the result is returned, the claim kept", func(t *testing.T) {
		steps := newFakeSteps()
		steps.finishErr = true
		ev := stepEvent(t, steps)
		got, err := Once(context.Background(), ev, "charge", fn)
		if err != nil || got.ID != "r" {
			t.Fatalf("Once = %+v, %v; want the result: the effect happened", got, err)
		}
		if !steps.held["charge"] {
			t.Fatal("the claim was released after the effect: a retry would repeat it at once")
		}
	})
	t.Run("no store bound", func(t *testing.T) {
		ev := mustParse(t, textEventJSON, nil)
		if _, err := Once(context.Background(), ev, "charge", fn); !errors.Is(err, ErrNoSteps) {
			t.Fatalf("Once = %v; want ErrNoSteps", err)
		}
	})
}

func TestOnceRefusesResultsThatCannotBeStored(t *testing.T) {
	steps := newFakeSteps()
	ev := stepEvent(t, steps)
	ran := false
	_, err := Once(context.Background(), ev, "c", func(context.Context) (chan int, error) { ran = true; return nil, nil })
	if !errors.Is(err, ErrStepResult) || ran || len(steps.calls) != 0 {
		t.Fatalf("Once of a channel = %v, ran %v, calls %v; want ErrStepResult before anything", err, ran, steps.calls)
	}
	// A value that fails only at run time keeps its claim (the effect happened).
	v, err := Once(context.Background(), ev, "nan", func(context.Context) (float64, error) { return math.NaN(), nil })
	if !errors.Is(err, ErrStepResult) || !math.IsNaN(v) || !steps.held["nan"] {
		t.Fatalf("Once of NaN = %v, %v, held %v; want the value, ErrStepResult and the claim kept", v, err, steps.held["nan"])
	}
	// A stored result that no longer fits the type is reported, not zeroed.
	steps.done["typed"] = []byte(`"text"`)
	if _, err := Once(context.Background(), ev, "typed", func(context.Context) (int, error) { return 1, nil }); !errors.Is(err, ErrStepResult) {
		t.Fatalf("Once over a mismatched stored result = %v; want ErrStepResult", err)
	}
}

// fakeSessions is an in-memory SessionStore.
type fakeSessions struct {
	value   map[string][]byte
	version map[string]int64
	loadErr error
	saveErr error
}

func newFakeSessions() *fakeSessions {
	return &fakeSessions{value: map[string][]byte{}, version: map[string]int64{}}
}

func (f *fakeSessions) Load(_ context.Context, chat string) ([]byte, int64, error) {
	if f.loadErr != nil {
		return nil, 0, f.loadErr
	}
	return f.value[chat], f.version[chat], nil
}

func (f *fakeSessions) Save(_ context.Context, chat string, v []byte, version int64) (int64, error) {
	if f.saveErr != nil {
		return 0, f.saveErr
	}
	if f.version[chat] != version {
		return 0, fmt.Errorf("fake: %w", ErrSessionConflict)
	}
	f.value[chat], f.version[chat] = v, version+1
	return version + 1, nil
}

type order struct {
	Item string `json:"item"`
	Size string `json:"size"`
}

func sessionEvent(t *testing.T, id string, s SessionStore) *Event {
	t.Helper()
	ev := mustParse(t, strings.Replace(textEventJSON, `"webhookEventId":"01TEXT"`, `"webhookEventId":"`+id+`"`, 1), nil)
	ev.BindSessions(s)
	return ev
}

func TestSessionFlowAndConflicts(t *testing.T) {
	store := newFakeSessions()
	ctx := context.Background()

	var o order
	s, err := sessionEvent(t, "01A", store).Session(ctx, &o)
	if err != nil || s.Version != 0 || o != (order{}) || s.ChatID != "U1" {
		t.Fatalf("new session = %+v, %+v, %v", s, o, err)
	}
	o.Item = "coffee"
	if err := s.Save(ctx, o); err != nil || s.Version != 1 {
		t.Fatalf("save = %v at version %d", err, s.Version)
	}
	// The next event of the chat sees the state.
	var next order
	s2, err := sessionEvent(t, "01B", store).Session(ctx, &next)
	if err != nil || next.Item != "coffee" || s2.Version != 1 {
		t.Fatalf("second event loaded %+v at %d, %v", next, s2.Version, err)
	}
	// Two events loaded version 1; the first save wins, the second conflicts.
	var other order
	s3, _ := sessionEvent(t, "01C", store).Session(ctx, &other)
	next.Size = "L"
	if err := s2.Save(ctx, next); err != nil {
		t.Fatal(err)
	}
	if err := s3.Save(ctx, order{Item: "tea"}); !errors.Is(err, ErrSessionConflict) {
		t.Fatalf("stale save = %v; want ErrSessionConflict", err)
	}
	// End: the next event starts from zero.
	if err := s2.End(ctx); err != nil {
		t.Fatal(err)
	}
	fresh := order{Item: "untouched"}
	if _, err := sessionEvent(t, "01D", store).Session(ctx, &fresh); err != nil || fresh.Item != "untouched" {
		t.Fatalf("after End: %+v, %v; want the state left as the caller's zero value", fresh, err)
	}
}

// A retried event sees the session as it was before its first attempt, so
// it repeats its transition instead of applying it on top of itself.
func TestSessionReplaysARetriedEvent(t *testing.T) {
	store := newFakeSessions()
	ctx := context.Background()
	step := func(id string) (order, error) {
		var o order
		s, err := sessionEvent(t, id, store).Session(ctx, &o)
		if err != nil {
			return o, err
		}
		seen := o
		switch {
		case o.Item == "":
			o.Item = "coffee"
		case o.Size == "":
			o.Size = "L"
		}
		return seen, s.Save(ctx, o)
	}
	if _, err := step("01A"); err != nil { // asks the item
		t.Fatal(err)
	}
	seen, err := step("01B") // answers the size, then (say) its reply fails
	if err != nil || seen.Item != "coffee" || seen.Size != "" {
		t.Fatalf("first attempt saw %+v, %v", seen, err)
	}
	seen, err = step("01B") // the retry of 01B
	if err != nil || seen.Item != "coffee" || seen.Size != "" {
		t.Fatalf("retry saw %+v, %v; want the state before 01B's first attempt", seen, err)
	}
	seen, err = step("01C") // the next event sees 01B's result once
	if err != nil || seen != (order{Item: "coffee", Size: "L"}) {
		t.Fatalf("next event saw %+v, %v", seen, err)
	}
}

func TestSessionFailures(t *testing.T) {
	ctx := context.Background()
	down := errors.New("dynamodb: unreachable")
	t.Run("load fails", func(t *testing.T) {
		store := newFakeSessions()
		store.loadErr = down
		var o order
		if _, err := sessionEvent(t, "01A", store).Session(ctx, &o); !errors.Is(err, down) {
			t.Fatalf("Session = %v; want the store's error", err)
		}
	})
	t.Run("save fails", func(t *testing.T) {
		store := newFakeSessions()
		var o order
		s, err := sessionEvent(t, "01A", store).Session(ctx, &o)
		if err != nil {
			t.Fatal(err)
		}
		store.saveErr = down
		if err := s.Save(ctx, order{Item: "x"}); !errors.Is(err, down) || errors.Is(err, ErrSessionConflict) || s.Version != 0 {
			t.Fatalf("Save = %v at version %d; want the store's error, not a conflict, version unchanged", err, s.Version)
		}
	})
	t.Run("no store, no chat, bad state", func(t *testing.T) {
		var o order
		ev := mustParse(t, textEventJSON, nil)
		if _, err := ev.Session(ctx, &o); !errors.Is(err, ErrNoSessions) {
			t.Fatalf("Session = %v; want ErrNoSessions", err)
		}
		ev.Source = Source{}
		ev.BindSessions(newFakeSessions())
		if _, err := ev.Session(ctx, &o); !errors.Is(err, ErrNoChat) {
			t.Fatalf("Session = %v; want ErrNoChat", err)
		}
		store := newFakeSessions()
		store.value["U1"], store.version["U1"] = []byte(`{"state":{"item":42}}`), 1
		if _, err := sessionEvent(t, "01A", store).Session(ctx, &o); err == nil {
			t.Fatal("a state that does not decode loaded without error")
		}
	})
}
