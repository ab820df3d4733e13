package ingress

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/linegate/linegate/internal/signature"
)

// Metric names of the secret re-read (docs/metrics.md).
const (
	// MetricSecretRereads counts re-reads of the channel secrets after a
	// signature that did not verify.
	MetricSecretRereads = "SecretRereads"
	// MetricSecretRotations counts re-reads that found new secrets.
	MetricSecretRotations = "SecretRotations"
)

// DefaultRefreshCooldown is the least time between two re-reads of the
// secrets by one webhook instance: requests signed with a key the instance
// does not hold (someone else's, or an attacker's) cost SSM at most one call
// per instance per cooldown.
const DefaultRefreshCooldown = 10 * time.Second

// refreshTimeout bounds one re-read: it happens while LINE waits for the
// webhook's answer.
const refreshTimeout = 500 * time.Millisecond

// keyring is the secrets a Handler verifies with, and which read put them
// there (0 for those it was built with).
type keyring struct {
	verifier *signature.Verifier
	secrets  [][]byte
	gen      uint64
}

// refresher re-reads the channel secrets when a well-formed signature does
// not verify, so that a rotation (LINE invalidates the old secret the moment
// it issues a new one) refuses nothing once the new secret is in SSM. At
// most one read runs at a time, and one starts at most once per cooldown;
// requests that fail while a read runs wait for it and are checked again.
type refresher struct {
	read     func(ctx context.Context) ([]string, error)
	cooldown time.Duration
	now      func() time.Time

	mu      sync.Mutex
	last    time.Time     // when the last read started
	running chan struct{} // closed when the read in flight ends; nil when none
}

// WithSecretRefresh makes the handler re-read its secrets with read when a
// signature does not verify (read returns the current secret first, then the
// previous one), at most once per cooldown (DefaultRefreshCooldown when not
// positive), and check the request again with what it read. A read that
// fails or finds the same secrets changes nothing.
func WithSecretRefresh(read func(ctx context.Context) ([]string, error), cooldown time.Duration) Option {
	return func(h *Handler) {
		if cooldown <= 0 {
			cooldown = DefaultRefreshCooldown
		}
		h.refresh = &refresher{read: read, cooldown: cooldown}
	}
}

// verify checks sig against the channel's current secrets and, when it
// does not verify but is well formed, against what a re-read of them
// finds. A body signed with another channel's secret never verifies: each
// channel is checked against its own secrets only.
func (h *Handler) verify(ctx context.Context, c *webhookChannel, body []byte, sig string) bool {
	k := c.keys.Load()
	if k.verifier.Verify(body, sig) {
		return true
	}
	if c.refresh == nil || !signature.WellFormed(sig) {
		return false
	}
	if !h.reread(ctx, c, k.gen) {
		return false
	}
	return c.keys.Load().verifier.Verify(body, sig)
}

// reread brings the channel's secrets up to date for a request that failed
// against generation seen, and reports whether there is anything new to
// check against: a read ended since, or this call's own read found new
// secrets.
func (h *Handler) reread(ctx context.Context, c *webhookChannel, seen uint64) bool {
	r := c.refresh
	r.mu.Lock()
	if c.keys.Load().gen != seen { // another request's read changed them meanwhile
		r.mu.Unlock()
		return true
	}
	if running := r.running; running != nil {
		r.mu.Unlock()
		select {
		case <-running:
		case <-ctx.Done():
			return false
		}
		return c.keys.Load().gen != seen
	}
	now := r.clock()
	if !r.last.IsZero() && now.Sub(r.last) < r.cooldown {
		r.mu.Unlock()
		return false
	}
	r.last = now
	running := make(chan struct{})
	r.running = running
	r.mu.Unlock()

	changed := h.readSecrets(ctx, c)

	r.mu.Lock()
	r.running = nil
	close(running)
	r.mu.Unlock()
	return changed
}

// readSecrets makes one read of the channel's secrets and installs what it
// found when it differs from the secrets held; it reports whether it did.
func (h *Handler) readSecrets(ctx context.Context, c *webhookChannel) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), refreshTimeout)
	defer cancel()
	h.metrics.Count(MetricSecretRereads, 1)
	vals, err := c.refresh.read(ctx)
	if err == nil && len(nonEmpty(vals)) == 0 {
		err = errors.New("the re-read returned no secret")
	}
	if err != nil {
		// The error may name a parameter, never a value (secrets.Resolve).
		h.log.WarnContext(ctx, "channel secret re-read failed; keeping the secrets held", append(c.logAttrs(), "error", err.Error())...)
		return false
	}
	old := c.keys.Load()
	fresh := nonEmpty(vals)
	if slices.EqualFunc(fresh, old.secrets, func(a, b []byte) bool { return string(a) == string(b) }) {
		h.log.InfoContext(ctx, "channel secret re-read after a signature mismatch: unchanged", c.logAttrs()...)
		return false
	}
	c.keys.Store(&keyring{verifier: signature.NewVerifier(fresh...), secrets: fresh, gen: old.gen + 1})
	h.metrics.Count(MetricSecretRotations, 1)
	h.log.InfoContext(ctx, "channel secret re-read after a signature mismatch: new secrets in use", append(c.logAttrs(), "secrets", len(fresh))...)
	return true
}

func (r *refresher) clock() time.Time {
	if r.now != nil {
		return r.now()
	}
	return time.Now()
}

// nonEmpty is the non-empty secrets, in order, as bytes.
func nonEmpty(vals []string) [][]byte {
	var out [][]byte
	for _, v := range vals {
		if v != "" {
			out = append(out, []byte(v))
		}
	}
	return out
}
