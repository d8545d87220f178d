// Package klogtest checks where a command sends what client-go logs
// through klog.
package klogtest

import (
	"io"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"
)

// Lines klog is given after setup: one at info, one at error level.
const (
	Info  = "klogtest: an info line"
	Error = "klogtest: an error line"
)

// Stderr runs setup (a command's run, which is expected to set up its
// logging and may then fail) with stderr sent to a pipe, logs Info and
// Error through klog, and returns all that reached stderr.
func Stderr(t *testing.T, setup func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	stderr := os.Stderr
	os.Stderr = w
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(r)
		got <- b
	}()
	func() {
		defer func() { os.Stderr = stderr }()
		setup()
		klog.Info(Info)
		klog.Error(Error)
		klog.Flush()
	}()
	w.Close()
	return string(<-got)
}
