// Command ringside runs the experiment catalogue and reports on its results.
//
//	ringside list
//	ringside run EXPERIMENT|all [--backend B] [--seed N] [--reps N] [--profile quick|paper] [--out DIR] [experiment flags]
//	ringside report DIR
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"

	"k8s.io/client-go/rest"

	"github.com/ringside/ringside/experiments"
	"github.com/ringside/ringside/experiments/catalog"
	"github.com/ringside/ringside/internal/envflag"
	"github.com/ringside/ringside/internal/klogslog"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A deprecated API answers every request with the same warning
	// (LeaseCandidate's v1alpha2: 327 klog lines in one catalogue run);
	// each is said once, as kubectl does.
	rest.SetDefaultWarningHandler(rest.NewWarningWriter(os.Stderr, rest.WarningWriterOptions{Deduplicate: true}))
	quietClientGo()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "ringside:", err)
		}
		os.Exit(2)
	}
}

// quietClientGo drops what client-go logs through klog: it logs when a
// log stream or a request it reads is cancelled (every namespace's end of
// a kube experiment, on either backend), and the backends report their
// own errors. klog's output sent nowhere still copied its errors to
// stderr (its stderrthreshold): "Unexpected error when reading response
// body: context canceled" on a kind run's terminal.
func quietClientGo() {
	klogslog.Install()
	klogslog.Use(slog.New(slog.DiscardHandler))
}

const usage = `usage:
  ringside list
  ringside run EXPERIMENT|all [--backend B] [--seed N] [--reps N] [--profile quick|paper] [--out DIR] [experiment flags]
  ringside run EXPERIMENT --help     (the experiment's own flags)
  ringside report DIR
  ringside kube up [--dir DIR]       (a local etcd + kube-apiserver; prints its kubeconfig)
  ringside kube down [--dir DIR]
  ringside kube serve                (the API server of the experiments stack, docker-compose.yml)
  ringside stack [run all flags]     (the experiments service of docker-compose.yml)
  ringside cluster [--kubeconfig K] [--out DIR] -- run EXPERIMENT|all [flags]
                                     (runs them in a Job on a Kubernetes cluster; results copied to DIR)
  ringside job -- run …              (the in-cluster side of ringside cluster)
  ringside podfault                  (a ring Pod's fault agent, on the kubernetes backend)`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return errors.New("no command")
	}
	switch args[0] {
	case "list":
		return list(stdout)
	case "run":
		return runCmd(ctx, args[1:], stdout, stderr)
	case "report":
		if len(args) != 2 {
			return errors.New("report: want exactly one directory")
		}
		// A report reads files anyone may have edited: one that takes
		// too long still ends on Ctrl-C or SIGTERM (its partial output
		// is never installed: report.md is renamed into place whole).
		type result struct {
			path string
			err  error
		}
		done := make(chan result, 1)
		go func() {
			path, err := experiments.WriteReport(args[1], catalog.New())
			done <- result{path, err}
		}()
		select {
		case r := <-done:
			if r.path != "" {
				fmt.Fprintln(stdout, "wrote", r.path)
			}
			return r.err
		case <-ctx.Done():
			return fmt.Errorf("report %s: interrupted", args[1])
		}
	case "stack":
		return stackCmd(ctx, args[1:], stdout, stderr)
	case "kube":
		return kubeCmd(ctx, args[1:], stdout, stderr)
	case "cluster":
		return clusterCmd(ctx, args[1:], stderr)
	case "job":
		return jobCmd(ctx, args[1:], stdout, stderr)
	case "podfault":
		return podfaultCmd(ctx, args[1:], stderr)
	case "help", "-h", "--help":
		fmt.Fprintln(stdout, usage)
		return nil
	}
	fmt.Fprintln(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

func list(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "EXPERIMENT\tBACKENDS\tQUICK REPS\tPAPER REPS\tWHAT")
	for _, e := range catalog.New().All() {
		sp := e.Spec()
		fmt.Fprintf(tw, "%s\t%v\t%d\t%d\t%s\n", sp.Name, sp.Backends, sp.Reps(experiments.ProfileQuick), sp.Reps(experiments.ProfilePaper), sp.Summary)
	}
	return tw.Flush()
}

// common holds the flags every experiment takes, with environment fallbacks.
type common struct {
	backend, profile, out string
	seed                  uint64
	reps                  int
}

// define adds the common flags to fs; parse through the returned Set, so a
// malformed RINGSIDE_* value is an error naming the variable.
func (c *common) define(fs *flag.FlagSet) *envflag.Set {
	s := envflag.New(fs)
	s.StringVar(&c.backend, "backend", "RINGSIDE_BACKEND", "", "backend (default: the experiment's first)")
	s.StringVar(&c.profile, "profile", "RINGSIDE_PROFILE", experiments.ProfileQuick, "quick or paper")
	s.StringVar(&c.out, "out", "RINGSIDE_OUT", "results", "output directory")
	s.Uint64Var(&c.seed, "seed", "RINGSIDE_SEED", 1, "master seed; every random choice derives from it")
	s.IntVar(&c.reps, "reps", "RINGSIDE_REPS", 0, "repetitions (default: the profile's)")
	return s
}

func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "" || args[0][0] == '-' {
		return errors.New("run: name an experiment (see ringside list) or all")
	}
	reg := catalog.New()
	name, args := args[0], args[1:]
	var c common
	if name == "all" {
		return runAll(ctx, reg, args, c, stdout, stderr)
	}
	e := reg.Lookup(name)
	if e == nil {
		return fmt.Errorf("run: unknown experiment %q (known: %v)", name, reg.Names())
	}
	// One command line sets both the experiment's own flags and the
	// common ones: the experiment's set shares its values with the line's.
	own := experiments.NewFlagSet(e)
	fs := flag.NewFlagSet("run "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	own.VisitAll(func(f *flag.Flag) { fs.Var(f.Value, f.Name, f.Usage) })
	if err := c.define(fs).Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("run %s: unexpected argument %q", name, fs.Arg(0))
	}
	return runOne(ctx, e, own, c, stdout, stderr)
}

// runOne runs e with its own flags (already parsed) and the common settings.
func runOne(ctx context.Context, e experiments.Experiment, own *flag.FlagSet, c common, stdout, stderr io.Writer) error {
	meta, err := experiments.Run(ctx, e, own, experiments.RunOptions{
		Seed: c.seed, Reps: c.reps, Profile: c.profile, Backend: c.backend, Out: c.out,
		Command: os.Args, Status: stderr, TTY: isTTY(stderr),
		Log: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %d rows → %s/%s.csv (backend %s, seed %d, %d reps, %s)\n",
		meta.Experiment, meta.Rows, c.out, meta.Experiment, meta.Backend, meta.Seed, meta.Reps, meta.End.Sub(meta.Start).Round(1e6))
	return nil
}

func isTTY(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && experiments.IsTerminal(f)
}
