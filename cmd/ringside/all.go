package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/ringside/ringside/experiments"
)

// runAll runs the catalogue, or the experiments --experiments names, each
// on its default backend or the first of --prefer it supports. A failed
// experiment does not stop the others; the error names every one that
// failed.
func runAll(ctx context.Context, reg *experiments.Registry, args []string, c common, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run all", flag.ContinueOnError)
	fs.SetOutput(stderr)
	s := c.define(fs)
	var only, prefer string
	s.StringVar(&only, "experiments", "RINGSIDE_EXPERIMENTS", "", "comma-separated experiments to run (default: the whole catalogue)")
	s.StringVar(&prefer, "prefer", "RINGSIDE_PREFER_BACKENDS", "", "comma-separated backends to use wherever an experiment has one of them (for example compose,docker)")
	if err := s.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("run all: unexpected argument %q", fs.Arg(0))
	}
	if c.backend != "" {
		return errors.New("run all: --backend applies to one experiment; each runs on its default backend (see --prefer)")
	}
	list, err := selectExperiments(reg, only)
	if err != nil {
		return err
	}
	preferred := splitList(prefer)
	var failed []string
	var errs []error
	for _, e := range list {
		c := c
		c.backend = preferredBackend(e.Spec().Backends, preferred)
		err := runOne(ctx, e, experiments.NewFlagSet(e), c, stdout, stderr)
		if errors.Is(err, experiments.ErrUnavailable) {
			fmt.Fprintf(stderr, "ringside: %s left out: %v\n", e.Spec().Name, err)
			continue
		}
		if err != nil {
			fmt.Fprintf(stderr, "ringside: %s failed: %v\n", e.Spec().Name, err)
			failed, errs = append(failed, e.Spec().Name), append(errs, err)
			if ctx.Err() != nil {
				break
			}
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("run all: %d experiment(s) failed (%s): %w", len(failed), strings.Join(failed, ", "), errors.Join(errs...))
	}
	return ctx.Err()
}

// preferredBackend is the first of preferred that backends has ("": none,
// the experiment's default); kind names the kubernetes backend here too.
func preferredBackend(backends, preferred []string) string {
	for _, b := range preferred {
		if b = experiments.CanonicalBackend(b); slices.Contains(backends, b) {
			return b
		}
	}
	return ""
}

// selectExperiments returns the catalogue, or the experiments named in
// the comma-separated list, in catalogue order; an unknown name is an
// error naming it.
func selectExperiments(reg *experiments.Registry, only string) ([]experiments.Experiment, error) {
	names := splitList(only)
	if len(names) == 0 {
		return reg.All(), nil
	}
	for _, n := range names {
		if reg.Lookup(n) == nil {
			return nil, fmt.Errorf("experiments: unknown experiment %q (known: %s)", n, strings.Join(reg.Names(), ", "))
		}
	}
	var out []experiments.Experiment
	for _, e := range reg.All() {
		if slices.Contains(names, e.Spec().Name) {
			out = append(out, e)
		}
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
