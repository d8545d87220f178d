// Command elector is the leader-election sidecar: it campaigns for one
// replica with one of ringside's algorithms and answers GET / with
// {"name":"<leader>"} like the 2016 leader-elector image, so applications
// built for that sidecar work unchanged.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/ringside/ringside/bld"
	"github.com/ringside/ringside/bld/balance"
	"github.com/ringside/ringside/internal/accept"
	"github.com/ringside/ringside/internal/envflag"
	"github.com/ringside/ringside/internal/klogslog"
	"github.com/ringside/ringside/internal/kubeconfig"
	"github.com/ringside/ringside/internal/rateclock"
	"github.com/ringside/ringside/internal/serve"
)

func main() {
	klogslog.Install() // before client-go runs: run names the logger
	serve.Main("elector", run)
}

func run(ctx context.Context, args []string) error {
	fs := envflag.New(flag.NewFlagSet("elector", flag.ContinueOnError))
	var cfg bld.CandidateConfig
	var httpAddr, advertise, kubeconfigPath, level, campaignAt string
	var events bool
	var rate float64
	fs.StringVar(&cfg.Algorithm, "algorithm", "ELECTOR_ALGORITHM", balance.Default, strings.Join(balance.Algorithms, ", "))
	fs.StringVar(&cfg.Lock, "lock", "ELECTOR_LOCK", bld.LockLease, "lease or endpoints")
	fs.StringVar(&cfg.Election, "election", "ELECTOR_ELECTION", "", "election (lock object) name; the application's name")
	fs.StringVar(&cfg.Namespace, "namespace", "POD_NAMESPACE", "default", "namespace of the lock")
	fs.StringVar(&cfg.Identity, "id", "POD_NAME", "", "this candidate's identity: its Pod name")
	fs.StringVar(&cfg.Node, "node", "NODE_NAME", "", "this candidate's node (default: read from its Pod)")
	fs.StringVar(&httpAddr, "http", "ELECTOR_HTTP", ":4040", "sidecar HTTP address")
	fs.StringVar(&advertise, "advertise", "ELECTOR_ADVERTISE", "", "address followers are probed and kicked at (default: POD_IP and the --http port)")
	fs.DurationVar(&cfg.LeaseDuration, "lease-duration", "ELECTOR_LEASE_DURATION", 10*time.Second, "lease duration")
	fs.DurationVar(&cfg.RenewDeadline, "renew-deadline", "ELECTOR_RENEW_DEADLINE", 8*time.Second, "a leader that cannot renew for this long steps down")
	fs.DurationVar(&cfg.RetryPeriod, "retry-period", "ELECTOR_RETRY_PERIOD", 2*time.Second, "interval between acquisition attempts and renewals")
	fs.DurationVar(&cfg.RankInterval, "rank-interval", "ELECTOR_RANK_INTERVAL", time.Second, "ranked: how often the leader re-measures follower RTTs")
	fs.StringVar(&campaignAt, "campaign-at", "ELECTOR_CAMPAIGN_AT", "", "start campaigning at this RFC 3339 instant, not at once (experiments start every candidate first, then let them campaign together)")
	fs.StringVar(&kubeconfigPath, "kubeconfig", "KUBECONFIG", "", "kubeconfig (default: in-cluster)")
	fs.Float64Var(&rate, "clock-rate", "ELECTOR_CLOCK_RATE", 1, "fault injection: this elector's clock runs at this rate of real time (kube-split-brain's clock rate skew; not with the default algorithm, whose client-go elector keeps its own clock)")
	fs.BoolVar(&events, "events", "ELECTOR_EVENTS", false, "print leadership events as JSON lines on stdout (for experiments)")
	fs.StringVar(&level, "log-level", "ELECTOR_LOG", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, err := serve.Logger(level)
	if err != nil {
		return err
	}
	if campaignAt != "" {
		if cfg.CampaignAt, err = time.Parse(time.RFC3339Nano, campaignAt); err != nil {
			return fmt.Errorf("--campaign-at %q: want an RFC 3339 instant such as 2026-12-03T14:00:00.5Z", campaignAt)
		}
	}
	log = log.With("id", cfg.Identity, "election", cfg.Election)
	cfg.Log = log
	// client-go's election and requests log through klog, which would
	// write to stderr at every level in its own format; through this
	// logger they name the candidate and keep to --log-level.
	klogslog.Use(log)
	if rate != 1 {
		if cfg.Algorithm == balance.Default {
			return fmt.Errorf("--clock-rate %v: the default algorithm is client-go's elector, which reads the real clock (its clock is not injectable)", rate)
		}
		rc, err := rateclock.New(rate)
		if err != nil {
			return fmt.Errorf("--clock-rate: %w", err)
		}
		cfg.Clock = rc
	}

	rc, err := kubeconfig.Load(kubeconfigPath)
	if err != nil {
		return err
	}
	// Protobuf, as the control-plane components use: cheaper to encode
	// and decode than JSON on both ends, and every object the electors
	// touch is a built-in type.
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	// LeaseCandidate's v1alpha2 is deprecated ahead of v1beta1: a warning
	// on every request, which says nothing to an operator.
	rc.WarningHandler = rest.NoWarnings{}
	cfg.Client, err = kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", httpAddr)
	if err != nil {
		return fmt.Errorf("http: %w", err)
	}
	if advertise == "" {
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		host := os.Getenv("POD_IP")
		if h, _, _ := net.SplitHostPort(httpAddr); host == "" && h != "" {
			host = h
		}
		if host != "" {
			advertise = net.JoinHostPort(host, port)
		}
	}
	cfg.ProbeAddr = advertise

	reg := prometheus.NewRegistry()
	isLeader := prometheus.NewGauge(prometheus.GaugeOpts{Name: "elector_is_leader", Help: "1 while this replica leads."})
	changes := prometheus.NewCounter(prometheus.CounterOpts{Name: "elector_leader_changes_total", Help: "Leader changes this replica observed."})
	reg.MustRegister(isLeader, changes)
	var outMu sync.Mutex
	enc := json.NewEncoder(os.Stdout)
	cfg.OnEvent = func(event, leader string) {
		// The moment, before the log line: the events' order across
		// electors is the experiments' evidence of two leaders at once.
		ts := time.Now().UnixNano()
		switch event {
		case "started":
			isLeader.Set(1)
		case "stopped":
			isLeader.Set(0)
		case "leader":
			changes.Inc()
		}
		level := slog.LevelInfo
		if event == "refused" {
			// BLD's rule may refuse a starved candidate every retry
			// period for as long as it runs.
			level = slog.LevelDebug
		}
		log.Log(context.Background(), level, "leadership", "event", event, "leader", leader)
		if events {
			outMu.Lock()
			enc.Encode(map[string]any{"ts_ns": ts, "event": event, "id": cfg.Identity, "election": cfg.Election, "leader": leader})
			outMu.Unlock()
		}
	}
	cand, err := bld.NewCandidate(cfg)
	if err != nil {
		return err
	}
	// When the signal to stop arrived, by this process's clock: on
	// Kubernetes the kubelet's SIGTERM comes some time after the Pod's
	// deletion, and a hand-over is the elector's from here.
	context.AfterFunc(ctx, func() { cfg.OnEvent("terminating", "") })
	if events {
		// Where the sidecar API is, for the application beside it.
		enc.Encode(map[string]any{"ts_ns": time.Now().UnixNano(), "event": "serving", "id": cfg.Identity, "election": cfg.Election, "addr": ln.Addr().String()})
	}

	mux := http.NewServeMux()
	mux.Handle("/", cand.Handler())
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := serve.Limit(&http.Server{Handler: mux})
	go srv.Serve(accept.Bound(ln))

	log.Info("campaigning", "algorithm", cfg.Algorithm, "lock", cfg.Lock, "http", ln.Addr().String(), "advertise", advertise)
	err = cand.Run(ctx)
	shutdown, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	srv.Shutdown(shutdown)
	return err
}
