package bench

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"

	"github.com/linegate/linegate/internal/chatqueue"
	"github.com/linegate/linegate/internal/eventbus"
	"github.com/linegate/linegate/internal/ingress"
	"github.com/linegate/linegate/internal/lineplatform"
	"github.com/linegate/linegate/internal/signature"
)

// keptEntries is the bus the webhook hands its entries to: it keeps them.
type keptEntries struct{ entries []eventbus.Entry }

func (k *keptEntries) Start(_ context.Context, e []eventbus.Entry) *eventbus.Publication {
	for _, x := range e {
		x.Detail = bytes.Clone(x.Detail)
		k.entries = append(k.entries, x)
	}
	return eventbus.Accepted(len(e))
}

// keptMessages is the chat queue the webhook hands its messages to.
type keptMessages struct{ msgs []chatqueue.Message }

func (k *keptMessages) Send(_ context.Context, m []chatqueue.Message) (chatqueue.Result, error) {
	for _, x := range m {
		x.Body = bytes.Clone(x.Body)
		k.msgs = append(k.msgs, x)
	}
	return chatqueue.Result{Queued: len(m), Calls: 1}, nil
}

// ArchiveEventBytes, the cost table's archived bytes per event, is the size
// of one chat's text message as the bus archives it, within 10 %: the
// webhook's own envelope of a text message event as LINE sends one today
// (the local LINE platform's: ids, reply, quote and mark-as-read tokens at
// their real lengths), in EventBridge's event shape, which is the chat
// queue message's body (envelope.Encode) and what an archive keeps, with the
// account and the event id EventBridge sets.
func TestArchiveEventBytes(t *testing.T) {
	const secret = "archive-secret"
	lp := lineplatform.New("http://127.0.0.1:9/webhook", []byte(secret))
	bus, queue := &keptEntries{}, &keptMessages{}
	h, err := ingress.New(bus, ingress.WithSecrets(secret), ingress.WithChatQueue(queue), ingress.WithRegion("ap-northeast-1"))
	if err != nil {
		t.Fatal(err)
	}
	// A message of a typical length: a sentence.
	body := lineplatform.Body("U"+strings.Repeat("0", 32), lp.Text("U"+strings.Repeat("1", 32), "Could you tell me when the shop opens today?"))
	resp, err := h.Handle(context.Background(), "POST", signature.Sign([]byte(secret), body), body)
	if err != nil || resp.Status != 200 || len(queue.msgs) != 1 || len(bus.entries) != 1 {
		t.Fatalf("webhook answered %d (%v); %d queued, %d published", resp.Status, err, len(queue.msgs), len(bus.entries))
	}
	envelope := queue.msgs[0].Body
	for _, k := range []string{`"detail-type":"message"`, `"source":"line.webhook"`, `"region":"ap-northeast-1"`, `"detail":{`, `"quoteToken"`, `"markAsReadToken"`} {
		if !bytes.Contains(envelope, []byte(k)) {
			t.Fatalf("the envelope has no %s: %s", k, envelope)
		}
	}
	// EventBridge fills in what the webhook's copy leaves to it: the
	// account's 12 digits and a UUID for the event's id.
	archived := bytes.Replace(envelope, []byte(`"account":""`), []byte(`"account":"123456789012"`), 1)
	archived = bytes.Replace(archived, []byte(`"id":"`+string(bus.entries[0].EventID)+`"`), []byte(`"id":"7f0c4a5e-1b2d-4c3e-8f9a-0b1c2d3e4f51"`), 1)
	if len(archived) != len(envelope)+12+36-len(bus.entries[0].EventID) {
		t.Fatalf("the envelope's account and id are not what this test fills in: %s", envelope)
	}
	got := float64(len(archived))
	t.Logf("one text message as archived: %.0f B (ArchiveEventBytes %d): %s", got, ArchiveEventBytes, archived)
	if math.Abs(got-ArchiveEventBytes) > 0.1*ArchiveEventBytes {
		t.Fatalf("%.0f bytes, ArchiveEventBytes says %d: measure again and regenerate docs/cost.md", got, ArchiveEventBytes)
	}
}
