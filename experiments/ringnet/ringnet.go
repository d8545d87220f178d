// Package ringnet holds the ring experiments that run real ringnode
// servers: as local processes (backend local), containers (compose) or the
// Pods of a StatefulSet on a Kubernetes cluster (kubernetes, from inside
// the cluster: ringside cluster).
package ringnet

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/ringside/ringside/experiments"
	"github.com/ringside/ringside/experiments/backend/kube"
	"github.com/ringside/ringside/experiments/backend/ringnodes"
	"github.com/ringside/ringside/internal/timerslack"
	"github.com/ringside/ringside/ring/transport"
)

// Backends of the network experiments.
var backends = []string{"local", "compose", "kubernetes"}

// serverFlags are the ringnode settings every network experiment exposes.
type serverFlags struct {
	suspect, heartbeat, hopBound time.Duration
	ackTimeout                   time.Duration
	timerSlack                   time.Duration
	spinRead                     time.Duration
	monitorAwake                 bool
	replicas                     int
	fsync                        string // "": the server's default
	logLevel                     string
	election                     string // "": the server's default, Chang–Roberts
}

func (f *serverFlags) define(fs *flag.FlagSet) {
	fs.DurationVar(&f.suspect, "suspect", 700*time.Millisecond, "servers start an election after this long without a coordinator heartbeat")
	fs.DurationVar(&f.heartbeat, "heartbeat", 100*time.Millisecond, "coordinator heartbeat interval")
	fs.DurationVar(&f.hopBound, "hop-bound", 10*time.Millisecond, "per-hop bound of the election-restart timeout")
	fs.DurationVar(&f.ackTimeout, "ack-timeout", 10*time.Millisecond, "per-hop acknowledgement timeout of ELECTION and ELECTED (0: no acknowledgements, Chang–Roberts as published)")
	fs.DurationVar(&f.timerSlack, "timer-slack", time.Millisecond, "the servers' timer slack (ringnode --timer-slack; 0: as inherited)")
	fs.DurationVar(&f.spinRead, "spin-read", 0, "how long a server polls the connection an ELECTION came on for the round's ELECTED before it sleeps (ringnode --spin-read; 0: never)")
	fs.BoolVar(&f.monitorAwake, "monitor-awake", true, "keep the servers' Go runtime monitor out of its deep sleep (ringnode --monitor-awake; the bare relays' too)")
	fs.IntVar(&f.replicas, "replicas", 2, "replicas per key (R)")
	fs.StringVar(&f.logLevel, "server-log", "warn", "the servers' log level (debug, info, warn, error); kept beside the CSV when a ring does not heal")
}

// check refuses a negative timing by its flag's name before any server
// starts (a server would refuse it too, but in its own log).
func (f *serverFlags) check() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"suspect", f.suspect}, {"heartbeat", f.heartbeat}, {"hop-bound", f.hopBound}, {"ack-timeout", f.ackTimeout}, {"spin-read", f.spinRead}} {
		if d.v < 0 {
			return fmt.Errorf("--%s %v: must not be negative", d.name, d.v)
		}
	}
	if err := timerslack.Check(f.timerSlack); err != nil {
		return fmt.Errorf("--timer-slack %w", err)
	}
	if f.spinRead > transport.MaxSpin {
		return fmt.Errorf("--spin-read %v: at most %v", f.spinRead, transport.MaxSpin)
	}
	return nil
}

func (f *serverFlags) args() []string {
	args := []string{"--suspect", f.suspect.String(), "--heartbeat", f.heartbeat.String(),
		"--hop-bound", f.hopBound.String(), "--ack-timeout", f.ackTimeout.String(), "--timer-slack", f.timerSlack.String(), "--spin-read", f.spinRead.String(), "--monitor-awake=" + strconv.FormatBool(f.monitorAwake), "--replicas", fmt.Sprint(f.replicas), "--log-level", f.logLevel}
	if f.fsync != "" {
		args = append(args, "--fsync", f.fsync)
	}
	if f.election != "" {
		args = append(args, "--election", f.election)
	}
	return args
}

func (f *serverFlags) env() []string {
	env := []string{"RINGNODE_SUSPECT=" + f.suspect.String(), "RINGNODE_HEARTBEAT=" + f.heartbeat.String(),
		"RINGNODE_HOP_BOUND=" + f.hopBound.String(), "RINGNODE_ACK_TIMEOUT=" + f.ackTimeout.String(), "RINGNODE_TIMER_SLACK=" + f.timerSlack.String(), "RINGNODE_SPIN_READ=" + f.spinRead.String(), "RINGNODE_MONITOR_AWAKE=" + strconv.FormatBool(f.monitorAwake), "RINGNODE_REPLICAS=" + fmt.Sprint(f.replicas), "RINGNODE_LOG=" + f.logLevel}
	if f.fsync != "" {
		env = append(env, "RINGNODE_FSYNC="+f.fsync)
	}
	if f.election != "" {
		env = append(env, "RINGNODE_ELECTION="+f.election)
	}
	return env
}

// startRing starts n servers on the run's backend; the caller closes it.
// A ring serves keys only with R+1 servers, so a smaller ring keeps n−1
// replicas (kv-load's single server keeps none).
func startRing(ctx context.Context, env *experiments.Env, n int, flags *serverFlags) (ringnodes.Ring, error) {
	f := *flags
	if err := f.check(); err != nil {
		return nil, err
	}
	f.replicas = min(f.replicas, n-1)
	dir, err := os.MkdirTemp("", "ringside-"+env.Backend+"-")
	if err != nil {
		return nil, err
	}
	switch env.Backend {
	case "local":
		bin, err := ringnodes.FindRingnode(ctx)
		if err != nil {
			return nil, err
		}
		secret := ringnodes.NewSecret()
		r, err := ringnodes.StartLocal(ctx, n, ringnodes.Options{Bin: bin, Dir: dir, Args: f.args(), Secret: secret})
		if err != nil {
			return nil, err
		}
		return &cleanup{Ring: r, dir: dir, secret: secret}, nil
	case "compose":
		r, err := ringnodes.StartCompose(ctx, n, ringnodes.ComposeOptions{Env: f.env(), Log: env.Log})
		if err != nil {
			return nil, err
		}
		os.RemoveAll(dir)
		return r, nil
	case "kubernetes":
		os.RemoveAll(dir)
		r, err := ringnodes.StartKube(ctx, n, ringnodes.KubeOptions{Env: f.env(), Log: env.Log})
		if err != nil {
			return nil, err
		}
		if env.Cluster == nil {
			env.Cluster = kube.Describe(ctx, r.Client())
		}
		return r, nil
	}
	return nil, fmt.Errorf("backend %q", env.Backend)
}

// cleanup removes the ring's scratch directory when it closes.
type cleanup struct {
	ringnodes.Ring
	dir    string
	secret string // the cluster secret, for peer-only requests
}

// keepLogs copies the servers' logs so far into dir.
func (c *cleanup) keepLogs(dir string) error {
	logs, err := filepath.Glob(filepath.Join(c.dir, "*.log"))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(l)), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (c *cleanup) Close() error {
	err := c.Ring.Close()
	os.RemoveAll(filepath.Clean(c.dir))
	return err
}

// ringPerCell keeps one ring for consecutive tasks of a sequential grid
// that share it (every repetition of a ring size, say): a task asks for
// the ring of its key, which is started when the key changes and the
// previous ring closed.
type ringPerCell struct {
	key  int
	ring ringnodes.Ring
}

func (p *ringPerCell) get(key int, start func() (ringnodes.Ring, error)) (ringnodes.Ring, error) {
	if p.ring != nil && p.key == key {
		return p.ring, nil
	}
	p.Close()
	r, err := start()
	if err != nil {
		return nil, err
	}
	p.key, p.ring = key, r
	return r, nil
}

func (p *ringPerCell) Close() {
	if p.ring != nil {
		p.ring.Close()
		p.ring = nil
	}
}
