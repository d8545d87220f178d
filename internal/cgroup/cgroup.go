// Package cgroup gives a set of processes a CPU limit of its own and
// measures what they use: the throughput experiments run their "nodes"
// this way, each a share of the machine's CPU (CFS bandwidth).
// It speaks cgroup v1 (this machine: cpu and cpuacct hierarchies) and v2
// (cpu.max, cpu.stat), and needs write access to /sys/fs/cgroup (root).
package cgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Root is where the cgroup file systems are mounted.
var Root = "/sys/fs/cgroup"

const period = 100_000 // µs, the kernel's default CFS period

// StallNote says, for a report, what the period does to latency: a
// limit is a share of each period, not a slower CPU.
const StallNote = "A node's limit is CFS bandwidth over the kernel's 100-ms period: a node that has used its share " +
	"stalls until the next period (up to 50 ms at 0.5 CPU), where a slower machine would not, and the p99 column shows it."

// Group is a cgroup (one per hierarchy on v1) with a CPU limit.
type Group struct {
	v2   bool
	dirs []string // v1: cpu then cpuacct; v2: one
}

// New creates the group name (a path below the root, say
// "ringside/run1/node-1") limited to cpus CPUs.
func New(name string, cpus float64) (*Group, error) {
	if !(cpus > 0) || cpus > 1024 {
		return nil, fmt.Errorf("cgroup %s: cpu limit %v: want (0, 1024]", name, cpus)
	}
	if strings.Contains(name, "..") || filepath.IsAbs(name) {
		return nil, fmt.Errorf("cgroup %q: want a relative name without ..", name)
	}
	quota := strconv.Itoa(int(cpus * period))
	g := &Group{}
	if _, err := os.Stat(filepath.Join(Root, "cgroup.controllers")); err == nil {
		g.v2 = true
		dir := filepath.Join(Root, name)
		if err := enableCPU(dir); err != nil {
			return nil, err
		}
		g.dirs = []string{dir}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("cgroup: %w", err)
		}
		return g, write(dir, "cpu.max", quota+" "+strconv.Itoa(period))
	}
	for _, h := range []string{"cpu", "cpuacct"} {
		dir := filepath.Join(Root, h, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("cgroup (v1 %s): %w", h, err)
		}
		g.dirs = append(g.dirs, dir)
	}
	if err := write(g.dirs[0], "cpu.cfs_period_us", strconv.Itoa(period)); err != nil {
		return nil, err
	}
	return g, write(g.dirs[0], "cpu.cfs_quota_us", quota)
}

// enableCPU turns the cpu controller on for the children of every
// ancestor of dir below the root (v2 delegates controllers top down).
func enableCPU(dir string) error {
	rel, err := filepath.Rel(Root, filepath.Dir(dir))
	if err != nil {
		return err
	}
	cur := Root
	for _, part := range append([]string{""}, strings.Split(rel, string(filepath.Separator))...) {
		if part != "" && part != "." {
			cur = filepath.Join(cur, part)
			if err := os.MkdirAll(cur, 0o755); err != nil {
				return fmt.Errorf("cgroup: %w", err)
			}
		}
		if err := write(cur, "cgroup.subtree_control", "+cpu"); err != nil {
			return err
		}
	}
	return nil
}

func write(dir, file, val string) error {
	if err := os.WriteFile(filepath.Join(dir, file), []byte(val), 0o644); err != nil {
		return fmt.Errorf("cgroup: write %s to %s: %w", val, filepath.Join(dir, file), err)
	}
	return nil
}

// Add moves the process pid (with its threads) into the group.
func (g *Group) Add(pid int) error {
	for _, d := range g.dirs {
		if err := write(d, "cgroup.procs", strconv.Itoa(pid)); err != nil {
			return err
		}
	}
	return nil
}

// Usage is the CPU time the group's processes have used.
func (g *Group) Usage() (time.Duration, error) {
	if g.v2 {
		st, err := g.cpuStat()
		if err != nil {
			return 0, err
		}
		us, ok := st["usage_usec"]
		if !ok {
			return 0, errors.New("cgroup: cpu.stat has no usage_usec")
		}
		return time.Duration(us) * time.Microsecond, nil
	}
	b, err := os.ReadFile(filepath.Join(g.dirs[1], "cpuacct.usage"))
	if err != nil {
		return 0, err
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return time.Duration(ns), err
}

// Throttling is the kernel's account of the limit: the CFS periods in
// which the group was runnable, and those in which it ran out of quota.
type Throttling struct {
	Periods, Throttled int64
}

// Throttling reads the group's cpu.stat.
func (g *Group) Throttling() (Throttling, error) {
	st, err := g.cpuStat()
	if err != nil {
		return Throttling{}, err
	}
	p, ok1 := st["nr_periods"]
	t, ok2 := st["nr_throttled"]
	if !ok1 || !ok2 {
		return Throttling{}, errors.New("cgroup: cpu.stat has no nr_periods or nr_throttled")
	}
	return Throttling{Periods: p, Throttled: t}, nil
}

// cpuStat is the cpu controller's cpu.stat (v1: in the cpu hierarchy).
func (g *Group) cpuStat() (map[string]int64, error) {
	b, err := os.ReadFile(filepath.Join(g.dirs[0], "cpu.stat"))
	if err != nil {
		return nil, err
	}
	st := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 {
			v, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("cgroup: cpu.stat %s: %w", f[0], err)
			}
			st[f[0]] = v
		}
	}
	return st, nil
}

// Remove deletes the group; its processes must have exited (or moved).
func (g *Group) Remove() error {
	var errs []error
	for _, d := range g.dirs {
		if err := os.Remove(d); err != nil && !os.IsNotExist(err) {
			errs = append(errs, fmt.Errorf("cgroup: %w", err))
		}
	}
	return errors.Join(errs...)
}

// RemoveEmpty removes the group directory name (in every hierarchy) if
// nothing is left in it: the parent of groups made with New.
func RemoveEmpty(name string) {
	if strings.Contains(name, "..") || filepath.IsAbs(name) {
		return
	}
	for _, h := range []string{"", "cpu", "cpuacct"} {
		os.Remove(filepath.Join(Root, h, name))
	}
}
