package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/eventbridge"

	"github.com/linegate/linegate/internal/replay"
)

// replayCommand is `linegate replay`: it starts an EventBridge archive replay of a time window to
// linegate's own rules on the bus (its FilterArns; --rules names others, --all-rules every rule of the
// bus) and, unless --no-wait, waits for it to end. Replayed events carry no X-Ray trace header, come
// back in no particular order, and events older than the idempotency TTL are processed again (see
// package replay).
func replayCommand(fs *flag.FlagSet) action {
	sf := addStackFlags(fs, "resolve the bus and the archive through this CloudFormation stack (e.g. linegate)")
	sinceS := fs.String("since", "", "start of the window, RFC3339 (e.g. 2025-03-10T09:30:00Z): events whose time is at or after it")
	untilS := fs.String("until", "", "end of the window, RFC3339, not in the future")
	bus := fs.String("bus", "", "the event bus, a name or ARN (default: the stack's EventBus with --stack, else linegate)")
	archive := fs.String("archive", "", "the archive to replay from, a name or ARN (default: the stack's EventArchive with --stack, else the one archive of the bus)")
	name := fs.String("name", "", "the replay's name (default: linegate-<since>-<until>; a window is replayed once unless named anew)")
	rules := fs.String("rules", strings.Join(replay.DefaultRules, ","), "comma-separated names of the bus's rules the replay goes to (its FilterArns)")
	allRules := fs.Bool("all-rules", false, "replay to every rule of the bus, the ones you added included (no FilterArns)")
	noWait := fs.Bool("no-wait", false, "return once the replay has started instead of waiting for it to end")
	timeout := fs.Duration("timeout", 30*time.Minute, "how long to wait for the replay to end")
	ttl := fs.Duration("idempotency-ttl", 48*time.Hour, "how long the worker keeps completed markers (warn when the window is older)")
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		const use = "usage: linegate replay --since RFC3339 --until RFC3339 [--stack NAME | --bus NAME|ARN [--archive NAME|ARN]] [--rules NAME,... | --all-rules] [--name NAME] [--endpoint-url URL] [--no-wait]"
		if *sinceS == "" || *untilS == "" || len(args) != 0 {
			return usageError{use}
		}
		since, err := time.Parse(time.RFC3339, *sinceS)
		if err != nil {
			return usageError{fmt.Sprintf("--since: %v", err)}
		}
		until, err := time.Parse(time.RFC3339, *untilS)
		if err != nil {
			return usageError{fmt.Sprintf("--until: %v", err)}
		}
		ctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		cfg, st, err := sf.open(ctx)
		if err != nil {
			return err
		}
		if st != nil {
			for ref, id := range map[*string]string{bus: "EventBus", archive: "EventArchive"} {
				if *ref == "" {
					r, err := st.Physical(id)
					if err != nil {
						return err
					}
					*ref = r.PhysicalID
				}
			}
		}
		*bus, *archive = lastARNPart(*bus, ":event-bus/"), lastARNPart(*archive, ":archive/")
		if *bus == "" {
			*bus = "linegate"
		}
		var names []string
		for _, r := range strings.Split(*rules, ",") {
			if r = strings.TrimSpace(r); r != "" {
				names = append(names, r)
			}
		}
		if len(names) == 0 && !*allRules {
			return usageError{"--rules: name at least one rule, or pass --all-rules"}
		}
		opts := replay.Options{Bus: *bus, Archive: *archive, Rules: names, AllRules: *allRules, Since: since, Until: until, Name: *name, Wait: !*noWait}
		if cut := time.Now().Add(-*ttl); since.Before(cut) {
			fmt.Fprintf(stderr, "warning: events before %s are older than the idempotency TTL (%s): they WILL be processed again, their effects happen again\n",
				cut.UTC().Format(time.RFC3339), *ttl)
		}
		res, err := replay.Start(ctx, eventbridge.NewFromConfig(cfg), opts)
		if errors.Is(err, replay.ErrInvalid) {
			return usageError{err.Error()}
		}
		if res.ARN != "" {
			to := "every rule of the bus"
			if !*allRules {
				to = "rules " + strings.Join(names, ", ")
			}
			fmt.Fprintf(stdout, "replay %s started: archive %s -> bus %s (%s), events of %s .. %s\n  %s\n",
				res.Name, res.Archive, res.Bus, to, res.Since.UTC().Format(time.RFC3339), res.Until.UTC().Format(time.RFC3339), res.ARN)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "replay %s: %s\n", res.Name, res.State)
		fmt.Fprintln(stdout, "note: replayed events carry no X-Ray trace header; each carries \"replay-name\"; EventBridge replays in no order")
		return nil
	}
}

// lastARNPart is the name in an EventBridge ARN (…:event-bus/NAME,
// …:archive/NAME), or ref itself when it is a name.
func lastARNPart(ref, marker string) string {
	if _, name, ok := strings.Cut(ref, marker); ok && strings.HasPrefix(ref, "arn:") {
		return name
	}
	return ref
}
