package otelxray

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"io"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// IDGenerator mints X-Ray-compatible ids for the OpenTelemetry SDK
// (sdktrace.IDGenerator): a trace id's first 4 bytes are the trace's start
// in Unix epoch seconds (big-endian) and the other 12 random, so its X-Ray
// form is "1-" + 8 hex digits of epoch seconds + "-" + 24 hex digits
// (https://docs.aws.amazon.com/xray/latest/devguide/xray-services-elb.html,
// "X-Ray trace ID format"). X-Ray refuses trace ids whose time is more than
// 30 days old, so a random W3C id would be dropped. Span ids are 8 random
// bytes. Ids are never all zeros (OpenTelemetry's invalid id). Safe for
// concurrent use.
type IDGenerator struct {
	now func() time.Time
	mu  sync.Mutex // guards random, which need not be safe for concurrent use
	rnd io.Reader
}

// NewIDGenerator returns a generator reading the time from now and
// randomness from random; nil arguments mean time.Now and crypto/rand.
func NewIDGenerator(now func() time.Time, random io.Reader) *IDGenerator {
	if now == nil {
		now = time.Now
	}
	if random == nil {
		random = rand.Reader
	}
	return &IDGenerator{now: now, rnd: random}
}

// NewIDs returns a new trace id and the id of its first span.
func (g *IDGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	var tid trace.TraceID
	binary.BigEndian.PutUint32(tid[:4], uint32(g.now().Unix()))
	for {
		g.read(tid[4:])
		if [12]byte(tid[4:]) != ([12]byte{}) {
			break
		}
	}
	return tid, g.NewSpanID(ctx, tid)
}

// NewSpanID returns a new span id.
func (g *IDGenerator) NewSpanID(context.Context, trace.TraceID) trace.SpanID {
	var sid trace.SpanID
	for !sid.IsValid() {
		g.read(sid[:])
	}
	return sid
}

func (g *IDGenerator) read(b []byte) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, err := io.ReadFull(g.rnd, b); err != nil {
		// crypto/rand does not fail on supported platforms; a test reader
		// that runs out falls back to it rather than minting zeros.
		_, _ = rand.Read(b)
	}
}
