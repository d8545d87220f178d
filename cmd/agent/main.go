// Command agent is seed 004's deployment agent: it scores worker
// containers (or processes), runs their lifecycle, keeps its state in
// Redis and feeds weights to balancers over a websocket; the dashboard is
// at / of --http.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/ringside/ringside/agent"
	"github.com/ringside/ringside/agent/lifecycle"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ringside/ringside/agent/runtime"
	"github.com/ringside/ringside/internal/envflag"
	"github.com/ringside/ringside/internal/serve"
)

func main() { serve.Main("agent", run) }

func run(ctx context.Context, args []string) error {
	fs := envflag.New(flag.NewFlagSet("agent", flag.ContinueOnError))
	httpAddr := fs.String("http", "AGENT_HTTP", ":8081", "dashboard, weight feed (/feed) and /metrics address")
	token := fs.Secret("token", "AGENT_TOKEN", "shared token balancers present on the weight feed (required)")
	origins := fs.String("origins", "AGENT_ORIGINS", "", "extra Origins allowed on the feed, comma-separated")
	rt := fs.String("runtime", "AGENT_RUNTIME", "docker", "docker, kubernetes or process")
	image := fs.String("image", "WORKER_IMAGE", "ringside/worker:dev", "worker image (docker, kubernetes)")
	kubeconfig := fs.String("kubeconfig", "AGENT_KUBECONFIG", "", "the cluster of the kubernetes runtime (default: the one the agent runs in)")
	namespace := fs.String("namespace", "AGENT_NAMESPACE", "", "the workers' namespace (kubernetes runtime; default: the agent's own)")
	network := fs.String("network", "AGENT_NETWORK", "", "Docker network of the workers (default: any)")
	pool := fs.String("pool", "AGENT_POOL", "", "value of the ringside.pool label that selects this stack's workers")
	workerBin := fs.String("worker-bin", "WORKER_BIN", "worker", "worker binary (process runtime)")
	start := fs.String("start", "AGENT_START", "", "workers to start when none run, CPU[:default] comma-separated (e.g. 1:default,0.5)")
	spawnCPU := fs.Float("spawn-cpu", "AGENT_SPAWN_CPU", 0.5, "CPU limit of a worker started by scale-up")
	redisAddr := fs.String("redis", "REDIS_ADDR", "", "Redis address for the agent's state (empty: keep it in memory)")
	prefix := fs.String("redis-prefix", "AGENT_REDIS_PREFIX", "ringside:agent", "Redis key prefix")
	redisPassword := fs.Secret("redis-password", "REDIS_PASSWORD", "Redis password (prefer the environment to the command line)")
	interval := fs.Duration("interval", "AGENT_INTERVAL", time.Second, "sampling and feed period")
	var pc lifecycle.Config
	fs.Float64Var(&pc.Low, "low", "AGENT_LOW", 30, "utilisation % below which a worker is Low")
	fs.Float64Var(&pc.High, "high", "AGENT_HIGH", 75, "utilisation % above which a worker is High")
	fs.Float64Var(&pc.Hysteresis, "hysteresis", "AGENT_HYSTERESIS", 5, "margin to leave Low or High")
	fs.DurationVar(&pc.SundownAfter, "t-low", "AGENT_T_LOW", 30*time.Second, "time Low before a non-default worker is sundowned")
	fs.DurationVar(&pc.ScaleUpAfter, "t-high", "AGENT_T_HIGH", 10*time.Second, "time the pool must stay High before scale-up")
	fs.IntVar(&pc.Min, "min", "AGENT_MIN", 1, "minimum serving workers")
	fs.IntVar(&pc.Max, "max", "AGENT_MAX", 8, "maximum serving workers")
	level := fs.String("log-level", "AGENT_LOG", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, err := serve.Logger(*level)
	if err != nil {
		return err
	}
	if *token == "" {
		return errors.New("--token (AGENT_TOKEN) is required: the weight feed is never open")
	}

	var r agent.Runtime
	switch *rt {
	case "docker":
		d, err := runtime.NewDocker(ctx, runtime.DockerOptions{Image: *image, Network: *network, Pool: *pool})
		if err != nil {
			return err
		}
		defer d.Close()
		r = d
	case "kubernetes":
		k, err := kubeRuntime(*kubeconfig, *namespace, runtime.KubeOptions{Image: *image, Pool: *pool})
		if err != nil {
			return err
		}
		r = k
	case "process":
		p := runtime.NewProcess(*workerBin)
		defer p.RemoveAll(context.Background())
		r = p
	default:
		return fmt.Errorf("--runtime %q: want docker, kubernetes or process", *rt)
	}
	cfg := agent.Config{Runtime: r, Pool: pc, Spawn: runtime.Spec{CPULimit: *spawnCPU}, Interval: *interval,
		Token: *token, Log: log}
	if *origins != "" {
		cfg.Origins = strings.Split(*origins, ",")
	}
	if *redisAddr != "" {
		rdb := redis.NewClient(&redis.Options{Addr: *redisAddr, Password: *redisPassword})
		defer rdb.Close()
		cfg.Store = agent.NewRedisStore(rdb, *prefix)
	}
	a, err := agent.New(cfg)
	if err != nil {
		return err
	}
	if err := a.Resume(ctx); err != nil {
		// Redis unreachable or corrupt: say so, and start from what runs.
		log.Warn("could not resume from the store; starting from the running workers", "err", err)
	}
	if *start != "" {
		specs, err := runtime.ParseSpecs(*start)
		if err != nil {
			return fmt.Errorf("--start: %w", err)
		}
		if running, err := r.List(ctx); err == nil && len(running) == 0 {
			for _, sp := range specs {
				if _, err := r.Start(ctx, sp); err != nil {
					return err
				}
			}
		}
	}
	srv := serve.Limit(&http.Server{Addr: *httpAddr, Handler: a.Handler(prometheus.NewRegistry())})
	go a.Run(ctx)
	log.Info("agent listening", "http", *httpAddr, "runtime", *rt)
	return serve.Until(ctx, 3*time.Second, srv)
}

// kubeRuntime connects the kubernetes runtime: in-cluster (a Pod of the
// agent's Deployment) unless a kubeconfig is given, in the agent's own
// namespace unless one is named.
func kubeRuntime(kubeconfig, namespace string, o runtime.KubeOptions) (*runtime.Kube, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	rc, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubernetes runtime: %w", err)
	}
	if namespace == "" {
		if namespace, _, err = cc.Namespace(); err != nil {
			return nil, fmt.Errorf("kubernetes runtime: namespace: %w", err)
		}
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes runtime: %w", err)
	}
	o.Namespace = namespace
	return runtime.NewKube(cs, o), nil
}
