package bench

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestAccountingCheck(t *testing.T) {
	ok := func(i int) EventAccount {
		return EventAccount{Index: i, WebhookEventID: fmt.Sprintf("ID%d", i), Effects: 1}
	}
	poisonDL := EventAccount{Index: 9, WebhookEventID: "ID9", Poison: true, DeadLettered: true}
	tests := []struct {
		name string
		acc  Accounting
		want []string // substrings of the error; nil means no error
	}{
		{"all good, no poison", Accounting{Events: []EventAccount{ok(0), ok(1)}}, nil},
		{"all good with poison", Accounting{Events: []EventAccount{ok(0), poisonDL}, DLQVisible: 1,
			AlarmsFired: []string{"linegate-interactive-dlq"}, OperatorNotified: []string{"linegate-interactive-dlq"}}, nil},
		{"a duplicate and a lost event", Accounting{Events: []EventAccount{ok(0),
			{Index: 1, WebhookEventID: "ID1", Effects: 2}, {Index: 2, WebhookEventID: "ID2"}}},
			[]string{"1 event(s) lost (no effect): #2 (ID2)", "1 event(s) with a duplicate effect: #1 (ID1) ×2"}},
		{"poison answered and not dead-lettered", Accounting{Events: []EventAccount{ok(0),
			{Index: 3, WebhookEventID: "ID3", Poison: true, Effects: 1}}, DLQVisible: 0},
			[]string{"poison event(s) had an effect: #3 (ID3)", "poison event(s) not dead-lettered: #3 (ID3)",
				"the DLQs hold 0 message(s), want 1", "no DLQ alarm went to ALARM", "the operator got no LINE push"}},
		{"alarm fired but nobody told", Accounting{Events: []EventAccount{poisonDL}, DLQVisible: 1, AlarmsFired: []string{"a"}},
			[]string{"the operator got no LINE push"}},
		{"stray message in a DLQ", Accounting{Events: []EventAccount{ok(0)}, DLQVisible: 1},
			[]string{"the DLQs hold 1 message(s), want 0"}},
		{"an event never built", Accounting{Events: []EventAccount{{Index: 4}}}, []string{"lost (no effect): #4"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.acc.Check()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("unexpected violation: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvariant) {
				t.Fatalf("err %v, want ErrInvariant", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestAccountingListsAreBounded(t *testing.T) {
	var acc Accounting
	for i := range 30 {
		acc.Events = append(acc.Events, EventAccount{Index: i})
	}
	err := acc.Check()
	if err == nil || !strings.Contains(err.Error(), "30 event(s) lost") || !strings.Contains(err.Error(), "and 10 more") ||
		strings.Contains(err.Error(), "#20") {
		t.Fatalf("%v", err)
	}
}

func TestSummarize(t *testing.T) {
	acc := Accounting{Events: []EventAccount{
		{Index: 0, Effects: 1}, {Index: 1, Effects: 1}, {Index: 2, Effects: 3}, {Index: 3},
		{Index: 4, Poison: true, DeadLettered: true}, {Index: 5, Poison: true},
	}, DLQVisible: 1}
	s := acc.Summarize()
	want := Summary{Events: 6, Poison: 2, ExactlyOnce: 2, Duplicates: 1, Lost: 1, DeadLettered: 1, DLQVisible: 1}
	if fmt.Sprint(s) != fmt.Sprint(want) {
		t.Fatalf("got %+v, want %+v", s, want)
	}
}
