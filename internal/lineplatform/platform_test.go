package lineplatform

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/line/line-bot-sdk-go/v8/linebot/webhook"

	"github.com/linegate/linegate/internal/signature"
	"github.com/linegate/linegate/internal/testmetrics"
)

var secret = []byte("channel-secret")

// request is what the fake webhook saw.
type request struct {
	header http.Header
	body   []byte
}

// webhookServer answers the n-th request (from 0) with respond(n, w, r)
// and records every request.
type webhookServer struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []request
}

func newWebhook(t *testing.T, respond func(n int, w http.ResponseWriter, r *http.Request)) *webhookServer {
	t.Helper()
	s := &webhookServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		n := len(s.reqs)
		s.reqs = append(s.reqs, request{header: r.Header.Clone(), body: body})
		s.mu.Unlock()
		respond(n, w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *webhookServer) requests() []request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]request(nil), s.reqs...)
}

func status(codes ...int) func(int, http.ResponseWriter, *http.Request) {
	return func(n int, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(codes[min(n, len(codes)-1)])
	}
}

// hang never answers within the client's timeout: it waits for the client
// to give up, so no test sleeps for a fixed time.
func hang(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }

// fakeSleeper records the waits between redeliveries instead of sleeping.
type fakeSleeper struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (f *fakeSleeper) sleep(ctx context.Context, d time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.waits = append(f.waits, d)
	return ctx.Err()
}

func TestDeliverSignsAndSendsLineHeaders(t *testing.T) {
	srv := newWebhook(t, status(http.StatusOK))
	p := New(srv.URL, secret, WithDestination("Ubot"))
	ev := p.Text(user, "hello")
	d, err := p.Deliver(context.Background(), ev)
	if err != nil || !d.Delivered || len(d.Attempts) != 1 {
		t.Fatalf("Deliver = %+v, %v; want delivered in one attempt", d, err)
	}
	reqs := srv.requests()
	if len(reqs) != 1 {
		t.Fatalf("server saw %d requests", len(reqs))
	}
	r := reqs[0]
	if !signature.Verify(r.body, r.header.Get(signature.Header), secret) {
		t.Fatalf("signature %q does not verify", r.header.Get(signature.Header))
	}
	if signature.Verify(r.body, r.header.Get(signature.Header), []byte("other-secret")) {
		t.Fatal("signature verifies under the wrong secret")
	}
	if got := r.header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type = %q", got)
	}
	if got := r.header.Get("User-Agent"); got != "LineBotWebhook/2.0" {
		t.Errorf("User-Agent = %q", got)
	}
	if want := Body("Ubot", ev); !bytes.Equal(r.body, want) {
		t.Errorf("body =\n%s\nwant\n%s", r.body, want)
	}
	// The SDK's own handler accepts the request as LINE's.
	var cb webhook.CallbackRequest
	if err := json.Unmarshal(r.body, &cb); err != nil || cb.Destination != "Ubot" || len(cb.Events) != 1 {
		t.Fatalf("SDK parse = %+v, %v", cb, err)
	}
	if d.Attempts[0].Status != 200 || d.Attempts[0].Err != "" || d.Attempts[0].Redelivery || d.Attempts[0].Latency <= 0 {
		t.Errorf("attempt = %+v", d.Attempts[0])
	}
	var id struct{ WebhookEventID string }
	_ = json.Unmarshal(ev, &id)
	if len(d.WebhookEventIDs) != 1 || d.WebhookEventIDs[0] != id.WebhookEventID {
		t.Errorf("WebhookEventIDs = %v; want [%s]", d.WebhookEventIDs, id.WebhookEventID)
	}
}

func TestSDKHandlerAcceptsDelivery(t *testing.T) {
	var got atomic.Int32
	h, err := webhook.NewWebhookHandler(string(secret))
	if err != nil {
		t.Fatal(err)
	}
	h.HandleEvents(func(cb *webhook.CallbackRequest, r *http.Request) { got.Add(int32(len(cb.Events))) })
	h.HandleError(func(err error, r *http.Request) { t.Errorf("SDK handler rejected the request: %v", err) })
	srv := httptest.NewServer(h)
	defer srv.Close()
	p := New(srv.URL, secret)
	if _, err := p.Deliver(context.Background(), p.Text(user, "a"), p.Follow(user)); err != nil {
		t.Fatal(err)
	}
	if got.Load() != 2 {
		t.Fatalf("SDK handler saw %d events; want 2", got.Load())
	}
}

func TestDeliverOutcomes(t *testing.T) {
	tests := []struct {
		name         string
		respond      func(int, http.ResponseWriter, *http.Request)
		redeliveries int
		wantStatuses []int
		wantTimeouts []bool
		wantOK       bool
	}{
		{"200 first time", status(200), 3, []int{200}, []bool{false}, true},
		{"204 counts as success", status(204), 0, []int{204}, []bool{false}, true},
		{"500 then 200: delivered on attempt 2", status(500, 200), 3, []int{500, 200}, []bool{false, false}, true},
		{"redelivery off: one attempt", status(500, 200), 0, []int{500}, []bool{false}, false},
		{"redeliveries used up", status(503), 2, []int{503, 503, 503}, []bool{false, false, false}, false},
		{"3xx is a failure", status(302), 0, []int{302}, []bool{false}, false},
		{"slow then fast", func(n int, w http.ResponseWriter, r *http.Request) {
			if n == 0 {
				hang(w, r)
				return
			}
			w.WriteHeader(200)
		}, 1, []int{0, 200}, []bool{true, false}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newWebhook(t, tt.respond)
			var sl fakeSleeper
			p := New(srv.URL, secret, WithTimeout(100*time.Millisecond),
				WithRedelivery(tt.redeliveries, 5*time.Second), WithSleeper(sl.sleep))
			ev := p.Text(user, "x")
			d, err := p.Deliver(context.Background(), ev)
			if tt.wantOK != (err == nil) || d.Delivered != tt.wantOK {
				t.Fatalf("Deliver = %+v, %v; want delivered=%v", d, err, tt.wantOK)
			}
			if !tt.wantOK && !errors.Is(err, ErrNotDelivered) {
				t.Fatalf("err = %v; want ErrNotDelivered", err)
			}
			if len(d.Attempts) != len(tt.wantStatuses) {
				t.Fatalf("attempts = %+v; want %d", d.Attempts, len(tt.wantStatuses))
			}
			for i, a := range d.Attempts {
				if a.Status != tt.wantStatuses[i] || a.Timeout != tt.wantTimeouts[i] || a.Redelivery != (i > 0) {
					t.Errorf("attempt %d = %+v; want status %d timeout %v redelivery %v", i, a, tt.wantStatuses[i], tt.wantTimeouts[i], i > 0)
				}
				if (a.Err == "") != (a.Status >= 200 && a.Status < 300) {
					t.Errorf("attempt %d = %+v: Err must be set exactly for failures", i, a)
				}
			}
			if got := len(srv.requests()); got != len(tt.wantStatuses) {
				t.Errorf("server saw %d requests; want %d", got, len(tt.wantStatuses))
			}
			if len(sl.waits) != len(tt.wantStatuses)-1 {
				t.Errorf("waited %v between attempts; want %d waits", sl.waits, len(tt.wantStatuses)-1)
			}
			for _, w := range sl.waits {
				if w != 5*time.Second {
					t.Errorf("waited %v; want the redelivery interval 5s", w)
				}
			}
		})
	}
}

// TestTimeoutIsRedeliveredAsLineDoes: a webhook slower than the timeout
// gets the same events again, marked isRedelivery, with the same
// webhookEventIds and a fresh valid signature; nothing else changes.
func TestTimeoutIsRedeliveredAsLineDoes(t *testing.T) {
	srv := newWebhook(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n < 2 {
			hang(w, r)
			return
		}
		w.WriteHeader(200)
	})
	var sl fakeSleeper
	p := New(srv.URL, secret, WithTimeout(50*time.Millisecond), WithRedelivery(5, time.Minute), WithSleeper(sl.sleep))
	evs := []json.RawMessage{p.Text(user, "slow"), p.Postback(user, "a=b"), p.Unfollow(user)}
	d, err := p.Deliver(context.Background(), evs...)
	if err != nil || !d.Delivered || len(d.Attempts) != 3 {
		t.Fatalf("Deliver = %+v, %v; want delivered on attempt 3", d, err)
	}
	for i, a := range d.Attempts[:2] {
		if !a.Timeout || a.Status != 0 || !strings.Contains(a.Err, "timeout") {
			t.Errorf("attempt %d = %+v; want a recorded timeout", i, a)
		}
	}
	reqs := srv.requests()
	if len(reqs) != 3 {
		t.Fatalf("server saw %d requests; want 3", len(reqs))
	}
	first := reqs[0].body
	for i, r := range reqs {
		if !signature.Verify(r.body, r.header.Get(signature.Header), secret) {
			t.Errorf("request %d: signature does not verify", i)
		}
		var cb webhook.CallbackRequest
		if err := json.Unmarshal(r.body, &cb); err != nil || len(cb.Events) != 3 {
			t.Fatalf("request %d: SDK parse: %v", i, err)
		}
		for j, ev := range cb.Events {
			id, redelivered := eventMeta(t, ev)
			if id != d.WebhookEventIDs[j] {
				t.Errorf("request %d event %d: webhookEventId %s; want %s", i, j, id, d.WebhookEventIDs[j])
			}
			if redelivered != (i > 0) {
				t.Errorf("request %d event %d: isRedelivery %v; want %v", i, j, redelivered, i > 0)
			}
		}
	}
	// The redelivered body is the first with only the flags flipped.
	want := bytes.ReplaceAll(first, []byte(`"isRedelivery":false`), []byte(`"isRedelivery":true`))
	if !bytes.Equal(reqs[1].body, want) || !bytes.Equal(reqs[2].body, want) {
		t.Errorf("redelivered body =\n%s\nwant\n%s", reqs[1].body, want)
	}
	st := p.Stats()
	if want := (Stats{Deliveries: 1, Delivered: 1, Attempts: 3, Failures: 2, Timeouts: 2, Redeliveries: 2}); st != want {
		t.Errorf("Stats = %+v; want %+v", st, want)
	}
}

func eventMeta(t *testing.T, ev webhook.EventInterface) (id string, redelivered bool) {
	t.Helper()
	switch e := ev.(type) {
	case webhook.MessageEvent:
		return e.WebhookEventId, e.DeliveryContext.IsRedelivery
	case webhook.PostbackEvent:
		return e.WebhookEventId, e.DeliveryContext.IsRedelivery
	case webhook.UnfollowEvent:
		return e.WebhookEventId, e.DeliveryContext.IsRedelivery
	}
	t.Fatalf("unexpected event %T", ev)
	return "", false
}

func TestDeliverStopsWhenContextEnds(t *testing.T) {
	srv := newWebhook(t, status(500))
	ctx, cancel := context.WithCancel(context.Background())
	sleeps := 0
	p := New(srv.URL, secret, WithRedelivery(10, time.Hour), WithSleeper(func(c context.Context, d time.Duration) error {
		sleeps++
		if sleeps == 2 {
			cancel()
		}
		return c.Err()
	}))
	d, err := p.Deliver(ctx, p.Follow(user))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v; want context.Canceled", err)
	}
	if d.Delivered || len(d.Attempts) != 2 {
		t.Fatalf("delivery = %+v; want 2 failed attempts before the cancel", d)
	}
	if got := p.Stats(); got.Deliveries != 1 || got.Attempts != 2 {
		t.Fatalf("Stats = %+v; the partial delivery must be recorded", got)
	}
}

func TestDeliverRealSleeperWaitsInterval(t *testing.T) {
	srv := newWebhook(t, status(500, 200))
	p := New(srv.URL, secret, WithRedelivery(1, 20*time.Millisecond))
	start := time.Now()
	d, err := p.Deliver(context.Background(), p.Follow(user))
	if err != nil || len(d.Attempts) != 2 {
		t.Fatalf("Deliver = %+v, %v", d, err)
	}
	if el := time.Since(start); el < 20*time.Millisecond {
		t.Fatalf("redelivered after %v; want at least the 20ms interval", el)
	}
}

func TestDeliverRefusesToRedeliverNonObjects(t *testing.T) {
	srv := newWebhook(t, status(400, 200))
	p := New(srv.URL, secret, WithRedelivery(1, 0), WithSleeper((&fakeSleeper{}).sleep))
	d, err := p.Deliver(context.Background(), json.RawMessage(`not json`))
	if !errors.Is(err, ErrNotDelivered) || !strings.Contains(err.Error(), "redelivery") || d.Delivered {
		t.Fatalf("Deliver = %+v, %v; want ErrNotDelivered naming the redelivery", d, err)
	}
	if len(srv.requests()) != 1 || len(d.Attempts) != 1 {
		t.Fatalf("server saw %d requests; want the malformed body sent once", len(srv.requests()))
	}
}

func TestVerifyRequestAndUnreachableWebhook(t *testing.T) {
	srv := newWebhook(t, status(200))
	p := New(srv.URL, secret)
	d, err := p.Deliver(context.Background()) // LINE's "Verify" button
	if err != nil || !d.Delivered || len(d.WebhookEventIDs) != 0 {
		t.Fatalf("verify delivery = %+v, %v", d, err)
	}
	if body := srv.requests()[0].body; !bytes.Contains(body, []byte(`"events":[]`)) {
		t.Fatalf("verify body = %s", body)
	}

	dead := httptest.NewServer(http.NotFoundHandler())
	url := dead.URL
	dead.Close()
	p = New(url, secret)
	d, err = p.Deliver(context.Background(), p.Follow(user))
	if !errors.Is(err, ErrNotDelivered) || d.Attempts[0].Timeout || d.Attempts[0].Err == "" {
		t.Fatalf("unreachable webhook = %+v, %v; want a non-timeout failure", d, err)
	}
}

func TestDeliveriesAndStatsAreCopiesUnderConcurrency(t *testing.T) {
	srv := newWebhook(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n%2 == 0 {
			w.WriteHeader(500)
			return
		}
		w.WriteHeader(200)
	})
	p := New(srv.URL, secret)
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = p.Deliver(context.Background(), p.Text(user, "x"))
			_ = p.Stats()
		}()
	}
	wg.Wait()
	ds := p.Deliveries()
	st := p.Stats()
	if len(ds) != 20 || st.Deliveries != 20 || st.Attempts != 20 || st.Delivered != 10 || st.Failures != 10 || st.Redeliveries != 0 {
		t.Fatalf("Stats = %+v over %d deliveries; want 20 deliveries, 10 delivered, 10 failures", st, len(ds))
	}
	ds[0].Attempts[0].Status = 999
	ds[0].WebhookEventIDs[0] = "mutated"
	again := p.Deliveries()
	if again[0].Attempts[0].Status == 999 || again[0].WebhookEventIDs[0] == "mutated" {
		t.Fatal("Deliveries returned the platform's own slices")
	}
}

func TestMetrics(t *testing.T) {
	srv := newWebhook(t, status(500, 500, 200))
	rec := &testmetrics.Recorder{}
	p := New(srv.URL, secret, WithRedelivery(3, 0), WithMetrics(rec))
	if _, err := p.Deliver(context.Background(), p.Follow(user)); err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"WebhookAttempts": 3, "WebhookFailures": 2, "WebhookRedeliveries": 2}
	for k, v := range want {
		if rec.Total(k) != v {
			t.Errorf("%s = %v; want %v (all: %v)", k, rec.Total(k), v, rec.Counts())
		}
	}
	if n := rec.Observations("WebhookLatency"); n != 3 {
		t.Errorf("latencies recorded = %d; want 3", n)
	}
}
