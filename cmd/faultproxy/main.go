// Command faultproxy is kube-split-brain's renew overrun inside a Pod: a
// container beside the elector that relays a loopback port to the API
// server (the elector is pointed at it with KUBERNETES_SERVICE_HOST and
// _PORT), and holds every chunk the elector sends for --delay from
// SIGUSR1 until SIGUSR2. Signals, not an HTTP control port, so that the
// fault needs no address reachable from outside the Pod: the experiment
// sends them through the node's container runtime, as it freezes a
// container. TLS passes through: the elector still verifies the server.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ringside/ringside/internal/envflag"
	"github.com/ringside/ringside/internal/faultrelay"
	"github.com/ringside/ringside/internal/serve"
)

func main() { serve.Main("faultproxy", run) }

// maxDelay bounds --delay: a renew deadline is seconds; a minute is past
// any lease profile's.
const maxDelay = time.Minute

func run(ctx context.Context, args []string) error {
	fs := envflag.New(flag.NewFlagSet("faultproxy", flag.ContinueOnError))
	listen := fs.String("listen", "FAULTPROXY_LISTEN", "127.0.0.1:6444", "address the elector connects to")
	target := fs.String("target", "FAULTPROXY_TARGET", "", "the API server as host:port (default: the Pod's KUBERNETES_SERVICE_HOST and _PORT)")
	delay := fs.Duration("delay", "FAULTPROXY_DELAY", 0, "how long each chunk is held while SIGUSR1 is in force (required, at most a minute)")
	level := fs.String("log-level", "FAULTPROXY_LOG", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, err := serve.Logger(*level)
	if err != nil {
		return err
	}
	if *delay <= 0 || *delay > maxDelay {
		return fmt.Errorf("--delay %v: want more than 0 and at most %v", *delay, maxDelay)
	}
	if *target == "" {
		host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
		if host == "" || port == "" {
			return fmt.Errorf("--target is empty and KUBERNETES_SERVICE_HOST or _PORT is unset: not in a Pod, so say where the API server is")
		}
		*target = net.JoinHostPort(host, port)
	}
	if _, _, err := net.SplitHostPort(*target); err != nil {
		return fmt.Errorf("--target %q: want host:port: %w", *target, err)
	}
	// Signals first, so that one sent the moment the relay listens is not
	// lost to the default action (SIGUSR1 would end the process).
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGUSR1, syscall.SIGUSR2)
	defer signal.Stop(sig)
	r, err := faultrelay.New(*listen, *target)
	if err != nil {
		return fmt.Errorf("listen %s: %w", *listen, err)
	}
	defer r.Close()
	log.Info("relaying", "listen", r.Addr(), "target", *target, "delay", *delay)
	for {
		select {
		case <-ctx.Done():
			return nil
		case s := <-sig:
			on := s == syscall.SIGUSR1
			if on {
				r.Delay(*delay)
			} else {
				r.Delay(0)
			}
			log.Info("delay", "on", on)
		}
	}
}
