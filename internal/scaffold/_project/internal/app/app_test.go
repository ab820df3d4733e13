package app

import (
	"slices"
	"testing"

	"github.com/linegate/linegate/pkg/bot/bottest"
)

func TestEcho(t *testing.T) {
	b := bottest.New(New())
	if err := b.Send(t.Context(), bottest.Text("U1", "hello")); err != nil {
		t.Fatal(err)
	}
	if got := b.Texts(); !slices.Equal(got, []string{"You said: hello"}) {
		t.Errorf("the bot sent %q", got)
	}
}
