package console_test

// The console in a real browser: Debian's chromium, driven by chromedp,
// against one `linegate local` (the example bot, internal/app, as `make local`
// runs it) shared by every test of this file, each test in a chat of its
// own. Without chromium the tests skip loudly; in CI (CI set) they fail.
//
// CONSOLE_SCREENSHOTS=1 go test -run Browser ./internal/console rewrites
// the screenshots in docs/ (the README's); normal runs never touch them.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/linegate/linegate/internal/config"
	"github.com/linegate/linegate/internal/local"
)

// Send "hello" from the chat box: the user's bubble, then the bot's echo.
func TestBrowserChatEchoesHello(t *testing.T) {
	p := open(t, user("hello"))
	p.typeText("hello")
	p.wait("the user's bubble", userSays("hello"), chatDump)
	p.wait("the echo bubble from the bot", botSays("hello"), chatDump)
}

// Long work ("slow report", bot.Queue("long"), 5 s) shows the loading animation
// while it runs; the answer replaces it.
func TestBrowserLoadingAnimationWhileLongWorkRuns(t *testing.T) {
	p := open(t, user("slow"))
	p.typeText("slow report")
	p.wait("the loading animation", `document.querySelector('#chat [data-testid=loading]') !== null`, chatDump)
	p.wait("the long work's answer", botSays("Done with report"), chatDump)
	p.wait("the loading animation gone", `document.querySelector('#chat [data-testid=loading]') === null`, chatDump)
}

// Three quick "ask" messages (a debounced route, 2 s): the chat shows each
// as the user's bubble, then "Read" under all three once the bot marked
// them read, and one answer quoting the three.
func TestBrowserAskBurstIsReadAndAnsweredOnce(t *testing.T) {
	p := open(t, user("ask"))
	for _, part := range []string{"ask what is", "ask the capital", "ask of France?"} {
		p.typeText(part)
		p.wait("the bubble of "+part, userSays(part), chatDump)
	}
	p.wait("the one answer", botSays("You asked, in 3 messages"), chatDump)
	p.wait("Read under the three messages", `[...document.querySelectorAll('#chat [data-testid=chat-message][data-from=user]')].filter(m => m.dataset.read === 'true' && m.querySelector('[data-testid=read]') !== null).length === 3`, chatDump)
	if n := eval[int](p, `document.querySelectorAll('#chat [data-testid=chat-message][data-from=bot]').length`); n != 1 {
		t.Fatalf("%d bot bubbles, want the one answer; the chat showed:\n%s", n, p.dump(chatDump))
	}
}

// "menu" answers with a Flex carousel rendered as LINE renders it; tapping
// a card's Order button sends its postback (the bubble shows its display
// text) and the bot's answer to the postback arrives.
func TestBrowserFlexButtonSendsItsPostback(t *testing.T) {
	p := open(t, user("flex"))
	p.typeText("menu")
	p.wait("three Flex bubbles", `document.querySelectorAll('#chat [data-testid=flex-bubble]').length >= 3`, chatDump)
	type bubbleLayout struct {
		Rows, Buttons int
		Header        string
	}
	layout := eval[bubbleLayout](p, `(() => { const b = document.querySelector('#chat [data-testid=flex-bubble]');
		return {Rows: b.querySelectorAll('.layout-baseline').length, Buttons: b.querySelectorAll('button.flex-button').length,
			Header: getComputedStyle(b.querySelector('.flex-header > .flex-box')).backgroundColor} })()`)
	if layout.Rows != 1 || layout.Buttons != 2 || layout.Header != "rgb(111, 78, 55)" {
		t.Fatalf("the first bubble has %d baseline rows, %d buttons, header %q; want 1, 2 and the card's #6F4E37", layout.Rows, layout.Buttons, layout.Header)
	}
	p.clickJS("the Order button of the first card",
		`[...document.querySelector('#chat [data-testid=flex-bubble]').querySelectorAll('button')].find(b => b.innerText === 'Order')`, chatDump)
	p.wait("the display text as the user's bubble", userSays("Coffee, please"), chatDump)
	p.wait("the bot's answer to the postback", botSays("One coffee coming up!"), chatDump)
	p.screenshot("console-flex.png")
}

// A text a user sends and the bot echoes renders as text: no element is
// made of it and no script runs. The same for every string a message can
// carry (below).
func TestBrowserEscapesWhatMessagesCarry(t *testing.T) {
	p := open(t, user("xss"))
	hostile := `<img src=x onerror="window.__xss=1">`
	p.typeText(hostile)
	p.wait("the echo, as text", botSays(hostile), chatDump)
	type escaped struct {
		Images int
		XSS    bool
	}
	got := eval[escaped](p, `({Images: document.querySelectorAll('#chat img').length, XSS: window.__xss === 1})`)
	if got.Images != 0 || got.XSS {
		t.Fatalf("the message made %d <img> element(s), script ran: %v", got.Images, got.XSS)
	}
}

// push sends messages to chat through the local Messaging API, as a bot
// would, with the local channel's token.
func push(t *testing.T, h *harness, to string, messages ...string) {
	t.Helper()
	body := fmt.Sprintf(`{"to":%q,"messages":[%s]}`, to, strings.Join(messages, ","))
	req, _ := http.NewRequest(http.MethodPost, h.rt.URL()+"/v2/bot/message/push", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+local.DefaultToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		var e map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&e)
		t.Fatalf("push: %d %v", resp.StatusCode, e)
	}
}

// Every kind of message a bot sends renders as LINE shows it: text with a
// LINE emoji, a sticker, an image, a location, a buttons template, a
// confirm template, a Flex bubble with a horizontal box and a separator,
// and quick replies. Hostile strings in any of them stay text, and a
// javascript: link is never a link.
func TestBrowserRendersEveryKindOfMessage(t *testing.T) {
	to := user("gallery")
	p := open(t, to)
	push(t, p.h, to,
		`{"type":"text","text":"$ hi <b>bold</b>","emojis":[{"index":0,"productId":"5ac1bfd5040ab15980c9b435","emojiId":"001"}]}`,
		`{"type":"sticker","packageId":"446","stickerId":"1988"}`,
		`{"type":"image","originalContentUrl":"https://example.com/a.jpg","previewImageUrl":"https://example.com/a.jpg"}`,
		`{"type":"location","title":"<script>alert(1)</script>","address":"Shibuya","latitude":35.65,"longitude":139.70}`,
		`{"type":"template","altText":"t","template":{"type":"buttons","title":"<i>Title</i>","text":"Pick one","actions":[{"type":"postback","label":"A","data":"a"},{"type":"uri","label":"Bad","uri":"javascript:alert(1)"}]}}`)
	push(t, p.h, to,
		`{"type":"template","altText":"c","template":{"type":"confirm","text":"Sure?","actions":[{"type":"message","label":"Yes","text":"yes"},{"type":"message","label":"No","text":"no"}]}}`,
		`{"type":"flex","altText":"f","contents":{"type":"bubble","body":{"type":"box","layout":"horizontal","spacing":"md","contents":[{"type":"text","text":"<svg onload=alert(1)>","flex":2,"color":"#FF0000"},{"type":"separator"},{"type":"text","text":"right","flex":1,"align":"end","weight":"bold"}]}},
		 "quickReply":{"items":[{"type":"action","action":{"type":"message","label":"Q1","text":"q1"}},{"type":"action","action":{"type":"postback","label":"Q2","data":"q2","displayText":"Q2!"}}]}}`)
	p.wait("all seven messages", `document.querySelectorAll('#chat [data-testid=chat-message][data-from=bot]').length >= 7`, chatDump)
	type rendered struct {
		Emoji, Sticker, Image, Location, Templates, Flex, Separator, QuickReplies, Scripts, Links, Bold, Svg int
		FlexColor, FlexWeight                                                                                string
	}
	got := eval[rendered](p, `(() => { const c = document.querySelector('#chat'); const q = s => c.querySelectorAll(s).length;
		const t = c.querySelector('[data-testid=flex-bubble] .flex-text');
		const r = c.querySelectorAll('[data-testid=flex-bubble] .flex-text')[1];
		return {Emoji: q('.line-emoji'), Sticker: q('.sticker'), Image: q('.placeholder-image'), Location: q('.location'),
			Templates: q('[data-testid=template]'), Flex: q('[data-testid=flex-bubble] .layout-horizontal'), Separator: q('.flex-separator'),
			QuickReplies: document.querySelectorAll('[data-testid=quick-reply] button').length, Scripts: q('script'), Links: q('a'),
			Bold: q('b'), Svg: q('svg'), FlexColor: getComputedStyle(t).color, FlexWeight: getComputedStyle(r).fontWeight} })()`)
	if got.Emoji != 1 || got.Sticker != 1 || got.Image != 1 || got.Location != 1 || got.Templates != 2 || got.Flex != 1 || got.Separator != 1 || got.QuickReplies != 2 {
		t.Fatalf("rendered %+v; want one of each, two templates and two quick replies\n%s", got, p.dump(chatDump))
	}
	if got.Scripts+got.Links+got.Bold+got.Svg != 0 {
		t.Fatalf("message strings became markup: %+v", got)
	}
	if got.FlexColor != "rgb(255, 0, 0)" || got.FlexWeight != "700" {
		t.Fatalf("Flex text styles: color %s weight %s; want rgb(255, 0, 0) and 700", got.FlexColor, got.FlexWeight)
	}
	p.wait("the hostile strings shown as text", `document.querySelector('#chat').innerText.includes('<svg onload=alert(1)>') && document.querySelector('#chat').innerText.includes('<script>alert(1)</script>')`, chatDump)
	// A quick reply sends its message, and the quick replies go away.
	p.clickJS("the quick reply Q1", `[...document.querySelectorAll('[data-testid=quick-reply] button')].find(b => b.innerText === 'Q1')`, chatDump)
	p.wait("the quick reply's message and its echo", userSays("q1")+" && "+botSays("q1"), chatDump)
}

// The failure path of docs/local.md, steps 6 and 7 in order, clicked:
// probe:panic sends a crash card and, panicking on every receive, lands in
// the interactive DLQ; probe:fail fails every receive and joins it; the
// alarm turns ALARM, a red card reaches the operator's phone; the fix of
// both probes is deployed, Redrive on the card empties the DLQ (both
// messages), both events are answered, and the card turns green: the
// alarm's OK card arrives (data-state OK, green) and the red card is marked
// resolved (data-resolved true, its header green).
func TestBrowserProbeFailToRedriveTurnsTheCardGreen(t *testing.T) {
	fixed.Store(false)
	t.Cleanup(func() { fixed.Store(false) })
	h := start(t)
	dlq, alarm := "InteractiveDLQ", ""
	for _, a := range h.rt.Topology().Alarms {
		for _, q := range h.rt.Topology().Queues {
			if q.LogicalID == dlq && a.Dimensions["QueueName"] == q.Name && a.MetricName == "ApproximateNumberOfMessagesVisible" {
				alarm = a.Name
			}
		}
	}
	if alarm == "" {
		t.Fatal("the template has no alarm on InteractiveDLQ's depth")
	}
	p := open(t, user("dlq"))
	pipeline := `document.querySelector('#tab-pipeline').innerText + '\n---\n' + document.querySelector('#phone').innerText`
	p.typeText("menu") // the README's screenshot: a Flex card in the chat too
	p.wait("the menu", `document.querySelectorAll('#chat [data-testid=flex-bubble]').length >= 3`, chatDump)
	p.typeText("probe:panic") // step 6
	p.wait("the crash card", `document.querySelector('#phone').innerText.includes('CRASH')`, pipeline)
	p.typeText("probe:fail") // step 7
	row := fmt.Sprintf(`document.querySelector('[data-testid=queue-row][data-queue=%q]')`, dlq)
	p.wait("both probes in the DLQ", row+` && Number(`+row+`.dataset.visible) === 2`, pipeline)
	p.wait("the alarm to turn ALARM", fmt.Sprintf(`document.querySelector('[data-testid=alarm][data-alarm=%q]')?.dataset.state === 'ALARM'`, alarm), pipeline)
	red := fmt.Sprintf(`document.querySelector('#phone [data-testid=operator-card][data-alarm=%q][data-state=ALARM]')`, alarm)
	p.wait("a red card on the operator's phone", red+` !== null && getComputedStyle(`+red+`.querySelector('.flex-header > .flex-box')).backgroundColor === 'rgb(217, 48, 37)'`, pipeline)
	p.screenshot("console.png")

	fixed.Store(true) // deploy the fix, then redrive
	p.clickJS("the card's Redrive button", red+`?.querySelector('[data-testid=redrive-button][data-queue=InteractiveDLQ]')`, pipeline)
	p.wait("the DLQ to empty", row+` && `+row+`.dataset.visible === '0'`, pipeline)
	p.wait("the operator's tap answered", `document.querySelector('#phone').innerText.includes('2 message(s) moved back')`, pipeline)
	p.wait("the alarm to turn OK", fmt.Sprintf(`document.querySelector('[data-testid=alarm][data-alarm=%q]')?.dataset.state === 'OK'`, alarm), pipeline)
	green := fmt.Sprintf(`document.querySelector('#phone [data-testid=operator-card][data-alarm=%q][data-state=OK]')`, alarm)
	p.wait("a green OK card", green+` !== null && getComputedStyle(`+green+`.querySelector('.flex-header > .flex-box')).backgroundColor === 'rgb(30, 142, 62)'`, pipeline)
	p.wait("the red card turned green", red+`?.dataset.resolved === 'true' && getComputedStyle(`+red+`.querySelector('.flex-header > .flex-box')).backgroundColor === 'rgb(30, 142, 62)'`, pipeline)
	p.wait("both redriven events answered by the fixed handlers", fmt.Sprintf(`[...document.querySelectorAll('#chat [data-testid=chat-message][data-from=bot]')].filter(m => m.innerText.includes(%q)).length === 2`, fixedReply), chatDump)
}

// Opening an event shows its timeline and its X-Ray traces as a waterfall:
// the webhook's trace and the worker's, linked; the same under
// OpenTelemetry (`linegate local --tracing otel`).
func TestBrowserEventShowsItsTraceWaterfall(t *testing.T) {
	for _, backend := range []config.Backend{config.TracingXRay, config.TracingOTel} {
		t.Run(string(backend), func(t *testing.T) { testEventShowsItsTraceWaterfall(t, backend) })
	}
}

func testEventShowsItsTraceWaterfall(t *testing.T, backend config.Backend) {
	p := openOn(t, startWith(t, backend), user("trace"))
	p.typeText("trace me")
	p.wait("the echo", botSays("trace me"), chatDump)
	id := eval[string](p, `document.querySelector('#chat [data-testid=chat-message][data-from=user]').dataset.eventId`)
	p.clickJS("the Events tab", `document.querySelector('[role=tab][data-tab=events]')`, `document.body.innerText`)
	events := `document.querySelector('#tab-events').innerText`
	p.clickJS("the event's row", fmt.Sprintf(`document.querySelector('[data-testid=event-row][data-event-id=%q]')`, id), events)
	wf := `document.querySelector('[data-testid=trace-waterfall]')`
	p.wait("the waterfall with the webhook's trace and the linked worker trace",
		wf+` && `+wf+`.querySelectorAll('.wf-trace').length >= 2 && `+wf+`.querySelector('[data-testid=trace-link]') !== null && `+
			wf+`.querySelector('.wf-row.mine') !== null && [...`+wf+`.querySelectorAll('.wf-row.remote')].some(r => r.innerText.includes('/v2/bot/message/reply'))`, events)
	p.wait("the timeline from the webhook to the LINE call", `['webhook','bus','queue','receive','handler','line'].every(s => document.querySelector('[data-testid=timeline] [data-stage='+s+']'))`, events)
	linked := eval[string](p, wf+`.querySelector('[data-testid=trace-link]').dataset.linkedTrace`)
	webhookTrace := eval[string](p, wf+`.querySelector('.wf-trace').dataset.traceId`)
	if linked != webhookTrace {
		t.Fatalf("the worker trace links to %s; the webhook's trace is %s", linked, webhookTrace)
	}
	eval[bool](p, `(() => { document.querySelector('[data-testid=trace-waterfall]').scrollIntoView({block: 'end'}); return true })()`)
	if backend == config.TracingXRay {
		p.screenshot("console-trace.png")
	}
}
