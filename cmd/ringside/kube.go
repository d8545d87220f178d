package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/ringside/ringside/experiments/backend/kube"
	"github.com/ringside/ringside/experiments/backend/kube/controlplane"
	"github.com/ringside/ringside/internal/envflag"
)

// kubeCmd starts or stops a local control plane that outlives the command,
// for running experiments and kubectl against it by hand, or serves the
// API server of the experiments stack.
func kubeCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "up" && args[0] != "down" && args[0] != "serve") {
		return errors.New("kube: want up, down or serve")
	}
	if args[0] == "serve" {
		return kubeServe(ctx, args[1:], stderr)
	}
	fs := flag.NewFlagSet("kube "+args[0], flag.ContinueOnError)
	dir := fs.String("dir", ".kube", "state directory (PKI, etcd data, logs, kubeconfig)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	if args[0] == "down" {
		if err := controlplane.StopDir(abs); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "stopped the control plane in", abs)
		return nil
	}
	if _, err := os.Stat(filepath.Join(abs, "pids")); err == nil {
		return fmt.Errorf("a control plane already runs from %s: ringside kube down --dir %s first", abs, *dir)
	}
	cp, err := controlplane.Start(ctx, abs)
	if err != nil {
		return err
	}
	if err := cp.Detach(); err != nil {
		cp.Stop()
		return err
	}
	fmt.Fprintf(stdout, "kube-apiserver at %s\nkubeconfig: %s\n  export KUBECONFIG=%s\n  ringside run kube-distribution --kubeconfig %s\n",
		cp.URL, cp.Kubeconfig, cp.Kubeconfig, cp.Kubeconfig)
	return nil
}

// kubeServe runs the stack's kube-apiserver in the foreground against an
// etcd service (the kube-apiserver service of docker-compose.yml).
func kubeServe(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("kube serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	s := envflag.New(fs)
	var o controlplane.ServeOptions
	var names string
	s.StringVar(&o.Dir, "dir", "RINGSIDE_KUBE_DIR", "/var/lib/ringside-kube", "state directory (PKI, logs)")
	s.StringVar(&o.Etcd, "etcd", "RINGSIDE_KUBE_ETCD", "http://etcd:2379", "etcd client URL")
	s.IntVar(&o.Port, "port", "RINGSIDE_KUBE_PORT", 6443, "API server port, on every interface")
	s.StringVar(&names, "names", "RINGSIDE_KUBE_NAMES", "kube-apiserver", "comma-separated host names or IPs the API server is reached by (certificate)")
	s.StringVar(&o.Server, "server", "RINGSIDE_KUBE_SERVER", "https://kube-apiserver:6443", "server URL in the handed-over kubeconfig")
	s.StringVar(&o.Handoff, "handoff", "RINGSIDE_KUBE_HANDOFF", ":6444", "address serving GET /kubeconfig (keep it on a private network)")
	if err := s.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("kube serve: unexpected argument %q", fs.Arg(0))
	}
	if o.Port < 1 || o.Port > 65535 {
		return fmt.Errorf("kube serve: --port %d is not a TCP port", o.Port)
	}
	o.Names = splitList(names)
	o.Workers = kube.LocalWorkers
	o.Log = slog.New(slog.NewTextHandler(stderr, nil))
	if !strings.HasPrefix(o.Server, "https://") {
		return fmt.Errorf("kube serve: --server %q: want an https:// URL", o.Server)
	}
	return controlplane.Serve(ctx, o)
}
