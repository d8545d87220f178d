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
// with what the process inherited; the runtime it runs on keeps its
// monitor awake (GODEBUG schedtrace) unless --monitor-awake=false, and
// anyone's own GODEBUG settings stay.
func TestEveryThreadHasTheTimerSlack(t *testing.T) {
	own, err := timerslack.Get() // what a child inherits
	require.NoError(t, err)
	t.Setenv("GODEBUG", "madvdontneed=1") // the children's, through the environment
	for _, c := range []struct{ flag, awake, want, godebug string }{
		{"700us", "true", "700000", "GODEBUG=madvdontneed=1,schedtrace=2147483647"},
		{"0", "false", strconv.FormatInt(own.Nanoseconds(), 10), "GODEBUG=madvdontneed=1"},
		{"0", "true", strconv.FormatInt(own.Nanoseconds(), 10), "GODEBUG=madvdontneed=1,schedtrace=2147483647"},
	} {
		t.Run(c.flag+" "+c.awake, func(t *testing.T) {
			addr := fdtest.FreeAddr(t)
			p := fdtest.Start(t, 1024, []string{"RINGNODE_SECRET=0123456789abcdef"},
				"--addr", addr, "--data", t.TempDir(), "--log-level", "error", "--timer-slack", c.flag, "--monitor-awake="+c.awake)
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
			environ, err := os.ReadFile("/proc/" + strconv.Itoa(p.Pid()) + "/environ")
			require.NoError(t, err)
			assert.Contains(t, strings.Split(string(environ), "\x00"), c.godebug)
			for _, task := range tasks {
				f := "/proc/" + task.Name() + "/timerslack_ns" // a thread's own, by its id
				b, err := os.ReadFile(f)
				require.NoError(t, err)
				assert.Equal(t, c.want, strings.TrimSpace(string(b)), f)
			}
		})
	}
}
