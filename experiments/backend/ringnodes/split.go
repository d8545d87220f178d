package ringnodes

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/moby/moby/client"
)

// Split cuts the ring in two for d: the servers of group reach one another,
// the others reach one another, clients reach both, and nothing crosses
// between the two sides. Docker's networks cannot do that (a container
// leaves a network whole), so every server's own network namespace gets a
// blackhole route to each server of the other side — entered from the
// host with nsenter(1) and set with ip(8), which needs root on the
// machine that runs the Docker engine. It returns once the routes are
// gone again.
func (c *Compose) Split(ctx context.Context, group []string, d time.Duration) error {
	ids := c.snapshot()
	for _, a := range group {
		if ids[a] == "" {
			return fmt.Errorf("split: %s: no such server", a)
		}
	}
	if len(group) == 0 || len(group) == len(ids) {
		return fmt.Errorf("split: a side of %d servers of %d: both sides need one", len(group), len(ids))
	}
	pids := map[string]int{}
	for addr, id := range ids {
		ins, err := c.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		if err != nil {
			return fmt.Errorf("split: %s: %w", addr, err)
		}
		if ins.Container.State == nil || ins.Container.State.Pid == 0 {
			return fmt.Errorf("split: %s: not running", addr)
		}
		pids[addr] = ins.Container.State.Pid
	}
	// The routes are always removed, whatever happened (see Kill): a
	// cancelled split may have set some.
	heal := context.WithoutCancel(ctx)
	err := routeOtherSide(ctx, pids, group, "add")
	if err == nil {
		err = sleep(ctx, d)
	}
	if herr := routeOtherSide(heal, pids, group, "del"); herr != nil {
		return fmt.Errorf("healing the split: %w", herr)
	}
	return err
}

// routeOtherSide adds or deletes, in every server's namespace, a blackhole
// route to each server on the other side of group.
func routeOtherSide(ctx context.Context, pids map[string]int, group []string, verb string) error {
	var errs []string
	for addr, pid := range pids {
		in := slices.Contains(group, addr)
		var batch bytes.Buffer
		for other := range pids {
			if slices.Contains(group, other) == in {
				continue
			}
			ip, err := netip.ParseAddrPort(other)
			if err != nil {
				return fmt.Errorf("split: server address %q: %w", other, err)
			}
			fmt.Fprintf(&batch, "route %s blackhole %s/32\n", verb, ip.Addr())
		}
		// -force: a delete goes on past a route that is already gone.
		cmd := exec.CommandContext(ctx, "nsenter", "--target", fmt.Sprint(pid), "--net", "ip", "-force", "-batch", "-")
		cmd.Stdin = &batch
		if out, err := cmd.CombinedOutput(); err != nil && verb == "add" {
			return fmt.Errorf("split: routes in the namespace of %s (pid %d; nsenter and ip(8) as root on the Docker host): %w: %s",
				addr, pid, err, bytes.TrimSpace(out))
		} else if err != nil && !onlyMissing(out) {
			errs = append(errs, fmt.Sprintf("%s: %v: %s", addr, err, bytes.TrimSpace(out)))
		}
	}
	if len(errs) > 0 {
		slices.Sort(errs)
		return fmt.Errorf("split: removing routes: %s", strings.Join(errs, "; "))
	}
	return nil
}

// onlyMissing reports whether ip's complaints are all about routes that
// are not there (a server restarted since: its namespace is new).
func onlyMissing(out []byte) bool {
	for line := range strings.Lines(string(out)) {
		if l := strings.TrimSpace(line); l != "" && !strings.Contains(l, "No such process") && !strings.HasPrefix(l, "Command failed") {
			return false
		}
	}
	return true
}
