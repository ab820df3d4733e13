package config

import (
	"fmt"
	"strings"

	"github.com/linegate/linegate/internal/channel"
)

// Channel is one named LINE channel (official account) of the stack,
// beside the default channel, whose settings are the function's own
// (LINE_CHANNEL_SECRET_PARAM, LINE_CHANNEL_ACCESS_TOKEN_PARAM, BOT_USER_ID,
// OPERATOR_LINE_IDS). A named channel is added by configuration only: its
// name in LINE_CHANNELS and its settings under one SSM path,
// LINE_CHANNEL_PARAMETER_PATH/NAME/ (the Channels and ChannelParameterPath
// template parameters). For a local run each setting may instead be a
// plain value in the variable named in its comment, NAME upper-cased with
// hyphens as underscores (channel.EnvSuffix); plain values are refused
// inside Lambda, as the default channel's are.
//
// Each field is a Secret: where the value comes from. The values not
// secret (BotUserID, Operators, ChannelID) live under the same path so
// that one path holds a channel; they are checked once read
// (CheckBotUserID, ParseOperators).
type Channel struct {
	Name string
	// Secret is NAME/secret (LINE_CHANNEL_SECRET_NAME): the channel
	// secret its webhook bodies are signed with (and, with the stateless
	// token mode, its tokens are minted with).
	Secret Secret
	// PreviousSecret is NAME/secret-previous
	// (LINE_CHANNEL_SECRET_PREVIOUS_NAME), optional: the secret before a
	// rotation, accepted beside the current one while it is there.
	PreviousSecret Secret
	// AccessToken is NAME/token (LINE_CHANNEL_ACCESS_TOKEN_NAME): the
	// long-lived channel access token (LINE_TOKEN_MODE long-lived).
	AccessToken Secret
	// ChannelID is NAME/channel-id (LINE_CHANNEL_ID_NAME): the channel ID
	// tokens are minted for (LINE_TOKEN_MODE stateless or v2.1).
	ChannelID Secret
	// AssertionKey is NAME/assertion-key (LINE_ASSERTION_KEY_NAME): the
	// assertion signing key's private JWK (LINE_TOKEN_MODE v2.1).
	AssertionKey Secret
	// BotUserID is NAME/bot-user-id (BOT_USER_ID_NAME), optional: when set,
	// the webhook refuses a body for this channel whose destination is
	// another bot.
	BotUserID Secret
	// Operators is NAME/operators (OPERATOR_LINE_IDS_NAME), optional: the
	// comma-separated LINE IDs that get this channel's cards (its quota,
	// its held results) through its own token, and whose taps on them the
	// worker carries out. Without it the channel's cards go to the default
	// channel's operators.
	Operators Secret
}

// Auth is the channel's LineAuth in mode: its own credentials, base's
// token lifetime and API base URL. The channel ID comes from ChannelIDFrom
// (resolved with the credentials, linetoken.FromConfig).
func (c Channel) Auth(base LineAuth) LineAuth {
	return LineAuth{Mode: base.Mode, AccessToken: c.AccessToken, ChannelIDFrom: c.ChannelID, ChannelSecret: c.Secret,
		AssertionKey: c.AssertionKey, TokenLife: base.TokenLife, APIBaseURL: base.APIBaseURL}
}

// needs says which of a channel's settings a function reads.
type needs struct {
	secrets   bool // the webhook: the secrets and the bot user ID
	token     bool // the LINE-calling functions: the token mode's credentials
	operators bool // the functions that page or act for operators
}

// channels reads LINE_CHANNELS and, for each channel, the settings n
// names. mode is the stack's token mode (LINE_TOKEN_MODE), which every
// channel shares.
func (r *reader) channels(n needs, mode string) []Channel {
	list := strings.TrimSpace(r.env("LINE_CHANNELS"))
	if list == "" {
		return nil
	}
	path := strings.TrimRight(strings.TrimSpace(r.env("LINE_CHANNEL_PARAMETER_PATH")), "/")
	if path != "" && !strings.HasPrefix(path, "/") {
		r.problem("LINE_CHANNEL_PARAMETER_PATH must be an SSM path with a leading slash (such as /linegate/channels), got %q", path)
		path = ""
	}
	var out []Channel
	seen := map[string]bool{}
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if err := channel.Valid(name); err != nil {
			r.problem("LINE_CHANNELS: %v", err)
			continue
		}
		if seen[name] {
			r.problem("LINE_CHANNELS names the channel %q twice", name)
			continue
		}
		seen[name] = true
		c := Channel{Name: name}
		get := func(env, leaf string, required bool) Secret {
			return r.channelSetting(name, path, env, leaf, required)
		}
		if n.secrets || (n.token && mode == TokenStateless) {
			c.Secret = get("LINE_CHANNEL_SECRET", "secret", true)
		}
		if n.secrets {
			c.PreviousSecret = get("LINE_CHANNEL_SECRET_PREVIOUS", "secret-previous", false)
			c.BotUserID = get("BOT_USER_ID", "bot-user-id", false)
			if v := c.BotUserID.Value; v != "" && CheckBotUserID(v) != nil {
				r.problem("channel %s: %v", name, CheckBotUserID(v))
			}
		}
		if n.token {
			switch mode {
			case TokenStateless:
				c.ChannelID = get("LINE_CHANNEL_ID", "channel-id", true)
			case TokenV21:
				c.ChannelID = get("LINE_CHANNEL_ID", "channel-id", true)
				c.AssertionKey = get("LINE_ASSERTION_KEY", "assertion-key", true)
			default:
				c.AccessToken = get("LINE_CHANNEL_ACCESS_TOKEN", "token", true)
			}
		}
		if n.operators {
			c.Operators = get("OPERATOR_LINE_IDS", "operators", false)
			if v := c.Operators.Value; v != "" {
				if _, err := ParseOperators(v); err != nil {
					r.problem("channel %s: %v", name, err)
				}
			}
		}
		out = append(out, c)
	}
	return out
}

// channelSetting is where one setting of channel name comes from: the
// plain value of ENV_NAME when set (a local run; refused inside Lambda),
// else the SSM parameter PATH/NAME/leaf. A required setting with neither
// is a problem.
func (r *reader) channelSetting(name, path, env, leaf string, required bool) Secret {
	envName := env + "_" + channel.EnvSuffix(name)
	if v := r.env(envName); v != "" {
		s := Secret{Value: v}
		r.localOnly(s, envName)
		return s
	}
	if path == "" {
		if required {
			r.problem("channel %s: LINE_CHANNEL_PARAMETER_PATH is not set: its settings are SSM parameters under it (PATH/%s/%s; see docs/channels.md), or set %s for a local run",
				name, name, leaf, envName)
		}
		return Secret{}
	}
	return Secret{Param: path + "/" + name + "/" + leaf, Optional: !required}
}

// CheckBotUserID checks a bot's user ID: U followed by 32 lowercase hex
// digits.
func CheckBotUserID(id string) error {
	if !lineID.MatchString(id) || id[0] != 'U' {
		return fmt.Errorf("bot user ID must be U followed by 32 lowercase hex digits, got %q", id)
	}
	return nil
}

// ParseOperators splits and checks a comma-separated list of operator
// IDs (OPERATOR_LINE_IDS' format): LINE user, group or room IDs.
func ParseOperators(list string) ([]string, error) {
	r := reader{env: func(string) string { return "" }}
	ids := r.operators(list)
	return ids, r.err()
}
