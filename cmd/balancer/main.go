// Command balancer is seed 004's weighted reverse proxy: it follows the
// agent's weight feed (--feed) or serves fixed workers (--workers), and
// picks a worker per request with --picker.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ringside/ringside/balancer"
	"github.com/ringside/ringside/balancer/pick"
	"github.com/ringside/ringside/internal/envflag"
	"github.com/ringside/ringside/internal/serve"
	"github.com/ringside/ringside/internal/weightfeed"
)

func main() { serve.Main("balancer", run) }

func run(ctx context.Context, args []string) error {
	fs := envflag.New(flag.NewFlagSet("balancer", flag.ContinueOnError))
	addr := fs.String("addr", "BALANCER_ADDR", ":8080", "proxy address")
	admin := fs.String("admin", "BALANCER_ADMIN", "127.0.0.1:9090", "/metrics, /healthz and pprof address (loopback unless asked: :9090 for every interface)")
	picker := fs.String("picker", "BALANCER_PICKER", pick.WeightedRandom, strings.Join(pick.Algorithms, ", "))
	var tuning pick.Tuning
	fs.Env("BALANCER", tuning.Define(fs.FlagSet, "")...)
	feed := fs.String("feed", "AGENT_FEED", "", "agent weight feed URL, e.g. ws://agent:8081/feed")
	token := fs.Secret("token", "AGENT_TOKEN", "the agent's feed token")
	name := fs.String("name", "BALANCER_NAME", "", "name in its tallies to the agent (default: hostname)")
	workers := fs.String("workers", "BALANCER_WORKERS", "", "fixed workers instead of a feed: host:port=weight, comma-separated")
	var allowLoopback bool
	fs.BoolVar(&allowLoopback, "allow-loopback", "BALANCER_ALLOW_LOOPBACK", false, "accept loopback worker addresses from the feed (workers on this host)")
	front := fs.String("front", "BALANCER_FRONT", frontEpoll, "the proxy's front: "+strings.Join(fronts, ", ")+" (docs/balancer-front.md)")
	level := fs.String("log-level", "BALANCER_LOG", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, err := serve.Logger(*level)
	if err != nil {
		return err
	}
	if (*feed == "") == (*workers == "") {
		return errors.New("give exactly one of --feed (follow the agent) or --workers (fixed weights)")
	}
	if *name == "" {
		*name, _ = os.Hostname()
	}
	b, err := balancer.New(balancer.Options{Algorithm: *picker, Log: log, Tuning: tuning})
	if err != nil {
		return err
	}
	if *workers != "" {
		m, err := parseWorkers(*workers)
		if err != nil {
			return err
		}
		if err := b.Update(m); err != nil {
			return fmt.Errorf("--workers: %w", err)
		}
	} else {
		if *token == "" {
			return errors.New("--token (AGENT_TOKEN) is required with --feed")
		}
		go b.Follow(ctx, balancer.FeedOptions{URL: *feed, Token: *token, Name: *name, AllowLoopback: allowLoopback, Self: selfAddrs(*addr, *admin)})
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(b)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	// Profiles on the admin port only: where the proxy's time goes.
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	adminSrv := serve.Limit(&http.Server{Addr: *admin, Handler: mux})
	srv, err := newFront(*front, b, *addr)
	if err != nil {
		return err
	}
	log.Info("balancer listening", "addr", *addr, "picker", *picker, "front", *front)
	return serve.Until(ctx, 5*time.Second, srv, adminSrv)
}

// The fronts a balancer can serve with; lb-proxy measures them side by side.
const (
	frontFast    = "fasthttp" // balancer.FastFront
	frontConn    = "conn"     // balancer.Front: a goroutine per connection on net/http's parser
	frontNetHTTP = "net/http" // http.Server and httputil.ReverseProxy: the reference
	frontEpoll   = "epoll"    // balancer.EpollFront: an event loop per core, as nginx runs
)

var fronts = []string{frontEpoll, frontFast, frontConn, frontNetHTTP}

func newFront(name string, b *balancer.Balancer, addr string) (serve.Server, error) {
	const header = 5 * time.Second
	switch name {
	case frontFast:
		return &balancer.FastFront{B: b, Addr: addr, HeaderTimeout: header}, nil
	case frontConn:
		return &balancer.Front{B: b, Addr: addr, HeaderTimeout: header}, nil
	case frontEpoll:
		return &balancer.EpollFront{B: b, Addr: addr, HeaderTimeout: header}, nil
	case frontNetHTTP:
		return serve.Limit(&http.Server{Addr: addr, Handler: b, ReadHeaderTimeout: header}), nil
	}
	return nil, fmt.Errorf("--front %q: want one of %s", name, strings.Join(fronts, ", "))
}

// parseWorkers reads --workers, "host:port=weight,…". Each item is
// checked here, so that a bad one is named as the user wrote it (the
// table's own check would call a NaN weight a score).
func parseWorkers(s string) (weightfeed.Weights, error) {
	items := strings.Split(s, ",")
	if len(items) > weightfeed.MaxWorkers {
		return weightfeed.Weights{}, fmt.Errorf("--workers: %d items, at most %d", len(items), weightfeed.MaxWorkers)
	}
	var addrs []string
	var ws []float64
	for i, item := range items {
		a, w, ok := strings.Cut(strings.TrimSpace(item), "=")
		v, perr := strconv.ParseFloat(w, 64)
		_, _, aerr := net.SplitHostPort(a)
		switch {
		case !ok || perr != nil || aerr != nil:
			return weightfeed.Weights{}, fmt.Errorf("--workers item %d %q: want host:port=weight", i+1, item)
		case math.IsNaN(v) || math.IsInf(v, 0) || v < 0:
			return weightfeed.Weights{}, fmt.Errorf("--workers item %d %q: the weight must be a finite number ≥ 0", i+1, item)
		}
		addrs, ws = append(addrs, a), append(ws, v)
	}
	return balancer.Static(addrs, ws), nil
}

// selfAddrs is every address at which this balancer listens: each listen
// address, and for one that binds every interface (":8080"), each of this
// host's addresses with its port — what the agent would see it as.
func selfAddrs(listen ...string) []string {
	var ips []string
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil {
				ips = append(ips, p.Addr().String())
			}
		}
	}
	var out []string
	for _, l := range listen {
		host, port, err := net.SplitHostPort(l)
		if err != nil {
			continue
		}
		out = append(out, l)
		if host == "" || host == "0.0.0.0" || host == "::" {
			for _, ip := range ips {
				out = append(out, net.JoinHostPort(ip, port))
			}
		}
	}
	return out
}
