// Package podfault is the fault agent of a ring Pod on the Kubernetes
// backend: the Pod's main process, it supervises one server process
// (ringnode) and makes the faults an experiment injects, on the runner's
// request, in the Pod itself — so that it works on any cluster, with no
// access to the nodes: a crash (SIGKILL) and a restart with the same
// address and data (the Pod and its IP stay), a freeze (SIGSTOP, then
// SIGCONT), and a cut (blackhole routes in the Pod's network namespace,
// which needs CAP_NET_ADMIN, the way chaos tools cut a Pod off). Every
// fault heals itself after the duration asked for, so a runner that is
// itself cut off, or gone, leaves no fault behind.
//
// The API (every request but GET /healthz carries the ring's cluster
// secret in HeaderSecret):
//
//	POST /start?join=ip:port,…   start the server, joining those seeds
//	POST /kill                   SIGKILL the server; answers once it is dead
//	POST /pause?for=D            freeze the server for D
//	POST /cut?ips=ip,…&for=D     drop what the Pod sends to those addresses for D
//	GET  /healthz                the agent answers (readiness)
package podfault

import (
	"bytes"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// HeaderSecret carries the ring's cluster secret, as on ringnode's
// peer-only requests.
const HeaderSecret = "X-Ringside-Secret"

// MaxFault bounds a pause or a cut: a fault that outlives any experiment
// is a request gone wrong.
const MaxFault = 5 * time.Minute

// maxList bounds the addresses of one request (a ring of that many
// servers is far past what one runner drives).
const maxList = 1024

// Router adds and removes the blackhole route to one address.
type Router interface {
	Blackhole(ip netip.Addr, on bool) error
}

// Config is what an Agent supervises.
type Config struct {
	Bin     string   // the server binary
	Args    []string // its arguments
	Env     []string // its environment (the join list is added per start)
	JoinEnv string   // the variable that carries the join list (RINGNODE_JOIN)
	Secret  string
	// Credential, when set, runs the server as that user (the agent keeps
	// root for its routes; the server needs none of it).
	Credential *syscall.Credential
	Router     Router // nil: cuts are refused (no CAP_NET_ADMIN)
	Log        *slog.Logger
}

// Agent supervises the server and makes its faults.
type Agent struct {
	cfg Config

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when the running server has exited
	paused int           // pauses in force
	cut    map[netip.Addr]int
}

// New returns an agent; nothing runs until /start.
func New(cfg Config) (*Agent, error) {
	if len(cfg.Secret) < 16 {
		return nil, errors.New("podfault: the cluster secret must be at least 16 characters")
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Agent{cfg: cfg, cut: map[netip.Addr]int{}}, nil
}

// Handler is the agent's HTTP API.
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("POST /start", a.auth(a.handleStart))
	mux.HandleFunc("POST /kill", a.auth(a.handleKill))
	mux.HandleFunc("POST /pause", a.auth(a.handlePause))
	mux.HandleFunc("POST /cut", a.auth(a.handleCut))
	return mux
}

func (a *Agent) auth(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get(HeaderSecret)), []byte(a.cfg.Secret)) != 1 {
			http.Error(w, "podfault: missing or wrong "+HeaderSecret, http.StatusForbidden)
			return
		}
		h(w, r)
	}
}

func (a *Agent) handleStart(w http.ResponseWriter, r *http.Request) {
	join, err := addrPorts(r.URL.Query().Get("join"))
	if err != nil {
		http.Error(w, "podfault: join: "+err.Error(), http.StatusBadRequest)
		return
	}
	if err := a.Start(join); err != nil {
		http.Error(w, err.Error(), http.StatusConflict)
		return
	}
	w.Write([]byte("started\n"))
}

func (a *Agent) handleKill(w http.ResponseWriter, r *http.Request) {
	if err := a.Kill(); err != nil {
		http.Error(w, err.Error(), http.StatusConflict)
		return
	}
	w.Write([]byte("killed\n"))
}

func (a *Agent) handlePause(w http.ResponseWriter, r *http.Request) {
	d, err := faultDuration(r.URL.Query().Get("for"))
	if err != nil {
		http.Error(w, "podfault: for: "+err.Error(), http.StatusBadRequest)
		return
	}
	if err := a.Pause(d); err != nil {
		http.Error(w, err.Error(), http.StatusConflict)
		return
	}
	w.Write([]byte("paused\n"))
}

func (a *Agent) handleCut(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d, err := faultDuration(q.Get("for"))
	if err != nil {
		http.Error(w, "podfault: for: "+err.Error(), http.StatusBadRequest)
		return
	}
	ips, err := addrs(q.Get("ips"))
	if err != nil {
		http.Error(w, "podfault: ips: "+err.Error(), http.StatusBadRequest)
		return
	}
	if a.cfg.Router == nil {
		http.Error(w, "podfault: cuts need CAP_NET_ADMIN, which this agent was not given", http.StatusNotImplemented)
		return
	}
	// The requester may be among the addresses: its answer goes first,
	// and the routes are set the moment it has been written.
	w.Write([]byte("cutting\n"))
	http.NewResponseController(w).Flush()
	go a.Cut(ips, d)
}

// Start runs the server with join as its seeds.
func (a *Agent) Start(join []netip.AddrPort) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cmd != nil {
		return errors.New("podfault: the server is running")
	}
	seeds := make([]string, len(join))
	for i, j := range join {
		seeds[i] = j.String()
	}
	cmd := exec.Command(a.cfg.Bin, a.cfg.Args...)
	cmd.Env = append(append([]string{}, a.cfg.Env...), a.cfg.JoinEnv+"="+strings.Join(seeds, ","))
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if a.cfg.Credential != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: a.cfg.Credential}
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("podfault: start %s: %w", a.cfg.Bin, err)
	}
	exited := make(chan struct{})
	a.cmd, a.exited, a.paused = cmd, exited, 0
	go func() {
		err := cmd.Wait()
		a.cfg.Log.Info("server exited", "pid", cmd.Process.Pid, "err", err)
		a.mu.Lock()
		if a.cmd == cmd {
			a.cmd = nil
		}
		a.mu.Unlock()
		close(exited)
	}()
	a.cfg.Log.Info("server started", "pid", cmd.Process.Pid, "join", seeds)
	return nil
}

// Kill crashes the server and returns once it is dead.
func (a *Agent) Kill() error {
	a.mu.Lock()
	cmd, exited := a.cmd, a.exited
	a.mu.Unlock()
	if cmd == nil {
		return errors.New("podfault: the server is not running")
	}
	cmd.Process.Kill() // a stopped process dies of SIGKILL too
	<-exited
	return nil
}

// Pause freezes the server for d; it is thawed when the last pause in
// force ends.
func (a *Agent) Pause(d time.Duration) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cmd == nil {
		return errors.New("podfault: the server is not running")
	}
	cmd := a.cmd
	if a.paused == 0 {
		if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			return fmt.Errorf("podfault: freeze: %w", err)
		}
		// The signal is delivered asynchronously: answer once the
		// process has stopped, so the runner's clock starts with the
		// freeze.
		if err := waitState(cmd.Process.Pid, "T", time.Second); err != nil {
			return fmt.Errorf("podfault: freeze: %w", err)
		}
	}
	a.paused++
	time.AfterFunc(d, func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.cmd != cmd { // killed (and maybe restarted) meanwhile
			return
		}
		if a.paused--; a.paused == 0 {
			cmd.Process.Signal(syscall.SIGCONT)
		}
	})
	return nil
}

// Cut blackholes what the Pod sends to ips for d. Routes shared by
// overlapping cuts stay until the last of them ends.
func (a *Agent) Cut(ips []netip.Addr, d time.Duration) {
	a.mu.Lock()
	for _, ip := range ips {
		if a.cut[ip]++; a.cut[ip] == 1 {
			if err := a.cfg.Router.Blackhole(ip, true); err != nil {
				a.cfg.Log.Error("cut", "ip", ip, "err", err)
			}
		}
	}
	a.mu.Unlock()
	time.AfterFunc(d, func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		for _, ip := range ips {
			if a.cut[ip]--; a.cut[ip] == 0 {
				delete(a.cut, ip)
				if err := a.cfg.Router.Blackhole(ip, false); err != nil {
					a.cfg.Log.Error("heal", "ip", ip, "err", err)
				}
			}
		}
	})
}

// Stop kills the server, if it runs, and removes every route: the Pod is
// going away.
func (a *Agent) Stop() {
	a.Kill()
	a.mu.Lock()
	defer a.mu.Unlock()
	for ip := range a.cut {
		a.cfg.Router.Blackhole(ip, false)
		delete(a.cut, ip)
	}
}

// procState is the state letter of pid (R running, S sleeping, T
// stopped) from /proc/PID/stat, whose second field, the command name in
// parentheses, may itself hold spaces and parentheses.
func procState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return ""
	}
	return string(b[i+2])
}

func waitState(pid int, state string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for procState(pid) != state {
		if time.Now().After(deadline) {
			return fmt.Errorf("pid %d not in state %s after %v (state %q)", pid, state, limit, procState(pid))
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

func faultDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, err
	}
	if d <= 0 || d > MaxFault {
		return 0, fmt.Errorf("%v: want more than 0 and at most %v", d, MaxFault)
	}
	return d, nil
}

func split(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) > maxList {
		return nil, fmt.Errorf("%d addresses: at most %d", len(parts), maxList)
	}
	return parts, nil
}

// addrPorts parses a comma-separated list of ip:port.
func addrPorts(s string) ([]netip.AddrPort, error) {
	parts, err := split(s)
	if err != nil {
		return nil, err
	}
	out := make([]netip.AddrPort, len(parts))
	for i, p := range parts {
		if out[i], err = netip.ParseAddrPort(p); err != nil {
			return nil, err
		}
		if out[i].Port() == 0 {
			return nil, fmt.Errorf("%s: port 0", p)
		}
	}
	return out, nil
}

// addrs parses a comma-separated list of unicast IPs: a route to
// anything else (a loopback, multicast or unspecified address) would cut
// the Pod off from itself or from everything.
func addrs(s string) ([]netip.Addr, error) {
	parts, err := split(s)
	if err != nil {
		return nil, err
	}
	if len(parts) == 0 {
		return nil, errors.New("no address")
	}
	out := make([]netip.Addr, len(parts))
	for i, p := range parts {
		ip, err := netip.ParseAddr(p)
		if err != nil {
			return nil, err
		}
		if ip.Zone() != "" || ip.IsLoopback() || ip.IsUnspecified() || ip.IsMulticast() || !ip.IsValid() {
			return nil, fmt.Errorf("%s: not a unicast address of another host", p)
		}
		out[i] = ip.Unmap()
	}
	return out, nil
}
