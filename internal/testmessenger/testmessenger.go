// Package testmessenger is the one recording bot.Messenger of linegate's
// tests: it keeps every reply or push, push, loading animation and mark as
// read a bot asks of LINE, for the test's assertions, and answers each with
// the error set by Fail.
package testmessenger

import (
	"context"
	"slices"
	"sync"

	"github.com/line/line-bot-sdk-go/v8/linebot/messaging_api"

	"github.com/linegate/linegate/internal/lineapi"
)

// Send is one Messenger.Send: where to, and the messages.
type Send struct {
	Target   lineapi.Target
	Messages []messaging_api.MessageInterface
}

// Push is one Messenger.Push.
type Push struct {
	To, RetryKey string
	Messages     []messaging_api.MessageInterface
}

// Loading is one Messenger.ShowLoading.
type Loading struct {
	Chat    string
	Seconds int
}

// Messenger records every call. The zero value is ready; it is safe for
// concurrent use.
type Messenger struct {
	mu      sync.Mutex
	err     error
	sends   []Send
	pushes  []Push
	loading []Loading
	reads   []string
}

// Fail makes every later call return err (nil: succeed again).
func (m *Messenger) Fail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.err = err
}

// Send records a reply (or the push it falls back to) and answers that it
// went as a reply.
func (m *Messenger) Send(_ context.Context, tg lineapi.Target, msgs ...messaging_api.MessageInterface) (lineapi.Via, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sends = append(m.sends, Send{Target: tg, Messages: msgs})
	return lineapi.ViaReply, m.err
}

// Push records a push.
func (m *Messenger) Push(_ context.Context, to, retryKey string, msgs ...messaging_api.MessageInterface) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pushes = append(m.pushes, Push{To: to, RetryKey: retryKey, Messages: msgs})
	return m.err
}

// ShowLoading records a loading animation.
func (m *Messenger) ShowLoading(_ context.Context, chatID string, seconds int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.loading = append(m.loading, Loading{Chat: chatID, Seconds: seconds})
	return m.err
}

// MarkAsRead records a mark-as-read by its markAsReadToken.
func (m *Messenger) MarkAsRead(_ context.Context, markAsReadToken string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads = append(m.reads, markAsReadToken)
	return m.err
}

// Reads is the markAsReadToken of every MarkAsRead so far, in order.
func (m *Messenger) Reads() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.reads)
}

// Sends is every Send so far, in order.
func (m *Messenger) Sends() []Send {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.sends)
}

// Pushes is every Push so far, in order.
func (m *Messenger) Pushes() []Push {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.pushes)
}

// Loading is every ShowLoading so far, in order.
func (m *Messenger) Loading() []Loading {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.loading)
}

// Messages is every message sent with Send, in order.
func (m *Messenger) Messages() []messaging_api.MessageInterface {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []messaging_api.MessageInterface
	for _, s := range m.sends {
		out = append(out, s.Messages...)
	}
	return out
}

// Texts is the text of every text message sent with Send, in order.
func (m *Messenger) Texts() []string {
	var out []string
	for _, msg := range m.Messages() {
		if t, ok := msg.(messaging_api.TextMessage); ok {
			out = append(out, t.Text)
		}
	}
	return out
}
