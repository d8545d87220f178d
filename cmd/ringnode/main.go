// Command ringnode is a key-value server that is a member of a ring —
// Chang–Roberts' by default, or any registered election — and, when
// elected, its coordinator. See ring/server.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/ringside/ringside/internal/envflag"
	"github.com/ringside/ringside/internal/serve"
	"github.com/ringside/ringside/internal/timerslack"
	"github.com/ringside/ringside/ring"
	"github.com/ringside/ringside/ring/server"
	"github.com/ringside/ringside/ring/transport"
)

func main() {
	env := os.Environ() // as it starts: reading the secret unsets it
	serve.Main("ringnode", func(ctx context.Context, args []string) error {
		return run(ctx, args, func(d time.Duration, monitorAwake bool) error {
			if monitorAwake {
				return timerslack.Apply(d, timerslack.WithMonitorAwake(env))
			}
			return timerslack.Apply(d, env)
		})
	})
}

// run starts the server; tune gives this process its timer slack and
// keeps its runtime monitor awake or not (timerslack.Apply, which
// executes the program again: tests pass their own).
func run(ctx context.Context, args []string, tune func(slack time.Duration, monitorAwake bool) error) error {
	fs := envflag.New(flag.NewFlagSet("ringnode", flag.ContinueOnError))
	var cfg server.Config
	var join, level string
	var cacheMiB int
	fs.StringVar(&cfg.Addr, "addr", "RINGNODE_ADDR", "127.0.0.1:7000", "advertised ip:port (identity: UID = MD5 of it); host \"auto\" picks this machine's first non-loopback IPv4")
	fs.StringVar(&cfg.Listen, "listen", "RINGNODE_LISTEN", "", "bind address (default: addr)")
	fs.StringVar(&join, "join", "RINGNODE_JOIN", "", "comma-separated seed servers; none reachable → start a new ring")
	fs.SecretVar(&cfg.Secret, "secret", "RINGNODE_SECRET", "cluster secret, the same on every server (required, ≥ 16 characters; prefer the environment to the command line)")
	fs.StringVar(&cfg.Dir, "data", "RINGNODE_DATA", "data", "data directory")
	fs.IntVar(&cfg.Replicas, "replicas", "RINGNODE_REPLICAS", 2, "successors that hold a copy of each key (R)")
	fs.IntVar(&cacheMiB, "cache-mib", "RINGNODE_CACHE_MIB", 64, "memory for recently used values, in MiB (0: no cache)")
	fs.StringVar(&cfg.Fsync, "fsync", "RINGNODE_FSYNC", "never", "when writes reach the disk: never (the OS decides; survives a process crash, not a power cut), interval (every 100 ms) or always (before each write is acknowledged)")
	fs.DurationVar(&cfg.SuspectTimeout, "suspect", "RINGNODE_SUSPECT", 700*time.Millisecond, "no heartbeat from the coordinator for this long starts an election")
	fs.DurationVar(&cfg.SuspectJitter, "suspect-jitter", "RINGNODE_SUSPECT_JITTER", 0, "random extra suspicion timeout, up to this")
	fs.DurationVar(&cfg.HeartbeatInterval, "heartbeat", "RINGNODE_HEARTBEAT", 100*time.Millisecond, "coordinator heartbeat interval")
	fs.DurationVar(&cfg.HopBound, "hop-bound", "RINGNODE_HOP_BOUND", 10*time.Millisecond, "per-hop bound; an election that outlives its horizon (Chang–Roberts: 2·n hops) of bounds restarts")
	fs.DurationVar(&cfg.AckTimeout, "ack-timeout", "RINGNODE_ACK_TIMEOUT", 10*time.Millisecond,
		"per-hop acknowledgement: an election or elected message not acknowledged this long is sent again (3 times, then its target is skipped); 0: off, Chang–Roberts as published")
	fs.DurationVar(&cfg.JoinTimeout, "join-timeout", "RINGNODE_JOIN_TIMEOUT", 5*time.Second, "give up joining after this long")
	fs.StringVar(&cfg.Election, "election", "RINGNODE_ELECTION", ring.ChangRoberts,
		"election algorithm, the same on every server of the ring: "+strings.Join(ring.AlgorithmNames(), ", "))
	fs.BoolVar(&cfg.CrashOnElection, "fault-crash-on-election", "RINGNODE_FAULT_CRASH_ON_ELECTION", false, "fault injection: exit as soon as an ELECTION message arrives (it is lost with this server)")
	fs.StringVar(&level, "log-level", "RINGNODE_LOG", "info", "debug, info, warn or error")
	var slack time.Duration
	fs.DurationVar(&slack, "timer-slack", "RINGNODE_TIMER_SLACK", time.Millisecond,
		"how late the kernel may end this process's timed sleeps (0: as inherited; at most "+timerslack.Max.String()+"): a busy server's Go runtime monitor then sleeps 20 µs plus this between its rounds, not 20 µs plus the kernel's default 50 µs — see docs/ringnode.md")
	fs.DurationVar(&cfg.SpinRead, "spin-read", "RINGNODE_SPIN_READ", 0,
		"how long the connection an ELECTION came on is polled for the round's ELECTED before its reader sleeps (0: never; at most "+transport.MaxSpin.String()+"): the round's hops then pay no wake-up, for CPU spent while they wait — see docs/ringnode.md")
	var monitorAwake bool
	fs.BoolVar(&monitorAwake, "monitor-awake", "RINGNODE_MONITOR_AWAKE", true,
		"keep the Go runtime's monitor out of its deep sleep (GODEBUG schedtrace), so the first read of a frame after idling wakes no monitor — see docs/ringnode.md")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := timerslack.Check(slack); err != nil {
		return fmt.Errorf("timer-slack %w", err)
	}
	log, err := serve.Logger(level)
	if err != nil {
		return err
	}
	if host, port, err := net.SplitHostPort(cfg.Addr); err == nil && host == "auto" {
		ip, err := firstIPv4()
		if err != nil {
			return fmt.Errorf("addr auto: %w", err)
		}
		cfg.Addr = net.JoinHostPort(ip, port)
		if cfg.Listen == "" {
			cfg.Listen = ":" + port
		}
	}
	if cacheMiB < 0 || cacheMiB > 1<<20 {
		return fmt.Errorf("cache-mib %d: want 0 (no cache) to %d", cacheMiB, 1<<20)
	}
	cfg.CacheBytes = int64(cacheMiB) << 20
	if join != "" {
		cfg.Join = strings.Split(join, ",")
	}
	cfg.Log = log
	if err := tune(slack, monitorAwake); err != nil {
		log.Warn("running with the inherited timer slack and runtime settings", "err", err)
	}
	s, err := server.New(cfg)
	if err != nil {
		return err
	}
	log.Info("ringnode starting", "addr", cfg.Addr, "join", cfg.Join, "data", cfg.Dir, "election", cfg.Election)
	return s.Run(ctx)
}

func firstIPv4() (string, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", err
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String(), nil
		}
	}
	return "", fmt.Errorf("no non-loopback IPv4 address")
}
