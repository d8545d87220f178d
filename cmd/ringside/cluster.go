package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/ringside/ringside/experiments"
	"github.com/ringside/ringside/experiments/backend/incluster"
	"github.com/ringside/ringside/experiments/backend/kube"
	"github.com/ringside/ringside/experiments/backend/lbstack"
	"github.com/ringside/ringside/experiments/backend/ringnodes"
	"github.com/ringside/ringside/experiments/catalog"
	"github.com/ringside/ringside/internal/envflag"
	"github.com/ringside/ringside/internal/serve"
)

// clusterCmd runs a ringside command line (run EXPERIMENT|all …) in a Job
// on a Kubernetes cluster and copies its results here (package
// incluster).
func clusterCmd(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	s := envflag.New(fs)
	var o incluster.Options
	var kubeconfig string
	s.StringVar(&kubeconfig, "kubeconfig", "RINGSIDE_KUBECONFIG", "", "the cluster (default: "+kube.KindKubeconfig+" when make kind-up wrote it, else $KUBECONFIG or ~/.kube/config)")
	s.StringVar(&o.Image, "image", ringnodes.RunnerImageEnv, ringnodes.DefaultRunnerImage, "the runner image, present on the cluster's nodes (make runner-image; kind load docker-image)")
	s.StringVar(&o.RedisImage, "redis-image", lbstack.RedisImageEnv, "redis:7-bookworm", "lb-live's Redis Pod's image, present on the nodes (make base-images; kind load docker-image)")
	s.StringVar(&o.Out, "out", "RINGSIDE_OUT", "results/kubernetes", "the host's results folder")
	s.DurationVar(&o.Timeout, "timeout", "RINGSIDE_CLUSTER_TIMEOUT", 2*time.Hour, "the run's limit on the cluster")
	if err := s.Parse(args); err != nil {
		return err
	}
	o.Args = fs.Args()
	if len(o.Args) == 0 || o.Args[0] != "run" {
		return errors.New("cluster: after the flags, the ringside command line to run there: -- run EXPERIMENT|all [flags]")
	}
	if kubeconfig == "" {
		if _, err := os.Stat(kube.KindKubeconfig); err == nil {
			kubeconfig = kube.KindKubeconfig
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return fmt.Errorf("cluster: kubeconfig: %w", err)
	}
	o.Config, o.Log = rc, stderr
	err = incluster.Run(ctx, o)
	// One report over everything the folder holds, earlier runs' too.
	if path, rerr := experiments.WriteReport(o.Out, catalog.New()); path != "" {
		fmt.Fprintf(stderr, "cluster: results and %s in %s\n", filepath.Base(path), o.Out)
	} else if err == nil {
		err = rerr
	}
	return err
}

// jobCmd is the in-cluster side: it runs the command line after -- into
// --dir and serves the results until it is told to stop.
func jobCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("job", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "/results", "results folder")
	listen := fs.String("listen", fmt.Sprintf(":%d", incluster.JobPort), "where the host fetches status and results")
	if err := fs.Parse(args); err != nil {
		return err
	}
	line := fs.Args()
	if len(line) == 0 || line[0] != "run" {
		return errors.New("job: after the flags, the ringside command line to run: -- run EXPERIMENT|all [flags]")
	}
	j := &incluster.Job{Dir: *dir}
	go func() {
		err := run(ctx, append(append([]string{}, line...), "--out", *dir), stdout, stderr)
		slog.Info("job: run done; serving the results", "err", err)
		j.Finish(err)
	}()
	return serve.Until(ctx, time.Second, serve.Limit(&http.Server{Addr: *listen, Handler: j.Handler()}))
}
