// Package fdtest runs a daemon under a low limit on open files and floods
// it with connections, for the tests that prove a ringside server outlives
// running out of file descriptors: it keeps its process, and serves again
// once the flood is gone.
//
// The daemon is the command's own test binary, started again with
// ChildEnv set: its TestMain calls RunChild, which runs the command's
// main instead of the tests, so no binary is built for the test.
package fdtest

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/ringside/ringside/internal/freeport"
	"github.com/ringside/ringside/internal/proc"
)

// ChildEnv marks the test binary's second run as the daemon.
const ChildEnv = "RINGSIDE_FDTEST_CHILD"

// RunChild runs main, then exits, when this process is a daemon Start
// started; otherwise it returns at once.
func RunChild(main func()) {
	if os.Getenv(ChildEnv) == "1" {
		main()
		os.Exit(0)
	}
}

// Start runs this test binary as the daemon with args and the extra
// environment env, under `ulimit -n limit` (soft and hard: Go cannot
// raise it), its output in the test's log on failure. The daemon is
// killed when the test ends.
func Start(t *testing.T, limit int, env []string, args ...string) *proc.Proc {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", append([]string{"-c", `ulimit -n "$0" && exec "$@"`, strconv.Itoa(limit), self}, args...)...)
	cmd.Env = append(append(os.Environ(), ChildEnv+"=1"), env...)
	out, err := os.CreateTemp(t.TempDir(), "daemon-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	p, err := proc.Start(cmd, func() { out.Close() })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill()
		<-p.Done()
		if t.Failed() {
			b, _ := os.ReadFile(out.Name())
			t.Logf("daemon output:\n%s", b)
		}
	})
	return p
}

// FreeAddr is a loopback address no one listened on a moment ago.
func FreeAddr(t *testing.T) string {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// Survives checks that the daemon p, started with Start(limit), once url
// answers 200, goes on living while connections to every address in addrs
// are opened and held — twice as many per address as it may have files
// open — and that url answers 200 again once they are closed.
func Survives(t *testing.T, p *proc.Proc, limit int, url string, addrs ...string) {
	t.Helper()
	if err := healthy(p, url, time.Minute); err != nil {
		t.Fatalf("before the flood: %v", err)
	}
	flood := 2 * limit
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for _, a := range addrs {
		for range flood {
			// Past the listen backlog the kernel stops completing
			// handshakes: a dial that times out is part of the flood.
			c, err := net.DialTimeout("tcp", a, 200*time.Millisecond)
			if err == nil {
				held = append(held, c)
			}
			if p.Exited() {
				t.Fatalf("the daemon exited during the flood of %s: %v", a, p.Err())
			}
		}
	}
	// A dial may time out on a loaded machine too; the flood needs only
	// more connections than the daemon may have files open, so that its
	// accepts hit EMFILE.
	if len(held) <= limit {
		t.Fatalf("only %d of %d flood connections were made: no more than the daemon's %d files", len(held), flood*len(addrs), limit)
	}
	// The daemon holds at least half its files in flood connections (its
	// bound per listener, accept.MaxConns) before the flood ends.
	if err := filesAtLeast(p, limit/2, time.Minute); err != nil {
		t.Fatalf("under the flood: %v", err)
	}
	for _, c := range held {
		c.Close()
	}
	held = nil
	if err := healthy(p, url, time.Minute); err != nil {
		t.Fatalf("after the flood: %v", err)
	}
}

// healthy polls url until it answers 200 or within has passed.
func healthy(p *proc.Proc, url string, within time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(within)
	var last error
	for time.Now().Before(deadline) {
		if p.Exited() {
			return fmt.Errorf("the daemon exited: %v", p.Err())
		}
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		last = err
		select {
		case <-p.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	return errors.Join(fmt.Errorf("%s did not answer 200 within %s", url, within), last)
}

// filesAtLeast waits until the daemon has n files open.
func filesAtLeast(p *proc.Proc, n int, within time.Duration) error {
	deadline := time.Now().Add(within)
	have := 0
	for time.Now().Before(deadline) {
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.Pid()))
		if err != nil {
			return fmt.Errorf("the daemon's files: %w", err)
		}
		if have = len(fds); have >= n {
			return nil
		}
		select {
		case <-p.Done():
			return fmt.Errorf("the daemon exited: %v", p.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("the daemon holds %d files, not %d, after %s", have, n, within)
}

// Check starts the daemon under `ulimit -n 64` with the arguments args
// builds from as many fresh loopback addresses as it asks for (its
// listeners), and runs Survives against all of them; health is the path
// on the last address (a daemon's admin port, where it has one) that
// must answer 200.
func Check(t *testing.T, env []string, listeners int, health string, args func(addrs []string) []string) {
	t.Helper()
	const limit = 64
	addrs := make([]string, listeners)
	for i := range addrs {
		addrs[i] = FreeAddr(t)
	}
	p := Start(t, limit, env, args(addrs)...)
	Survives(t, p, limit, "http://"+addrs[len(addrs)-1]+health, addrs...)
}
