// Command leaderapp is the leader-based stateful application of the BLD
// paper (seed 000 §3.2): one replica, beside its elector sidecar, which it
// asks who leads. GET /kv/{key} is served from its own store; PUT
// /kv/{key} is applied by the leader and propagated to every follower
// before the answer (a follower forwards it; 503 while no one leads).
// GET /role tells the replica's role.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/ringside/ringside/internal/accept"
	"github.com/ringside/ringside/internal/envflag"
	"github.com/ringside/ringside/internal/serve"
	"github.com/ringside/ringside/leaderapp"
)

func main() { serve.Main("leaderapp", run) }

func run(ctx context.Context, args []string) error {
	fs := envflag.New(flag.NewFlagSet("leaderapp", flag.ContinueOnError))
	addr := fs.String("addr", "APP_ADDR", ":8080", "listen address")
	fd := fs.Int("listen-fd", "APP_LISTEN_FD", 0, "serve on this inherited listening socket instead of --addr (3 for the first of ExtraFiles): whoever starts the replicas picks every address before any starts, race-free")
	name := fs.String("name", "POD_NAME", "", "this replica's name, as the sidecar names leaders (required)")
	sidecar := fs.String("sidecar", "APP_SIDECAR", "http://127.0.0.1:4040", "the elector sidecar's URL")
	peers := fs.String("peers", "APP_PEERS", "", "every replica as name=URL, comma-separated, this one included (required)")
	secret := fs.Secret("secret", "APP_SECRET", "secret the replicas share, 16+ characters (required)")
	writeWork := fs.Int("write-work", "APP_WRITE_WORK", 3000, "SHA-256 rounds a write costs; a read costs --read-work")
	readWork := fs.Int("read-work", "APP_READ_WORK", 300, "SHA-256 rounds a read costs")
	poll := fs.Duration("poll", "APP_POLL", 100*time.Millisecond, "how often the sidecar is asked who leads")
	stale := fs.Duration("stale", "APP_STALE", 0, "forget the leader when the sidecar has not answered for this long (0: 5 × --poll)")
	storeMiB := fs.Int("max-store-mib", "APP_MAX_STORE_MIB", leaderapp.DefaultMaxStore>>20, "keys and values a replica may hold, in MiB; past it writes get 507")
	var fencing, writeLog bool
	fs.BoolVar(&fencing, "fencing", "APP_FENCING", false, "order writes by the leader's term and refuse those of an older term than seen (needs an elector that reports terms)")
	fs.BoolVar(&writeLog, "write-log", "APP_WRITE_LOG", false, "print every applied write as a JSON line on stdout (for experiments)")
	level := fs.String("log-level", "APP_LOG", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, err := serve.Logger(*level)
	if err != nil {
		return err
	}
	if *storeMiB < 1 || *storeMiB > 1<<20 {
		return fmt.Errorf("max-store-mib %d: want 1 to %d", *storeMiB, 1<<20)
	}
	pm, err := parsePeers(*peers)
	if err != nil {
		return err
	}
	app, err := leaderapp.New(leaderapp.Config{Name: *name, Sidecar: strings.TrimSuffix(*sidecar, "/"), Peers: pm, Secret: *secret,
		WriteWork: *writeWork, ReadWork: *readWork, Poll: *poll, Stale: *stale, MaxStoreBytes: int64(*storeMiB) << 20, Log: log,
		Fencing: fencing, OnApply: appliedLog(writeLog)})
	if err != nil {
		return err
	}
	srv := serve.Limit(&http.Server{Addr: *addr, Handler: app.Handler()})
	var ln net.Listener
	if *fd > 0 {
		f := os.NewFile(uintptr(*fd), "listener")
		if f == nil {
			return fmt.Errorf("--listen-fd %d: not an open file", *fd)
		}
		if ln, err = net.FileListener(f); err != nil {
			return fmt.Errorf("--listen-fd %d: %w", *fd, err)
		}
		f.Close()
		*addr = ln.Addr().String()
	}
	go app.Run(ctx)
	log.Info("leaderapp listening", "addr", *addr, "name", *name, "replicas", len(pm))
	if ln != nil {
		return serve.Until(ctx, 5*time.Second, listenerServer{srv, ln})
	}
	return serve.Until(ctx, 5*time.Second, srv)
}

// listenerServer serves an inherited listener where serve.Until calls
// ListenAndServe.
type listenerServer struct {
	*http.Server
	ln net.Listener
}

func (s listenerServer) ListenAndServe() error { return s.Serve(accept.Bound(s.ln)) }

// parsePeers reads name=URL,name=URL.
func parsePeers(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		name, raw, ok := strings.Cut(p, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("--peers %q: want name=URL", p)
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("--peers %s: %q is not an http(s) URL", name, raw)
		}
		if u.User != nil || strings.ContainsAny(raw, "?#") {
			return nil, fmt.Errorf("--peers %s: %q: want scheme://host[:port][/path], no user, query or fragment", name, raw)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("--peers: %s twice", name)
		}
		// One spelling: url.Parse takes "Http://" as http.
		out[name] = u.Scheme + "://" + u.Host + strings.TrimRight(u.EscapedPath(), "/")
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--peers (APP_PEERS) is required: every replica as name=URL")
	}
	return out, nil
}

// appliedLog prints applied writes as JSON lines, or nothing.
func appliedLog(on bool) func(leaderapp.Applied) {
	if !on {
		return nil
	}
	var mu sync.Mutex
	enc := json.NewEncoder(os.Stdout)
	return func(a leaderapp.Applied) {
		mu.Lock()
		defer mu.Unlock()
		enc.Encode(map[string]any{"ts_ns": a.At.UnixNano(), "key": a.Key, "term": a.Term, "vterm": a.Version.Term, "seq": a.Version.Seq, "as": a.As, "leader": a.Leader})
	}
}
