package main

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"os"
	"syscall"
	"time"

	"github.com/ringside/ringside/internal/envflag"
	"github.com/ringside/ringside/internal/podfault"
	"github.com/ringside/ringside/internal/serve"
)

// podfaultCmd is a ring Pod's main process on the Kubernetes backend: it
// supervises ringnode, which gets the Pod's RINGNODE_* environment, and
// makes the faults the runner asks for (package podfault).
func podfaultCmd(ctx context.Context, args []string, stderr io.Writer) error {
	fs := envflag.New(flag.NewFlagSet("podfault", flag.ContinueOnError))
	fs.SetOutput(stderr)
	listen := fs.String("listen", "PODFAULT_LISTEN", ":7070", "the agent's address")
	bin := fs.String("server", "PODFAULT_SERVER", "/ringnode", "the server binary it supervises")
	var secret string
	fs.SecretVar(&secret, "secret", "RINGNODE_SECRET", "the ring's cluster secret, which every request carries (prefer the environment)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil)).With("component", "podfault")
	// envflag took the secret out of the environment (no child sees a
	// secret by accident): the server gets it on purpose.
	cfg := podfault.Config{Bin: *bin, Env: append(os.Environ(), "RINGNODE_SECRET="+secret), JoinEnv: "RINGNODE_JOIN", Secret: secret, Log: log}
	// The agent keeps root for its routes; the server runs as the
	// images' non-root user.
	if os.Getuid() == 0 {
		cfg.Credential = &syscall.Credential{Uid: 65532, Gid: 65532}
	}
	if err := podfault.Probe(); err != nil {
		log.Warn("cuts are off: the agent may not change the Pod's routes (give it CAP_NET_ADMIN)", "err", err)
	} else {
		cfg.Router = podfault.Routes{}
	}
	a, err := podfault.New(cfg)
	if err != nil {
		return err
	}
	defer a.Stop()
	return serve.Until(ctx, time.Second, serve.Limit(&http.Server{Addr: *listen, Handler: a.Handler()}))
}
