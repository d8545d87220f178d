package bld

import (
	"context"
	"log/slog"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
)

// timedLock logs how long each of the lock's requests took, at debug
// level: the default algorithm runs client-go's elector, which times
// nothing, and its first read is what bld-optimistic's first list is
// compared with (`--elector-logs`; ringside's own elector logs its
// acquisition attempts' phases instead).
type timedLock struct {
	resourcelock.Interface
	log   *slog.Logger
	clock clock.PassiveClock
}

func (l timedLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	start := l.clock.Now()
	rec, raw, err := l.Interface.Get(ctx)
	l.took("get", start, "err", err)
	return rec, raw, err
}

func (l timedLock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	start := l.clock.Now()
	err := l.Interface.Create(ctx, rec)
	l.took("create", start, "err", err)
	return err
}

func (l timedLock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	start := l.clock.Now()
	err := l.Interface.Update(ctx, rec)
	l.took("update", start, "err", err)
	return err
}

func (l timedLock) took(op string, start time.Time, attrs ...any) {
	// Renewals call this every retry period for the life of the leader:
	// build nothing when debug is off.
	if !l.log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	l.log.Debug("lock request", append([]any{"op", op, "took", l.clock.Since(start)}, attrs...)...)
}
