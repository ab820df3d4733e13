package quota_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/linegate/linegate/internal/alert"
	"github.com/linegate/linegate/internal/cloud/mem"
	"github.com/linegate/linegate/internal/lineapi"
	"github.com/linegate/linegate/internal/linemock"
	"github.com/linegate/linegate/internal/postback"
	"github.com/linegate/linegate/internal/quota"
	"github.com/linegate/linegate/internal/testclock"
	"github.com/linegate/linegate/internal/testmetrics"
)

const operator = "U0000000000000000000000000000cafe"

type fixture struct {
	line    *linemock.Server
	gov     *quota.Governor
	metrics *testmetrics.Recorder
	cloud   *mem.Cloud
	held    string
	signer  *postback.Signer
}

func newFixture(t *testing.T, now time.Time) *fixture {
	t.Helper()
	f := &fixture{line: linemock.New(), metrics: &testmetrics.Recorder{}, cloud: mem.New()}
	t.Cleanup(func() { _ = f.cloud.Close() })
	srv := httptest.NewServer(f.line)
	t.Cleanup(srv.Close)
	quiet := slog.New(slog.DiscardHandler)
	api := lineapi.New("t", lineapi.WithBaseURL(srv.URL), lineapi.WithLogger(quiet))
	f.signer, _ = postback.NewSigner([]byte("a key only the stack knows"), nil)
	cards, err := alert.New(api, []string{operator}, alert.WithLogger(quiet), alert.WithButtons(f.signer, time.Hour, nil))
	if err != nil {
		t.Fatal(err)
	}
	q, _ := f.cloud.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String("held")})
	f.held = aws.ToString(q.QueueUrl)
	f.gov = &quota.Governor{Line: api, Cards: cards, Held: f.cloud, HeldURL: f.held, Loc: time.UTC,
		Now: testclock.New(now).Now, Log: quiet, Metrics: f.metrics}
	return f
}

// Use at 85 % pages once with the projection; running again the same day
// pages nothing more; 96 % pages the alarm; below 80 % nothing.
func TestGovernorPagesAtThresholdsOnce(t *testing.T) {
	mid := time.Date(2026, 12, 16, 0, 0, 0, 0, time.UTC) // 15 of 31 days elapsed
	tests := []struct {
		name      string
		limit     int64
		used      int64
		level     string
		projected int64
		cards     int
	}{
		{"below the warning", 1000, 500, "", 1033, 0},
		{"warning", 1000, 850, "WARN", 1756, 1},
		{"alarm", 1000, 960, "ALARM", 1984, 1},
		{"no limit", -1, 5000, "", 10333, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, mid)
			f.line.SetQuota(linemock.Quota{Limit: tt.limit, Used: tt.used})
			st, err := f.gov.Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if st.Level != tt.level || st.Projected != tt.projected {
				t.Fatalf("status %+v, want level %q projected %d", st, tt.level, tt.projected)
			}
			if _, err := f.gov.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			msgs := f.line.Messages()
			if len(msgs) != tt.cards {
				t.Fatalf("%d cards after two runs, want %d", len(msgs), tt.cards)
			}
			if tt.cards == 1 {
				body := string(msgs[0].Messages[0])
				if msgs[0].To != operator || !strings.Contains(body, "by the month's end") {
					t.Fatalf("card %s", body)
				}
			}
			// The card itself is a push: the second run sees it counted.
			if got, want := f.metrics.Total(quota.MetricUsed), float64(2*tt.used+int64(tt.cards)); got != want {
				t.Errorf("%s = %v over two runs, want %v", quota.MetricUsed, got, want)
			}
		})
	}
}

// Held results and quota available again: a card with a signed Resend held
// button; with the quota still spent, no such card.
func TestGovernorOffersResendWhenQuotaReturns(t *testing.T) {
	f := newFixture(t, time.Date(2026, 12, 16, 0, 0, 0, 0, time.UTC))
	_, _ = f.cloud.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(f.held), MessageBody: aws.String("{}")})
	f.line.SetQuota(linemock.Quota{Limit: 100, Used: 100})
	if _, err := f.gov.Run(context.Background()); err != nil {
		t.Log(err) // the quota card itself cannot be pushed: the quota is spent
	}
	if len(f.line.Messages()) != 0 {
		t.Fatalf("cards pushed with the quota spent: %d", len(f.line.Messages()))
	}
	f.line.SetQuota(linemock.Quota{Limit: 1000, Used: 100})
	st, err := f.gov.Run(context.Background())
	if err != nil || st.Held != 1 {
		t.Fatalf("status %+v, %v", st, err)
	}
	msgs := f.line.Messages()
	if len(msgs) != 1 {
		t.Fatalf("%d cards, want the held card", len(msgs))
	}
	data := findData(msgs[0].Messages[0])
	if c, err := f.signer.Verify(data); err != nil || c.Action != postback.ResendHeld {
		t.Fatalf("Resend held button data %q: %+v %v", data, c, err)
	}
}

// buttonData is the data of the first linegate postback in a card.
var buttonData = regexp.MustCompile(`"data":"(lg1\.[^"]+)"`)

func findData(card []byte) string {
	if m := buttonData.FindSubmatch(card); m != nil {
		return string(m[1])
	}
	return ""
}

func TestProject(t *testing.T) {
	tests := []struct {
		now  time.Time
		used int64
		want int64
	}{
		{time.Date(2026, 12, 1, 0, 30, 0, 0, time.UTC), 40, 40},     // first hour: no pace yet
		{time.Date(2026, 12, 16, 12, 0, 0, 0, time.UTC), 500, 1000}, // half of December
		{time.Date(2026, 2, 15, 0, 0, 0, 0, time.UTC), 700, 1400},   // half of February (28 days)
		{time.Date(2026, 12, 31, 23, 59, 0, 0, time.UTC), 999, 999}, // the last minute
	}
	for _, tt := range tests {
		if got := quota.Project(tt.used, tt.now); got != tt.want {
			t.Errorf("Project(%d, %v) = %d, want %d", tt.used, tt.now, got, tt.want)
		}
	}
}

// The thresholds hold exactly at 80 % and 95 % of the limit, and not a
// message below; QuotaExhausted is 1 from the limit on.
func TestGovernorThresholdBoundaries(t *testing.T) {
	mid := time.Date(2026, 12, 16, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		limit, used int64
		level       string
		exhausted   float64
	}{
		{1000, 799, "", 0},
		{1000, 800, "WARN", 0},
		{1000, 801, "WARN", 0},
		{1000, 949, "WARN", 0},
		{1000, 950, "ALARM", 0},
		{1000, 951, "ALARM", 0},
		{1000, 999, "ALARM", 0},
		{1000, 1000, "ALARM", 1},
		{1000, 1200, "ALARM", 1},
		{20, 15, "", 0},
		{20, 16, "WARN", 0},
		{20, 18, "WARN", 0},
		{20, 19, "ALARM", 0},
		{200, 190, "ALARM", 0},
		{200, 189, "WARN", 0},
		{0, 0, "ALARM", 1}, // a limit of nothing: every push is refused
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d of %d", tt.used, tt.limit), func(t *testing.T) {
			f := newFixture(t, mid)
			f.line.SetQuota(linemock.Quota{Limit: tt.limit, Used: tt.used})
			st, err := f.gov.Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if st.Level != tt.level {
				t.Fatalf("%d of %d (%.2f%%): level %q, want %q", tt.used, tt.limit, st.Percent, st.Level, tt.level)
			}
			if got := f.metrics.Total(quota.MetricExhausted); got != tt.exhausted {
				t.Fatalf("%s = %v, want %v", quota.MetricExhausted, got, tt.exhausted)
			}
			if cards := len(f.line.Messages()); (cards == 1) != (tt.level != "") && tt.exhausted == 0 {
				t.Fatalf("%d cards at level %q", cards, tt.level)
			}
		})
	}
}

// Each channel's governor reads its own channel's quota and pages about
// it: the named channel's card says which channel it is about and is a
// card of its own (not the default channel's of the same day, even when
// both go out through one channel); a failing channel does not stop the
// others, and is named.
func TestGovernorsPerChannel(t *testing.T) {
	mid := time.Date(2026, 12, 16, 0, 0, 0, 0, time.UTC)
	def := newFixture(t, mid)
	lineB := linemock.New()
	srvB := httptest.NewServer(lineB)
	t.Cleanup(srvB.Close)
	quiet := slog.New(slog.DiscardHandler)
	readB := lineapi.New("tb", lineapi.WithBaseURL(srvB.URL), lineapi.WithLogger(quiet))
	// b has no operators of its own: its cards go through the default
	// channel to the stack's operators.
	through := def.gov.Cards
	b := &quota.Governor{Channel: "b", Line: readB, Cards: through, Loc: time.UTC, Now: testclock.New(mid).Now, Log: quiet, Metrics: &testmetrics.Recorder{}}
	gs := &quota.Governors{Default: def.gov, Named: []*quota.Governor{b}}
	def.line.SetQuota(linemock.Quota{Limit: 1000, Used: 850})
	lineB.SetQuota(linemock.Quota{Limit: 500, Used: 480})
	st, err := gs.Run(context.Background())
	if err != nil || st.Level != "WARN" || st.Quota.Limit != 1000 {
		t.Fatalf("%+v %v: want the default channel's status", st, err)
	}
	msgs := def.line.Messages()
	if len(msgs) != 2 {
		t.Fatalf("%d cards through the default channel, want its own and b's", len(msgs))
	}
	if !strings.Contains(string(msgs[1].Messages[0]), "channel b") || msgs[0].RetryKey == msgs[1].RetryKey {
		t.Fatalf("b's card %s; retry keys %s %s", msgs[1].Messages[0], msgs[0].RetryKey, msgs[1].RetryKey)
	}
	lineB.Inject(linemock.Fault{Path: linemock.PathQuota, Status: 500, Times: 10})
	if _, err := gs.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "channel b") {
		t.Fatalf("err %v, want channel b named", err)
	}
}
