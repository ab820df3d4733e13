package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/linegate/linegate/internal/idempotency"
	"github.com/linegate/linegate/internal/idempotency/idempotencytest"
)

func TestMemoryConformance(t *testing.T) {
	idempotencytest.Run(t, func(t *testing.T, clock *idempotencytest.Clock) idempotency.Store {
		return idempotency.NewMemory(idempotency.WithClock(clock.Now))
	})
}

func TestMemoryValuesConformance(t *testing.T) {
	idempotencytest.RunValues(t, func(t *testing.T, clock *idempotencytest.Clock) idempotency.ValueStore {
		return idempotency.NewMemory(idempotency.WithClock(clock.Now))
	})
}

func TestMemoryVersionedConformance(t *testing.T) {
	idempotencytest.RunVersioned(t, func(t *testing.T, clock *idempotencytest.Clock) idempotency.VersionedStore {
		return idempotency.NewMemory(idempotency.WithClock(clock.Now))
	})
}

func TestMemoryAttemptsConformance(t *testing.T) {
	idempotencytest.RunAttempts(t, func(t *testing.T, clock *idempotencytest.Clock) idempotency.VersionedStore {
		return idempotency.NewMemory(idempotency.WithClock(clock.Now))
	})
}

func TestMemoryPurgesExpiredEntries(t *testing.T) {
	clock := idempotencytest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	m := idempotency.NewMemory(idempotency.WithClock(clock.Now))
	ctx := context.Background()
	for i := range 100 {
		key := fmt.Sprint("claim-", i)
		if err := m.Claim(ctx, key, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Claim(ctx, "done", time.Second); err != nil {
		t.Fatal(err)
	}
	if err := m.Complete(ctx, "done", time.Hour); err != nil {
		t.Fatal(err)
	}
	if got := m.Len(); got != 101 {
		t.Fatalf("Len = %d; want 101", got)
	}
	clock.Advance(2 * time.Minute)
	if err := m.Claim(ctx, "fresh", time.Second); err != nil {
		t.Fatal(err)
	}
	// 100 expired claims purged; the unexpired completed marker and the
	// fresh claim remain.
	if got := m.Len(); got != 2 {
		t.Fatalf("Len after expiry = %d; want 2", got)
	}
	if err := m.Claim(ctx, "done", time.Second); !errors.Is(err, idempotency.ErrCompleted) {
		t.Fatalf("claim of completed key = %v; want ErrCompleted", err)
	}
}

func TestMemoryCompletesAnExpiredButPresentClaim(t *testing.T) {
	clock := idempotencytest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	m := idempotency.NewMemory(idempotency.WithClock(clock.Now))
	ctx := context.Background()
	if err := m.Claim(ctx, "k", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	clock.Advance(20 * time.Second) // expired, not yet swept
	if err := m.Complete(ctx, "k", time.Hour); err != nil {
		t.Fatalf("complete of an expired claim = %v; want nil (the effect happened)", err)
	}
	if err := m.Claim(ctx, "k", time.Second); !errors.Is(err, idempotency.ErrCompleted) {
		t.Fatalf("claim = %v; want ErrCompleted", err)
	}
}
