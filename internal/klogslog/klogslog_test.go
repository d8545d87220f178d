package klogslog

import (
	"bytes"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"
)

func TestMain(m *testing.M) {
	Install()
	os.Exit(m.Run())
}

func newLogger(w *bytes.Buffer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})).With("cmd", "x")
}

// klog's lines reach the logger Use last named, with that logger's
// attributes, the values a contextual logger added, at its level — and
// swapping the logger while goroutines log through klog is no race.
func TestKlogWritesThroughTheLastLogger(t *testing.T) {
	// Each buffer is read only once the goroutines writing it are done.
	var first, second bytes.Buffer
	Use(newLogger(&first, slog.LevelInfo))
	klog.Error("to the first")
	klog.FromContext(t.Context()).WithValues("k", "v").WithName("n").Info("with values")

	stop := make(chan struct{})
	var logged atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // a client-go informer left running by an earlier run
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				klog.V(0).Info("meanwhile")
				logged.Add(1)
			}
		}
	}()
	require.Eventually(t, func() bool { return logged.Load() > 0 }, 10*time.Second, time.Millisecond)
	Use(newLogger(&second, slog.LevelWarn))
	after := logged.Load()
	require.Eventually(t, func() bool { return logged.Load() > after+1 }, 10*time.Second, time.Millisecond, "logging beside the swap")
	close(stop)
	wg.Wait()
	klog.Info("below the second's level")
	klog.Error("to the second")

	assert.Contains(t, first.String(), `level=ERROR msg="to the first" cmd=x`)
	assert.Contains(t, first.String(), `msg="with values" cmd=x`)
	assert.Contains(t, first.String(), `k=v`)
	assert.NotContains(t, first.String(), "to the second")
	assert.Contains(t, second.String(), `level=ERROR msg="to the second" cmd=x`)
	assert.NotContains(t, second.String(), "below the second's level")
	assert.NotContains(t, second.String(), "meanwhile", "below its level")
}
