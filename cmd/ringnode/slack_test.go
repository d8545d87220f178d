package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ringside/ringside/internal/fdtest"
	"github.com/ringside/ringside/internal/timerslack"
)

// Every thread of a running ringnode has the slack it was given — the
// runtime's monitor, started before main, included — and 0 leaves each
// with what the process inherited.
func TestEveryThreadHasTheTimerSlack(t *testing.T) {
	own, err := timerslack.Get() // what a child inherits
	require.NoError(t, err)
	for _, c := range []struct{ flag, want string }{{"700us", "700000"}, {"0", strconv.FormatInt(own.Nanoseconds(), 10)}} {
		t.Run(c.flag, func(t *testing.T) {
			addr := fdtest.FreeAddr(t)
			p := fdtest.Start(t, 1024, []string{"RINGNODE_SECRET=0123456789abcdef"},
				"--addr", addr, "--data", t.TempDir(), "--log-level", "error", "--timer-slack", c.flag)
			require.Eventually(t, func() bool {
				r, err := http.Get("http://" + addr + "/healthz")
				if err == nil {
					r.Body.Close()
				}
				return err == nil && r.StatusCode == http.StatusOK
			}, 30*time.Second, 20*time.Millisecond, "ringnode never served")
			tasks, err := os.ReadDir("/proc/" + strconv.Itoa(p.Pid()) + "/task")
			require.NoError(t, err)
			require.Greater(t, len(tasks), 2, "a Go server runs several threads")
			comm, err := os.ReadFile("/proc/" + strconv.Itoa(p.Pid()) + "/comm")
			require.NoError(t, err)
			self, err := os.Executable()
			require.NoError(t, err)
			name := filepath.Base(self) // the kernel keeps its first 15 bytes
			assert.Equal(t, name[:min(15, len(name))], strings.TrimSpace(string(comm)), "named after its program, as before")
			for _, task := range tasks {
				f := "/proc/" + task.Name() + "/timerslack_ns" // a thread's own, by its id
				b, err := os.ReadFile(f)
				require.NoError(t, err)
				assert.Equal(t, c.want, strings.TrimSpace(string(b)), f)
			}
		})
	}
}
