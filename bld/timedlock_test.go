package bld

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	clocktesting "k8s.io/utils/clock/testing"
)

// slowLock is a lock whose requests take a fixed time on a fake clock.
type slowLock struct {
	resourcelock.Interface
	clock *clocktesting.FakeClock
	took  map[string]time.Duration
	err   error
}

func (l slowLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	l.clock.Step(l.took["get"])
	return &resourcelock.LeaderElectionRecord{HolderIdentity: "other"}, []byte("raw"), nil
}

func (l slowLock) Create(context.Context, resourcelock.LeaderElectionRecord) error {
	l.clock.Step(l.took["create"])
	return l.err
}

func (l slowLock) Update(context.Context, resourcelock.LeaderElectionRecord) error {
	l.clock.Step(l.took["update"])
	return nil
}

// Each request is logged with its own duration and error, and what the
// lock answered passes through unchanged.
func TestTimedLockLogsEachRequestsDuration(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Now())
	refused := errors.New("already exists")
	inner := slowLock{clock: fc, err: refused, took: map[string]time.Duration{"get": 7 * time.Millisecond, "create": 250 * time.Millisecond, "update": 3 * time.Millisecond}}
	var buf bytes.Buffer
	l := timedLock{inner, slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), fc}

	rec, raw, err := l.Get(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "other", rec.HolderIdentity)
	assert.Equal(t, "raw", string(raw))
	assert.ErrorIs(t, l.Create(context.Background(), resourcelock.LeaderElectionRecord{}), refused)
	assert.NoError(t, l.Update(context.Background(), resourcelock.LeaderElectionRecord{}))

	var logged []map[string]any
	dec := json.NewDecoder(&buf)
	for dec.More() {
		var m map[string]any
		require.NoError(t, dec.Decode(&m))
		logged = append(logged, m)
	}
	require.Len(t, logged, 3)
	for i, op := range []string{"get", "create", "update"} {
		assert.Equal(t, "lock request", logged[i]["msg"])
		assert.Equal(t, op, logged[i]["op"])
		assert.EqualValues(t, inner.took[op], logged[i]["took"], op) // slog's JSON writes a duration in ns
	}
	assert.Equal(t, refused.Error(), logged[1]["err"])
	assert.Nil(t, logged[0]["err"])
}
