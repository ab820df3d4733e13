package replay

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/linegate/linegate/internal/golden"
)

const (
	busARN     = "arn:aws:events:us-east-1:123456789012:event-bus/linegate"
	archiveARN = "arn:aws:events:us-east-1:123456789012:archive/EventArchive-AbC123"
)

var (
	now   = time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)
	since = time.Date(2025, 3, 10, 9, 30, 0, 0, time.UTC)
	until = time.Date(2025, 3, 10, 10, 45, 15, 0, time.UTC)
)

// fakeAPI is an EventBridge that answers from its fields and records calls.
type fakeAPI struct {
	busErr      error
	archives    [][]types.Archive // pages of ListArchives
	listErr     error
	archiveSrc  string // EventSourceArn of every described archive (default busARN)
	describeErr error
	startErr    error
	states      []types.ReplayState // DescribeReplay answers in turn; the last repeats
	reason      string
	pollErr     error
	rules       map[string]bool // the bus's rules (nil: linegate's two)
	ruleErr     error

	calls      []string
	started    *eventbridge.StartReplayInput
	described  []string
	listTokens []string
}

func (f *fakeAPI) DescribeEventBus(_ context.Context, in *eventbridge.DescribeEventBusInput, _ ...func(*eventbridge.Options)) (*eventbridge.DescribeEventBusOutput, error) {
	f.calls = append(f.calls, "DescribeEventBus")
	if f.busErr != nil {
		return nil, f.busErr
	}
	return &eventbridge.DescribeEventBusOutput{Name: in.Name, Arn: aws.String(busARN)}, nil
}

func (f *fakeAPI) ListArchives(_ context.Context, in *eventbridge.ListArchivesInput, _ ...func(*eventbridge.Options)) (*eventbridge.ListArchivesOutput, error) {
	f.calls = append(f.calls, "ListArchives")
	f.listTokens = append(f.listTokens, aws.ToString(in.NextToken))
	if f.listErr != nil {
		return nil, f.listErr
	}
	page := 0
	if in.NextToken != nil {
		page = int(aws.ToString(in.NextToken)[0] - '0')
	}
	out := &eventbridge.ListArchivesOutput{}
	if page < len(f.archives) {
		out.Archives = f.archives[page]
	}
	if page+1 < len(f.archives) {
		out.NextToken = aws.String(string(rune('0' + page + 1)))
	}
	return out, nil
}

func (f *fakeAPI) DescribeArchive(_ context.Context, in *eventbridge.DescribeArchiveInput, _ ...func(*eventbridge.Options)) (*eventbridge.DescribeArchiveOutput, error) {
	f.calls = append(f.calls, "DescribeArchive")
	f.described = append(f.described, aws.ToString(in.ArchiveName))
	if f.describeErr != nil {
		return nil, f.describeErr
	}
	src := f.archiveSrc
	if src == "" {
		src = busARN
	}
	return &eventbridge.DescribeArchiveOutput{ArchiveName: in.ArchiveName, ArchiveArn: aws.String(archiveARN), EventSourceArn: aws.String(src)}, nil
}

func (f *fakeAPI) StartReplay(_ context.Context, in *eventbridge.StartReplayInput, _ ...func(*eventbridge.Options)) (*eventbridge.StartReplayOutput, error) {
	f.calls = append(f.calls, "StartReplay")
	f.started = in
	if f.startErr != nil {
		return nil, f.startErr
	}
	return &eventbridge.StartReplayOutput{
		ReplayArn: aws.String("arn:aws:events:us-east-1:123456789012:replay/" + aws.ToString(in.ReplayName)),
		State:     types.ReplayStateStarting,
	}, nil
}

func (f *fakeAPI) DescribeRule(_ context.Context, in *eventbridge.DescribeRuleInput, _ ...func(*eventbridge.Options)) (*eventbridge.DescribeRuleOutput, error) {
	f.calls = append(f.calls, "DescribeRule")
	if f.ruleErr != nil {
		return nil, f.ruleErr
	}
	rules := f.rules
	if rules == nil {
		rules = map[string]bool{"replay": true, "background": true}
	}
	name := aws.ToString(in.Name)
	if !rules[name] {
		return nil, &types.ResourceNotFoundException{Message: aws.String("Rule " + name + " does not exist on EventBus " + aws.ToString(in.EventBusName) + ".")}
	}
	return &eventbridge.DescribeRuleOutput{Name: in.Name, Arn: aws.String("arn:aws:events:us-east-1:123456789012:rule/" + aws.ToString(in.EventBusName) + "/" + name)}, nil
}

func (f *fakeAPI) DescribeReplay(_ context.Context, in *eventbridge.DescribeReplayInput, _ ...func(*eventbridge.Options)) (*eventbridge.DescribeReplayOutput, error) {
	f.calls = append(f.calls, "DescribeReplay")
	if f.pollErr != nil {
		return nil, f.pollErr
	}
	n := 0
	for _, c := range f.calls {
		if c == "DescribeReplay" {
			n++
		}
	}
	st := types.ReplayStateCompleted
	if len(f.states) > 0 {
		st = f.states[min(n, len(f.states))-1]
	}
	out := &eventbridge.DescribeReplayOutput{ReplayName: in.ReplayName, State: st, EventLastReplayedTime: aws.Time(until.Add(-time.Minute))}
	if f.reason != "" {
		out.StateReason = aws.String(f.reason)
	}
	return out, nil
}

func baseOpts() Options {
	return Options{Bus: "linegate", Since: since, Until: until, Wait: true, PollEvery: time.Microsecond, Now: func() time.Time { return now }}
}

func TestValidation(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(o *Options)
		wantErr string // substring; empty: valid
		want    string // replay name when valid
	}{
		{name: "generated name", edit: func(o *Options) {}, want: "linegate-20250310T093000Z-20250310T104515Z"},
		{name: "generated name is in UTC", edit: func(o *Options) {
			tz := time.FixedZone("JST", 9*3600)
			o.Since, o.Until = since.In(tz), until.In(tz)
		}, want: "linegate-20250310T093000Z-20250310T104515Z"},
		{name: "explicit name", edit: func(o *Options) { o.Name = "after-deploy_v1.2" }, want: "after-deploy_v1.2"},
		{name: "until exactly now", edit: func(o *Options) { o.Until = now }, want: "linegate-20250310T093000Z-20250310T120000Z"},
		{name: "no bus", edit: func(o *Options) { o.Bus = "" }, wantErr: "bus name is required"},
		{name: "no since", edit: func(o *Options) { o.Since = time.Time{} }, wantErr: "since and until are required"},
		{name: "no until", edit: func(o *Options) { o.Until = time.Time{} }, wantErr: "since and until are required"},
		{name: "empty window", edit: func(o *Options) { o.Until = o.Since }, wantErr: "window is empty"},
		{name: "since after until", edit: func(o *Options) { o.Since, o.Until = o.Until, o.Since }, wantErr: "is after until"},
		{name: "until in the future", edit: func(o *Options) { o.Until = now.Add(time.Second) }, wantErr: "in the future"},
		{name: "name with a colon", edit: func(o *Options) { o.Name = "replay:1" }, wantErr: `has ':'`},
		{name: "name with a space", edit: func(o *Options) { o.Name = "my replay" }, wantErr: `has ' '`},
		{name: "name too long", edit: func(o *Options) { o.Name = strings.Repeat("a", MaxNameLen+1) }, wantErr: "longer than 64"},
		{name: "name at the limit", edit: func(o *Options) { o.Name = strings.Repeat("a", MaxNameLen) }, want: strings.Repeat("a", MaxNameLen)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := baseOpts()
			opts.Archive = "mine"
			tt.edit(&opts)
			api := &fakeAPI{}
			res, err := Start(context.Background(), api, opts)
			if tt.wantErr != "" {
				if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v; want ErrInvalid containing %q", err, tt.wantErr)
				}
				if len(api.calls) != 0 {
					t.Fatalf("invalid options reached EventBridge: %v", api.calls)
				}
				return
			}
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			if res.Name != tt.want || aws.ToString(api.started.ReplayName) != tt.want {
				t.Fatalf("name = %q (sent %q); want %q", res.Name, aws.ToString(api.started.ReplayName), tt.want)
			}
		})
	}
}

func TestValidationDefaultClockRejectsFuture(t *testing.T) {
	opts := baseOpts()
	opts.Now = nil
	opts.Until = time.Now().Add(time.Hour)
	opts.Since = time.Now().Add(-time.Hour)
	if _, err := Start(context.Background(), &fakeAPI{}, opts); !errors.Is(err, ErrInvalid) {
		t.Fatalf("err = %v; want ErrInvalid for an until an hour ahead of the real clock", err)
	}
}

func TestSanitizeName(t *testing.T) {
	tests := []struct{ in, want string }{
		{"linegate-2025-03-10T09:30:00Z", "linegate-2025-03-10T09-30-00Z"},
		{"a b/c+d", "a-b-c-d"},
		{"ok.name_1-2", "ok.name_1-2"},
		{"", "linegate"},
		{"日本", "--"},
		{"\xff\xfe", "--"},
		{strings.Repeat("x", 100), strings.Repeat("x", 64)},
		{strings.Repeat("é", 100), strings.Repeat("-", 64)},
	}
	for _, tt := range tests {
		if got := SanitizeName(tt.in); got != tt.want {
			t.Errorf("SanitizeName(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
}

func FuzzSanitizeName(f *testing.F) {
	f.Add("linegate-2025-03-10T09:30:00Z-2025-03-10T10:00:00Z")
	f.Add("")
	f.Add("日本語 replay")
	f.Fuzz(func(t *testing.T, s string) {
		got := SanitizeName(s)
		if err := checkName(got); err != nil || got == "" {
			t.Fatalf("SanitizeName(%q) = %q, not a valid replay name: %v", s, got, err)
		}
		if again := SanitizeName(got); again != got {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, got, again)
		}
		if utf8.RuneCountInString(s) <= MaxNameLen && s != "" && len(got) != utf8.RuneCountInString(s) {
			t.Fatalf("SanitizeName(%q) = %q changed the length of a short name", s, got)
		}
	})
}

// TestStartRequest proves the request sent: bus ARN as destination, the
// discovered archive's ARN as source, the window, the generated name.
func TestStartRequest(t *testing.T) {
	api := &fakeAPI{archives: [][]types.Archive{
		{{ArchiveName: aws.String("other"), EventSourceArn: aws.String("arn:aws:events:us-east-1:123456789012:event-bus/default")}},
		{{ArchiveName: aws.String("EventArchive-AbC123"), EventSourceArn: aws.String(busARN)}},
	}}
	opts := baseOpts()
	opts.Wait = false
	res, err := Start(context.Background(), api, opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if want := []string{"", "1"}; strings.Join(api.listTokens, ",") != strings.Join(want, ",") {
		t.Fatalf("ListArchives tokens = %q; want %q (every page read)", api.listTokens, want)
	}
	if want := []string{"DescribeEventBus", "ListArchives", "ListArchives", "DescribeArchive", "DescribeRule", "DescribeRule", "StartReplay"}; strings.Join(api.calls, ",") != strings.Join(want, ",") {
		t.Fatalf("calls = %v; want %v (no DescribeReplay without Wait)", api.calls, want)
	}
	if res.State != "STARTING" || res.Archive != "EventArchive-AbC123" || res.ArchiveARN != archiveARN || res.BusARN != busARN {
		t.Fatalf("result = %+v", res)
	}
	in := api.started
	got, err := json.MarshalIndent(map[string]any{
		"ReplayName":     in.ReplayName,
		"Description":    in.Description,
		"EventSourceArn": in.EventSourceArn,
		"EventStartTime": in.EventStartTime.UTC(),
		"EventEndTime":   in.EventEndTime.UTC(),
		"Destination":    in.Destination,
		"Result":         res,
	}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "start_replay.golden.json"), append(got, '\n'))
}

func TestStartPaths(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name      string
		api       *fakeAPI
		opts      func(o *Options)
		ctx       func() context.Context
		wantIs    []error
		wantText  string
		wantState string
		wantPolls int // DescribeReplay calls; -1: don't check
	}{
		{name: "completed after polling", api: &fakeAPI{states: []types.ReplayState{"STARTING", "RUNNING", "RUNNING", "COMPLETED"}},
			wantState: "COMPLETED", wantPolls: 4},
		{name: "failed carries the reason", api: &fakeAPI{states: []types.ReplayState{"RUNNING", "FAILED"}, reason: "archive is being deleted"},
			wantIs: []error{ErrFailed}, wantText: "FAILED: archive is being deleted", wantState: "FAILED", wantPolls: 2},
		{name: "cancelled", api: &fakeAPI{states: []types.ReplayState{"CANCELLING", "CANCELLED"}},
			wantIs: []error{ErrFailed}, wantText: "CANCELLED: no reason given", wantState: "CANCELLED", wantPolls: 2},
		{name: "describe bus error wrapped", api: &fakeAPI{busErr: boom},
			wantIs: []error{boom}, wantText: "describe event bus linegate", wantPolls: 0},
		{name: "bus not found", api: &fakeAPI{busErr: &types.ResourceNotFoundException{Message: aws.String("Event bus linegate does not exist.")}},
			wantText: "does not exist", wantPolls: 0},
		{name: "list archives error wrapped", api: &fakeAPI{listErr: boom},
			wantIs: []error{boom}, wantText: "list archives of " + busARN, wantPolls: 0},
		{name: "no archive on the bus", api: &fakeAPI{archives: [][]types.Archive{{{ArchiveName: aws.String("x"), EventSourceArn: aws.String("arn:aws:events:us-east-1:123456789012:event-bus/other")}}}},
			wantIs: []error{ErrNoArchive}, wantText: "has none", wantPolls: 0},
		{name: "two archives on the bus", api: &fakeAPI{archives: [][]types.Archive{{
			{ArchiveName: aws.String("a1"), EventSourceArn: aws.String(busARN)},
			{ArchiveName: aws.String("a2"), EventSourceArn: aws.String(busARN)}}}},
			wantIs: []error{ErrNoArchive}, wantText: "has 2 (a1, a2)", wantPolls: 0},
		{name: "describe archive error wrapped", api: &fakeAPI{describeErr: boom}, opts: func(o *Options) { o.Archive = "mine" },
			wantIs: []error{boom}, wantText: "describe archive mine", wantPolls: 0},
		{name: "archive of another bus", api: &fakeAPI{archiveSrc: "arn:aws:events:us-east-1:123456789012:event-bus/default"}, opts: func(o *Options) { o.Archive = "mine" },
			wantIs: []error{ErrInvalid}, wantText: "not bus " + busARN, wantPolls: 0},
		{name: "start replay error wrapped", api: &fakeAPI{startErr: boom}, opts: func(o *Options) { o.Archive = "mine" },
			wantIs: []error{boom}, wantText: "start replay linegate-20250310T093000Z-20250310T104515Z of archive mine", wantPolls: 0},
		{name: "same window twice", api: &fakeAPI{startErr: &types.ResourceAlreadyExistsException{Message: aws.String("Replay x already exists.")}}, opts: func(o *Options) { o.Archive = "mine" },
			wantIs: []error{ErrExists}, wantText: "pass another name", wantPolls: 0},
		{name: "a named rule the bus lacks", api: &fakeAPI{}, opts: func(o *Options) { o.Archive = "mine"; o.Rules = []string{"replay", "mine"} },
			wantIs: []error{ErrInvalid}, wantText: `bus linegate has no rule "mine"`, wantPolls: 0},
		{name: "describe rule error wrapped", api: &fakeAPI{ruleErr: boom}, opts: func(o *Options) { o.Archive = "mine" },
			wantIs: []error{boom}, wantText: "describe rule replay on linegate", wantPolls: 0},
		{name: "describe replay error wrapped", api: &fakeAPI{pollErr: boom}, opts: func(o *Options) { o.Archive = "mine" },
			wantIs: []error{boom}, wantText: "describe replay", wantState: "STARTING", wantPolls: 1},
		{name: "context ends the wait", api: &fakeAPI{states: []types.ReplayState{"RUNNING"}}, opts: func(o *Options) { o.Archive = "mine"; o.PollEvery = time.Hour },
			ctx: func() context.Context {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return ctx
			},
			wantIs: []error{context.Canceled}, wantText: "last state RUNNING", wantState: "RUNNING", wantPolls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := baseOpts()
			if tt.api.archives == nil && tt.opts == nil {
				tt.api.archives = [][]types.Archive{{{ArchiveName: aws.String("EventArchive-AbC123"), EventSourceArn: aws.String(busARN)}}}
			}
			if tt.opts != nil {
				tt.opts(&opts)
			}
			ctx := context.Background()
			if tt.ctx != nil {
				ctx = tt.ctx()
			}
			res, err := Start(ctx, tt.api, opts)
			if len(tt.wantIs) == 0 && tt.wantText == "" {
				if err != nil {
					t.Fatalf("Start: %v", err)
				}
			} else {
				if err == nil {
					t.Fatalf("Start succeeded (%+v); want an error containing %q", res, tt.wantText)
				}
				for _, target := range tt.wantIs {
					if !errors.Is(err, target) {
						t.Errorf("err = %v; want errors.Is %v", err, target)
					}
				}
				if !strings.Contains(err.Error(), tt.wantText) {
					t.Errorf("err = %q; want it to contain %q", err, tt.wantText)
				}
			}
			if res.State != tt.wantState {
				t.Errorf("state = %q; want %q", res.State, tt.wantState)
			}
			if tt.wantState == "FAILED" && res.StateReason != tt.api.reason {
				t.Errorf("StateReason = %q; want %q", res.StateReason, tt.api.reason)
			}
			polls := 0
			for _, c := range tt.api.calls {
				if c == "DescribeReplay" {
					polls++
				}
			}
			if tt.wantPolls >= 0 && polls != tt.wantPolls {
				t.Errorf("DescribeReplay calls = %d; want %d (calls %v)", polls, tt.wantPolls, tt.api.calls)
			}
			if tt.wantState == "COMPLETED" && !res.LastReplayed.Equal(until.Add(-time.Minute)) {
				t.Errorf("LastReplayed = %v; want %v", res.LastReplayed, until.Add(-time.Minute))
			}
		})
	}
}

// The replay goes to linegate's own rules by default (FilterArns), to the
// rules named, or, asked for explicitly, to every rule of the bus.
func TestReplayRules(t *testing.T) {
	const rule = "arn:aws:events:us-east-1:123456789012:rule/linegate/"
	for _, tt := range []struct {
		name string
		opts func(o *Options)
		want []string
	}{
		{"linegate's rules by default", func(*Options) {}, []string{rule + "replay", rule + "background"}},
		{"the rules named", func(o *Options) { o.Rules = []string{"background"} }, []string{rule + "background"}},
		{"every rule when asked", func(o *Options) { o.AllRules = true; o.Rules = []string{"ignored"} }, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			api := &fakeAPI{}
			opts := baseOpts()
			opts.Archive, opts.Wait = "mine", false
			tt.opts(&opts)
			res, err := Start(context.Background(), api, opts)
			if err != nil {
				t.Fatal(err)
			}
			got := api.started.Destination.FilterArns
			if strings.Join(got, ",") != strings.Join(tt.want, ",") || strings.Join(res.Rules, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("FilterArns %v, result %v; want %v", got, res.Rules, tt.want)
			}
		})
	}
}
