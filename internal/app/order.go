package app

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/line/line-bot-sdk-go/v8/linebot/messaging_api"

	"github.com/linegate/linegate/pkg/bot"
)

// order is the conversation state of the two-question order flow, kept in
// the chat's session between messages.
type order struct {
	Step  string `json:"step"` // "drink" or "size": the question asked last
	Drink string `json:"drink,omitempty"`
}

// orderPrefix starts the postback data of the order flow's buttons.
const orderPrefix = "order:"

// startOrder asks the first question and remembers that it did.
func startOrder(ctx context.Context, e *bot.Event, _ string) error {
	var o order
	s, err := e.Session(ctx, &o)
	if err != nil {
		return err
	}
	if err := s.Save(ctx, order{Step: "drink"}); err != nil {
		return err
	}
	return e.Reply(ctx, ask("What would you like?", "drink", "coffee", "tea"))
}

// answerOrder takes an answer ("order:drink=tea", "order:size=L"), asks the
// next question, and on the last answer places the order once — a retried
// event gets the same order number — and ends the conversation.
func answerOrder(ctx context.Context, e *bot.Event, data string) error {
	field, value, _ := strings.Cut(strings.TrimPrefix(data, orderPrefix), "=")
	var o order
	s, err := e.Session(ctx, &o)
	if err != nil {
		return err
	}
	if o.Step == "" || o.Step != field {
		return e.ReplyText(ctx, `That button belongs to another order. Send "order" to start a new one.`)
	}
	if field == "drink" {
		err := s.Save(ctx, order{Step: "size", Drink: value})
		if errors.Is(err, bot.ErrSessionConflict) {
			return e.ReplyText(ctx, "Your order changed in another message; please choose again.")
		}
		if err != nil {
			return err
		}
		return e.Reply(ctx, ask("Which size?", "size", "S", "M", "L"))
	}
	number, err := bot.Once(ctx, e, "place-order", func(context.Context) (string, error) {
		return fmt.Sprintf("%04d", rand.N(10000)), nil // your shop's API here: it runs once per event
	})
	if err != nil {
		return err
	}
	if err := s.End(ctx); err != nil && !errors.Is(err, bot.ErrSessionConflict) {
		return err
	}
	return e.ReplyText(ctx, fmt.Sprintf("Order %s: a %s %s is on its way.", number, value, o.Drink))
}

// ask is a question with one quick-reply button per choice; a tap sends the
// postback "order:<field>=<choice>".
func ask(question, field string, choices ...string) messaging_api.MessageInterface {
	items := make([]messaging_api.QuickReplyItem, len(choices))
	for i, c := range choices {
		items[i] = messaging_api.QuickReplyItem{Type: "action", Action: &messaging_api.PostbackAction{
			Label: c, Data: orderPrefix + field + "=" + c, DisplayText: c,
		}}
	}
	return messaging_api.TextMessage{Text: question, QuickReply: &messaging_api.QuickReply{Items: items}}
}
