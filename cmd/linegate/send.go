package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/linegate/linegate/internal/channel"
	"github.com/linegate/linegate/internal/linemock"
	"github.com/linegate/linegate/internal/lineplatform"
	"github.com/linegate/linegate/internal/local"
	"github.com/linegate/linegate/internal/signature"
)

func sendCommand(fs *flag.FlagSet) action {
	url := fs.String("url", "", "webhook URL (default http://127.0.0.1:3000/webhook, or /webhook/NAME with --channel NAME)")
	secret := fs.String("secret", "", "channel secret (default $LINE_CHANNEL_SECRET or linegate local's; with --channel NAME $LINE_CHANNEL_SECRET_<NAME> or local-channel-secret-NAME)")
	ch := fs.String("channel", "", "send as a user of the named channel NAME (linegate local --channel NAME): to its webhook, signed with its secret")
	text := fs.String("text", "", "send a text message with this text")
	user := fs.String("user", "U0000000000000000000000000000user", "the sending user's ID")
	event := fs.String("event", "", "send an event of this type: follow, unfollow or postback")
	data := fs.String("data", "action=demo", "postback data (with --event postback)")
	file := fs.String("file", "", "send this webhook body as it is")
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		name, err := channel.Parse(*ch)
		if err != nil {
			return usageError{"--channel: " + err.Error()}
		}
		if *url == "" {
			*url = "http://127.0.0.1:3000/webhook"
			if name != channel.Default {
				*url += "/" + name
			}
		}
		if *secret == "" {
			*secret = envOr("LINE_CHANNEL_SECRET", local.DefaultSecret)
			if name != channel.Default {
				*secret = envOr("LINE_CHANNEL_SECRET_"+channel.EnvSuffix(name), local.ChannelSecret(name))
			}
		}
		chosen := 0
		for _, s := range []string{*text, *event, *file} {
			if s != "" {
				chosen++
			}
		}
		if chosen != 1 {
			return usageError{"give exactly one of --text, --event or --file"}
		}
		if *file != "" {
			body, err := os.ReadFile(*file)
			if err != nil {
				return err
			}
			return postRaw(ctx, *url, *secret, name, body, stdout)
		}
		p := lineplatform.New(*url, []byte(*secret))
		if name != channel.Default {
			p = lineplatform.New(*url, []byte(*secret), lineplatform.WithDestination(envOr("BOT_USER_ID_"+channel.EnvSuffix(name), linemock.ChannelBotUserID(name))))
		}
		var ev json.RawMessage
		switch {
		case *text != "":
			ev = p.Text(*user, *text)
		case *event == "follow":
			ev = p.Follow(*user)
		case *event == "unfollow":
			ev = p.Unfollow(*user)
		case *event == "postback":
			ev = p.Postback(*user, *data)
		default:
			return usageError{fmt.Sprintf("--event must be follow, unfollow or postback, not %q", *event)}
		}
		d, err := p.Deliver(ctx, ev)
		if len(d.Attempts) == 0 {
			return err
		}
		a := d.Attempts[len(d.Attempts)-1]
		if a.Status == 0 {
			return noAnswer(*url, errors.New(a.Err))
		}
		fmt.Fprintf(stdout, "%d %s in %s (webhookEventId %s)\n", a.Status, http.StatusText(a.Status), a.Latency.Round(time.Microsecond), d.WebhookEventIDs[0])
		if a.Status/100 != 2 {
			return refused(a.Status, name)
		}
		return nil
	}
}

// noAnswer is the error of a send that got no HTTP answer at all.
func noAnswer(url string, err error) error {
	return fmt.Errorf("no answer from %s: %w\n  is linegate local running? start it with `make local` (or pass --url)", url, err)
}

// refused is the error of a send the webhook answered with status; ch is
// the channel sent as ("" the default), whose secret a 401 names.
func refused(status int, ch string) error {
	if status == http.StatusUnauthorized && ch != channel.Default {
		return fmt.Errorf("the webhook answered 401: the signature was refused: --secret (default $LINE_CHANNEL_SECRET_%s, else linegate local's %q) is not channel %s's secret, or --url is not channel %s's webhook (/webhook/%s)",
			channel.EnvSuffix(ch), local.ChannelSecret(ch), ch, ch, ch)
	}
	if status == http.StatusUnauthorized {
		return fmt.Errorf("the webhook answered 401: the signature was refused: --secret (default $LINE_CHANNEL_SECRET, else linegate local's %q) is not the channel secret the webhook uses", local.DefaultSecret)
	}
	return fmt.Errorf("the webhook answered %d", status)
}

// postRaw signs and posts a body as it is, for hand-made or recorded webhooks.
func postRaw(ctx context.Context, url, secret, ch string, body []byte, stdout io.Writer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", lineplatform.UserAgent)
	req.Header.Set(signature.Header, signature.Sign([]byte(secret), body))
	start := time.Now()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return noAnswer(url, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	fmt.Fprintf(stdout, "%d %s in %s: %s\n", resp.StatusCode, http.StatusText(resp.StatusCode), time.Since(start).Round(time.Microsecond), out)
	if resp.StatusCode/100 != 2 {
		return refused(resp.StatusCode, ch)
	}
	return nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
