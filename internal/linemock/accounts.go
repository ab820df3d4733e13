package linemock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// account is what LINE keeps per channel (official account): its
// credentials and the tokens it accepts, its bot, its month's quota and
// its webhook settings. A Server has the default channel's and, with
// WithNamedChannel, more: every call is its token's channel's (authorize),
// and reply tokens, mark-as-read tokens and retry keys belong to the
// channel whose webhook or push they came with, as on LINE.
type account struct {
	id, secret string              // the channel ID and secret the stateless token endpoint checks
	tokens     map[string]struct{} // long-lived tokens it accepts (the default's: WithTokens; nil accepts any)
	bot        BotInfo
	quota      Quota
	settings   Channel
}

// issuedToken is a token the token endpoints issued: when it expires and
// whose it is.
type issuedToken struct {
	expires time.Time
	channel string
}

// NamedChannel is one more channel the Server serves (WithNamedChannel).
type NamedChannel struct {
	// Name is how the Server names the channel in records (Record.Channel).
	Name string
	// ID and Secret are the channel's ID and secret: the stateless token
	// endpoint issues the channel's tokens to them.
	ID, Secret string
	// Tokens are long-lived channel access tokens of the channel.
	Tokens []string
	// Bot is what GET /v2/bot/info answers with the channel's token
	// (DefaultBotInfo with a user ID of its own when zero: ChannelBotUserID).
	Bot BotInfo
}

// WithNamedChannel serves one more channel beside the default one: calls
// made with its tokens (c.Tokens, or those the token endpoints issued to
// its ID) are its own, recorded with its name, counted against its own
// quota, and may use only the reply and mark-as-read tokens of its own
// webhooks (IssueChannelReplyToken).
func WithNamedChannel(c NamedChannel) Option {
	return func(s *Server) {
		a := &account{id: c.ID, secret: c.Secret, tokens: map[string]struct{}{}, bot: c.Bot,
			quota: Quota{Limit: -1}, settings: Channel{Active: true, Redelivery: true}}
		for _, t := range c.Tokens {
			a.tokens[t] = struct{}{}
		}
		if a.bot == (BotInfo{}) {
			a.bot = DefaultBotInfo
			a.bot.UserID, a.bot.BasicID, a.bot.DisplayName = ChannelBotUserID(c.Name), "@linegate-"+c.Name, "linegate local bot ("+c.Name+")"
		}
		if s.named == nil {
			s.named = map[string]*account{}
		}
		s.named[c.Name] = a
	}
}

// ChannelBotUserID is the bot user ID the Server gives a named channel's
// bot unless NamedChannel.Bot says otherwise: U and 32 hex digits of its
// name's SHA-256, never the default bot's.
func ChannelBotUserID(name string) string {
	sum := sha256.Sum256([]byte("linegate local channel " + name))
	return "U" + hex.EncodeToString(sum[:16])
}

// ChannelWebhookTester is WebhookTester for the channel whose token asked
// for the test delivery ("" for the default channel).
type ChannelWebhookTester func(ctx context.Context, channel, endpoint string) (status int, reason string)

// WithChannelWebhookTester sets what the test-delivery endpoint calls for
// any channel (it takes precedence over WithWebhookTester).
func WithChannelWebhookTester(t ChannelWebhookTester) Option {
	return func(s *Server) { s.chanTester = t }
}

// accountLocked is channel ch's account; nil for a channel the Server does
// not serve.
func (s *Server) accountLocked(ch string) *account {
	if ch == "" {
		return s.def
	}
	return s.named[ch]
}

// statelessClient names the channel whose ID and secret these are: the
// default channel's (WithChannel) or a named one's.
func (s *Server) statelessClient(id, secret string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id == "" {
		return "", false
	}
	if s.def.id != "" && id == s.def.id && secret == s.def.secret {
		return "", true
	}
	for name, a := range s.named {
		if a.id != "" && id == a.id && secret == a.secret {
			return name, true
		}
	}
	return "", false
}

// Channels names the named channels the Server serves.
func (s *Server) Channels() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.named))
	for name := range s.named {
		out = append(out, name)
	}
	return out
}
