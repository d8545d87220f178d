package ringnodes

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/ringside/ringside/internal/proc"
)

// BareRing runs a bare token ring of n tokenring processes on loopback —
// one 8-byte token forwarded around, no election logic — and returns the
// round-trip times of rounds trips: the physical limit of one hop between
// processes on this host, to set a ring election's hops against. Like the
// local ringnode ring, processes get one P each when there are more of
// them than cores. Each trip starts gap after the last came back: 0 keeps
// the ring busy (hot); a pause lets every process fall idle between
// trips, as a ring between elections is. warm untimed trips go round
// between each pause and its timed trip: with one, the timed trip meets
// the ring as an election's ELECTED round does. Every process runs with
// timer slack slack (0: as inherited) and its runtime monitor kept awake
// or not (tokenring --monitor-awake), as the servers it stands beside.
func BareRing(ctx context.Context, n, rounds int, gap time.Duration, warm int, slack time.Duration, monitorAwake bool) ([]time.Duration, error) {
	if n < 2 || rounds < 1 || warm < 0 {
		return nil, fmt.Errorf("bare ring: n=%d rounds=%d warm=%d, want n ≥ 2, rounds ≥ 1 and warm ≥ 0", n, rounds, warm)
	}
	bin, err := findBinary(ctx, "tokenring", "RINGSIDE_TOKENRING")
	if err != nil {
		return nil, err
	}
	// Each process gets its listener open (fd 3): ports picked free and
	// handed over by number could be taken in between — by another
	// process's outgoing connection, say — and a relay that cannot listen
	// leaves the origin waiting for a predecessor that never comes.
	addrs := make([]string, n)
	files := make([]*os.File, n)
	defer func() {
		for _, f := range files {
			if f != nil {
				f.Close()
			}
		}
	}()
	for i := range addrs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("bare ring: %w", err)
		}
		addrs[i] = ln.Addr().String()
		files[i], err = ln.(*net.TCPListener).File()
		ln.Close() // the file is a duplicate: the socket stays open
		if err != nil {
			return nil, fmt.Errorf("bare ring: %w", err)
		}
	}
	var procs []*proc.Proc
	defer func() {
		for _, p := range procs {
			p.Kill()
		}
	}()
	var out, errb bytes.Buffer
	for i := n - 1; i >= 0; i-- { // the origin last, when every relay listens
		args := []string{"--listen-fd", "3", "--next", addrs[(i+1)%n], "--timer-slack", slack.String(), "--monitor-awake=" + strconv.FormatBool(monitorAwake)}
		cmd := exec.Command(bin, args...)
		cmd.ExtraFiles = []*os.File{files[i]}
		if i == 0 {
			cmd.Args = append(cmd.Args, "--rounds", strconv.Itoa(rounds), "--gap", gap.String(), "--warm", strconv.Itoa(warm))
			cmd.Stdout, cmd.Stderr = &out, &errb
		}
		if n > runtime.NumCPU() { // as StartLocal's servers
			cmd.Env = proc.OneProcessor(os.Environ())
		}
		p, err := proc.Start(cmd, nil)
		if err != nil {
			return nil, err
		}
		procs = append(procs, p)
	}
	origin := procs[len(procs)-1]
	select {
	case <-origin.Done():
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(time.Minute):
		return nil, fmt.Errorf("bare ring of %d: no result within a minute", n)
	}
	if err := origin.Err(); err != nil {
		return nil, fmt.Errorf("bare ring of %d: %w: %s", n, err, strings.TrimSpace(errb.String()))
	}
	var rtts []time.Duration
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		ns, err := strconv.ParseInt(sc.Text(), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("bare ring: origin printed %q", sc.Text())
		}
		rtts = append(rtts, time.Duration(ns))
	}
	if len(rtts) != rounds {
		return nil, fmt.Errorf("bare ring: %d of %d rounds reported", len(rtts), rounds)
	}
	return rtts, nil
}
