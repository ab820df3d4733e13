package app

import (
	"context"
	"fmt"
	"strings"

	"github.com/line/line-bot-sdk-go/v8/linebot/messaging_api"

	"github.com/linegate/linegate/pkg/bot"
)

// menuPrefix starts the postback data of the menu card's Order buttons.
const menuPrefix = "menu:order="

// drink is one card of the menu carousel.
type drink struct {
	key, name, price, note, color string
}

var menu = []drink{
	{"coffee", "Coffee", "¥450", "Single origin, roasted this week. Hot or iced.", "#6F4E37"},
	{"tea", "Green tea", "¥400", "Sencha from Shizuoka, brewed at 70 °C.", "#4E7A3A"},
	{"latte", "Matcha latte", "¥520", "Uji matcha with steamed milk.", "#7A9A3A"},
}

// showMenu answers "menu" with a Flex carousel: one bubble per drink, each
// with an Order button (a postback the bot answers) and a button that sends
// a message as the user.
func showMenu(ctx context.Context, e *bot.Event, _ string) error {
	bubbles := make([]messaging_api.FlexBubble, len(menu))
	for i, d := range menu {
		bubbles[i] = drinkBubble(d)
	}
	return e.Reply(ctx, messaging_api.FlexMessage{
		AltText:  "Today's drinks: " + names(),
		Contents: &messaging_api.FlexCarousel{Contents: bubbles},
	})
}

func names() string {
	out := make([]string, len(menu))
	for i, d := range menu {
		out[i] = d.name
	}
	return strings.Join(out, ", ")
}

func drinkBubble(d drink) messaging_api.FlexBubble {
	return messaging_api.FlexBubble{
		Size: messaging_api.FlexBubbleSIZE_KILO,
		Header: &messaging_api.FlexBox{
			Layout: messaging_api.FlexBoxLAYOUT_VERTICAL, BackgroundColor: d.color, PaddingAll: "16px",
			Contents: []messaging_api.FlexComponentInterface{
				&messaging_api.FlexText{Text: "TODAY", Size: "xxs", Color: "#FFFFFFCC", Weight: messaging_api.FlexTextWEIGHT_BOLD},
				&messaging_api.FlexText{Text: d.name, Size: "xl", Color: "#FFFFFF", Weight: messaging_api.FlexTextWEIGHT_BOLD},
			},
		},
		Body: &messaging_api.FlexBox{
			Layout: messaging_api.FlexBoxLAYOUT_VERTICAL, Spacing: "md",
			Contents: []messaging_api.FlexComponentInterface{
				&messaging_api.FlexBox{Layout: messaging_api.FlexBoxLAYOUT_BASELINE, Spacing: "sm",
					Contents: []messaging_api.FlexComponentInterface{
						&messaging_api.FlexText{Text: "Price", Size: "sm", Color: "#999999", Flex: 2},
						&messaging_api.FlexText{Text: d.price, Size: "lg", Weight: messaging_api.FlexTextWEIGHT_BOLD, Color: "#06C755", Flex: 5},
					}},
				&messaging_api.FlexSeparator{},
				&messaging_api.FlexText{Text: d.note, Size: "sm", Color: "#555555", Wrap: true},
			},
		},
		Footer: &messaging_api.FlexBox{
			Layout: messaging_api.FlexBoxLAYOUT_VERTICAL, Spacing: "sm",
			Contents: []messaging_api.FlexComponentInterface{
				&messaging_api.FlexButton{Style: messaging_api.FlexButtonSTYLE_PRIMARY, Color: "#06C755", Height: messaging_api.FlexButtonHEIGHT_SM,
					Action: &messaging_api.PostbackAction{Label: "Order", Data: menuPrefix + d.key, DisplayText: d.name + ", please"}},
				&messaging_api.FlexButton{Style: messaging_api.FlexButtonSTYLE_SECONDARY, Height: messaging_api.FlexButtonHEIGHT_SM,
					Action: &messaging_api.MessageAction{Label: "What's in it?", Text: "What's in the " + strings.ToLower(d.name) + "?"}},
			},
		},
	}
}

// orderFromMenu answers a menu card's Order button.
func orderFromMenu(ctx context.Context, e *bot.Event, data string) error {
	key := strings.TrimPrefix(data, menuPrefix)
	for _, d := range menu {
		if d.key == key {
			return e.ReplyText(ctx, fmt.Sprintf("One %s coming up! (%s)", strings.ToLower(d.name), d.price))
		}
	}
	return e.ReplyText(ctx, `That drink is not on today's menu. Send "menu" to see it.`)
}
