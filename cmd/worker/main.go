// Command worker is the demo worker of the agent/balancer stack: GET
// /work?cost=N burns N SHA-256 rounds; /healthz, /metrics.
package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/ringside/ringside/internal/worker"
)

func main() {
	addr := flag.String("addr", env("WORKER_ADDR", ":8080"), "listen address")
	name := flag.String("name", os.Getenv("WORKER_NAME"), "name in responses (default: hostname)")
	limit := flag.Float64("cpu-limit", envFloat("WORKER_CPU_LIMIT", 0), "throttle to this many CPUs (0: none; Docker limits containers itself)")
	cost := flag.Int("cost", 20_000, "hash rounds of a request without ?cost=")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	h, err := worker.New(worker.Options{Name: *name, CPULimit: *limit, DefaultCost: *cost})
	if err != nil {
		log.Error("worker", "err", err)
		os.Exit(2)
	}
	srv := &http.Server{Addr: *addr, Handler: h, ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	log.Info("worker listening", "addr", *addr, "cpu_limit", *limit)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("worker", "err", err)
		os.Exit(1)
	}
}

func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func envFloat(k string, def float64) float64 {
	if v, err := strconv.ParseFloat(os.Getenv(k), 64); err == nil {
		return v
	}
	return def
}
