// Command worker is the demo worker of the agent/balancer stack: GET
// /work?cost=N burns N SHA-256 rounds; /healthz, /metrics.
package main

import (
	"context"
	"flag"
	"net/http"
	"time"

	"github.com/ringside/ringside/internal/envflag"
	"github.com/ringside/ringside/internal/serve"
	"github.com/ringside/ringside/internal/worker"
)

func main() { serve.Main("worker", run) }

func run(ctx context.Context, args []string) error {
	fs := envflag.New(flag.NewFlagSet("worker", flag.ContinueOnError))
	addr := fs.String("addr", "WORKER_ADDR", ":8080", "listen address")
	name := fs.String("name", "WORKER_NAME", "", "name in responses (default: hostname)")
	limit := fs.Float("cpu-limit", "WORKER_CPU_LIMIT", 0, "throttle to this many CPUs (0: none; Docker limits containers itself)")
	cost := fs.Int("cost", "WORKER_COST", 20_000, "hash rounds of a request without ?cost=")
	level := fs.String("log-level", "WORKER_LOG", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, err := serve.Logger(*level)
	if err != nil {
		return err
	}
	h, err := worker.New(worker.Options{Name: *name, CPULimit: *limit, DefaultCost: *cost})
	if err != nil {
		return err
	}
	log.Info("worker listening", "addr", *addr, "cpu_limit", *limit)
	return serve.Until(ctx, 5*time.Second, serve.Limit(&http.Server{Addr: *addr, Handler: h}))
}
