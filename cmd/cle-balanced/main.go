// Command cle-balanced is the controller of the ringside.io/balanced
// strategy of Kubernetes' coordinated leader election (bld/cle): it names
// the holder of every Lease of that strategy by BLD's rule with the whole
// picture and moves leaders back into balance. Run two replicas: they
// elect one of themselves with client-go's default election, and the
// other takes over when it dies (all the controller's state is in the
// Leases).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/ringside/ringside/bld/cle"
	"github.com/ringside/ringside/bld/strategy"
	"github.com/ringside/ringside/internal/accept"
	"github.com/ringside/ringside/internal/envflag"
	"github.com/ringside/ringside/internal/klogslog"
	"github.com/ringside/ringside/internal/kubeconfig"
	"github.com/ringside/ringside/internal/serve"
)

func main() {
	klogslog.Install() // before client-go runs: run names the logger
	serve.Main("cle-balanced", run)
}

func run(ctx context.Context, args []string) error {
	fs := envflag.New(flag.NewFlagSet("cle-balanced", flag.ContinueOnError))
	var cfg cle.Config
	var id, lockNS, lockName, httpAddr, kubeconfigPath, level string
	var lease, renew, retry time.Duration
	var events bool
	var qps float64
	fs.StringVar(&cfg.Namespace, "watch-namespace", "CLE_WATCH_NAMESPACE", "", "namespace whose elections it controls (default: all)")
	fs.DurationVar(&cfg.AckWait, "ack-wait", "CLE_ACK_WAIT", time.Second, "how long a pinged candidate has to answer before it counts as gone")
	fs.DurationVar(&cfg.Gather, "gather", "CLE_GATHER", 2*time.Second, "how long a new application's first election waits for the candidates of its Pods on emptier nodes to register (0: 2 s)")
	fs.StringVar(&id, "id", "POD_NAME", "", "this replica's identity: its Pod name")
	fs.StringVar(&lockNS, "namespace", "POD_NAMESPACE", "default", "namespace of the controller's own election")
	fs.StringVar(&lockName, "election", "CLE_ELECTION", cle.ControllerElection, "the controller replicas' own Lease")
	fs.DurationVar(&lease, "lease-duration", "CLE_LEASE_DURATION", 15*time.Second, "the controller replicas' lease duration")
	fs.DurationVar(&renew, "renew-deadline", "CLE_RENEW_DEADLINE", 10*time.Second, "a controller that cannot renew for this long stops controlling")
	fs.DurationVar(&retry, "retry-period", "CLE_RETRY_PERIOD", 2*time.Second, "interval between the replicas' acquisition attempts and renewals")
	fs.StringVar(&httpAddr, "http", "CLE_HTTP", "127.0.0.1:4041", "address of /healthz and /metrics (loopback unless asked)")
	fs.StringVar(&kubeconfigPath, "kubeconfig", "KUBECONFIG", "", "kubeconfig (default: in-cluster)")
	fs.Float64Var(&qps, "kube-qps", "CLE_KUBE_QPS", 100, "requests per second to the API server (twice that in a burst); client-go's default of 5 would queue every ping and decision of a busy cluster behind the last")
	fs.BoolVar(&events, "events", "CLE_EVENTS", false, "log every decision at info level (for experiments)")
	fs.StringVar(&level, "log-level", "CLE_LOG", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if id == "" {
		return fmt.Errorf("--id (POD_NAME) is required: the replicas' election needs an identity")
	}
	log, err := serve.Logger(level)
	if err != nil {
		return err
	}
	log = log.With("id", id)
	cfg.Log = log
	// client-go's election and requests log through klog, which would
	// write to stderr at every level in its own format; through this
	// logger they name the replica and keep to --log-level.
	klogslog.Use(log)
	rc, err := kubeconfig.Load(kubeconfigPath)
	if err != nil {
		return err
	}
	if !(qps > 0) {
		return fmt.Errorf("--kube-qps %v: want > 0", qps)
	}
	rc.QPS, rc.Burst = float32(qps), int(2*qps)
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	// LeaseCandidate's v1alpha2 is deprecated ahead of v1beta1: a warning
	// on every request, which says nothing to an operator.
	rc.WarningHandler = rest.NoWarnings{}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	cfg.Client = cs

	reg := prometheus.NewRegistry()
	leading := prometheus.NewGauge(prometheus.GaugeOpts{Name: "cle_controlling", Help: "1 while this replica controls the elections."})
	decisions := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cle_decisions_total", Help: "Writes to Leases, by kind (holder, move)."}, []string{"kind"})
	reg.MustRegister(leading, decisions)
	cfg.OnDecision = func(ns string, d strategy.Decision) {
		kind, who := "holder", d.Holder
		if d.Preferred != "" {
			kind, who = "move", d.Preferred
		}
		decisions.WithLabelValues(kind).Inc()
		lvl := slog.LevelDebug
		if events {
			lvl = slog.LevelInfo
		}
		log.Log(context.Background(), lvl, "decision", "namespace", ns, "lease", d.Election, "kind", kind, "candidate", who)
	}
	ctl, err := cle.New(cfg)
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", httpAddr)
	if err != nil {
		return fmt.Errorf("http: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := serve.Limit(&http.Server{Handler: mux})
	go srv.Serve(accept.Bound(ln))
	defer func() {
		shutdown, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(shutdown)
	}()

	lock := &resourcelock.LeaseLock{LeaseMeta: metav1.ObjectMeta{Name: lockName, Namespace: lockNS}, Client: cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id}}
	log.Info("campaigning", "election", lockNS+"/"+lockName, "http", ln.Addr().String())
	// A replica that lost its lease campaigns again: the controller keeps
	// nothing but its informers.
	for ctx.Err() == nil {
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: lock, LeaseDuration: lease, RenewDeadline: renew, RetryPeriod: retry, ReleaseOnCancel: true, Name: lockName,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(lctx context.Context) {
					leading.Set(1)
					log.Info("controlling")
					if err := ctl.Run(lctx); err != nil {
						log.Error("controller", "err", err)
					}
				},
				OnStoppedLeading: func() { leading.Set(0); log.Info("stopped controlling") },
			},
		})
		if err != nil {
			return err
		}
		le.Run(ctx)
	}
	return nil
}
