package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/local"
)

// A small rising load against a stage throttled at 6/s (burst 20): 2/s and
// 6/s are sustained, 10/s meets the throttle first (its burst drains, then
// 429s), and the report says so in one JSON object with the fields the docs
// quote. Low rates, dilation 1 and short steps keep it to seconds on a busy
// machine under the race detector; `linegate bench --capacity` runs the
// same code at the template's settings.
func TestCapacityFindsTheFirstLimit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := RunCapacity(ctx, CapacityOptions{
		Template: "../../template.yaml", Params: map[string]string{"ApiThrottlingRateLimit": "6", "ApiThrottlingBurstLimit": "20"},
		Dilation: 1, From: 2, Step: 4, To: 14, StepDuration: 4 * time.Second, HandlerIO: 20 * time.Millisecond, Chats: 200,
	})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := rep.WriteJSON(&out); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", out.String())
	var obj map[string]any
	if err := json.Unmarshal(out.Bytes(), &obj); err != nil {
		t.Fatalf("not one JSON object: %v", err)
	}
	for _, k := range []string{"sustainedEventsPerSecond", "maxQueueAgeSeconds", "firstLimit", "steps", "model"} {
		if _, ok := obj[k]; !ok {
			t.Errorf("the report has no %q", k)
		}
	}
	if rep.FirstLimit == nil || rep.FirstLimit.Name != local.LimitAPIThrottle || rep.FirstLimit.AtEventsPerSecond != 10 {
		t.Fatalf("first limit %+v, want the stage throttle at 10/s (steps %+v)", rep.FirstLimit, rep.Steps)
	}
	if rep.SustainedEventsPerSecond != 6 {
		t.Fatalf("sustained %v/s, want 6 (steps %+v)", rep.SustainedEventsPerSecond, rep.Steps)
	}
	if rep.MaxQueueAgeSeconds > 45 {
		t.Fatalf("oldest message %v s at the sustained rate", rep.MaxQueueAgeSeconds)
	}
	// (A step this machine could not drive is offered again, more dilated:
	// only the rates sustained and the last are asserted.)
	var sustained []float64
	for _, s := range rep.Steps {
		if s.Sustained {
			sustained = append(sustained, s.Offered)
		}
	}
	last := rep.Steps[len(rep.Steps)-1]
	if last.Sustained || last.Offered != 10 || (last.Refused["429"] == 0 && last.APIBurstDrained <= 10) || fmt.Sprint(sustained) != "[2 6]" {
		t.Fatalf("the load did not stop at the first step above the throttle: %+v", rep.Steps)
	}
	if rep.Model.WorkerMaxConcurrency != 50 || rep.Model.RecordsAtOnce != 10 || rep.Model.Quotas.PutEvents != 1200 {
		t.Fatalf("model %+v: want the template's 50 invocations, 10 records at once, Tokyo's 1,200 PutEvents/s", rep.Model)
	}
	var md strings.Builder
	if err := rep.WriteMarkdown(&md); err != nil || !strings.Contains(md.String(), "first limit: "+local.LimitAPIThrottle) {
		t.Fatalf("markdown %q (%v)", md.String(), err)
	}
}

func TestCapacityOptions(t *testing.T) {
	for _, o := range []CapacityOptions{{Region: "mars-1"}, {From: 500, To: 100}} {
		if _, err := RunCapacity(context.Background(), o); !errors.Is(err, ErrOptions) {
			t.Errorf("%+v: err %v, want ErrOptions", o, err)
		}
	}
}

// A step is sustained only with every webhook accepted, the offered rate
// reached, the backlog flat and no message older than the target.
func TestJudge(t *testing.T) {
	ok := CapacityStep{Offered: 1000, Sent: 1000, BacklogMid: 100, BacklogEnd: 150, MaxQueueAgeSeconds: 2}
	for _, tt := range []struct {
		name string
		edit func(*CapacityStep)
		want string
	}{
		{"sustained", func(*CapacityStep) {}, ""},
		{"refused", func(s *CapacityStep) { s.Refused = map[string]int{"429": 3} }, "3 webhooks refused"},
		{"driver behind", func(s *CapacityStep) { s.Sent = 900 }, "offered only 900/s"},
		{"backlog growing", func(s *CapacityStep) { s.BacklogEnd = 700 }, "backlog growing"},
		{"too old", func(s *CapacityStep) { s.MaxQueueAgeSeconds = 46 }, "waited 46.0 s"},
		{"burst draining", func(s *CapacityStep) { s.APIBurstDrained = 1250 }, "burst drained by 1250 of 2000"},
		{"burst bunched, not draining", func(s *CapacityStep) { s.APIBurstDrained = 800 }, ""},
	} {
		s := ok
		tt.edit(&s)
		sustained, why := judge(s, 1000, 45*time.Second, 2000)
		if sustained != (tt.want == "") || !strings.Contains(why, tt.want) {
			t.Errorf("%s: %v %q, want %q", tt.name, sustained, why, tt.want)
		}
	}
}
