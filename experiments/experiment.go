package experiments

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"slices"
	"strings"
)

// Profiles: quick is the default of `make experiments`; paper uses the
// source papers' repetition counts.
const (
	ProfileQuick = "quick"
	ProfilePaper = "paper"
)

// Spec is what the catalogue says about an experiment.
type Spec struct {
	Name string
	// Summary is one line for `ringside list`.
	Summary string
	// Backends lists the supported backends; the first is the default.
	Backends []string
	// Quick and Paper are the default repetitions of each profile; Paper
	// 0 means the same as Quick.
	Quick, Paper int
	// Row is a value of the experiment's row type (rows.go): its
	// csv-tagged fields are the CSV's header, units in the names.
	Row any
}

// Reps is the default number of repetitions for a profile.
func (s Spec) Reps(profile string) int {
	if profile == ProfilePaper && s.Paper > 0 {
		return s.Paper
	}
	return s.Quick
}

// Experiment is one entry of the catalogue.
type Experiment interface {
	Spec() Spec
	// Flags defines the experiment's parameters on fs, with their
	// defaults; every one is recorded in meta.json.
	Flags(fs *flag.FlagSet)
	// Run emits one row per observation through env.
	Run(ctx context.Context, env *Env) error
	// Report summarises the experiment's CSV as a markdown section.
	Report(in *ReportInput) (string, error)
}

// NewFlagSet returns a flag set holding e's own parameters at their
// defaults.
func NewFlagSet(e Experiment) *flag.FlagSet {
	fs := flag.NewFlagSet(e.Spec().Name, flag.ContinueOnError)
	e.Flags(fs)
	return fs
}

// Env is what a running experiment gets.
type Env struct {
	Seed    uint64
	Reps    int
	Profile string
	// Backend is the one asked for; an experiment that falls back to
	// another sets it to the one it used, and meta.json records both.
	Backend string
	Dir     string // output directory, for experiments that keep extra files
	// Cluster, when an experiment sets it, goes into meta.json.
	Cluster  map[string]any
	Log      *slog.Logger
	Progress *Progress
	name     string
	main     *atomicCSV
	extra    map[string]*atomicCSV
}

// Emit writes one observation, a value of the Spec's row type.
func (e *Env) Emit(row any) error { return e.main.Write(row) }

// CSV opens a second tidy CSV, OUT/NAME-suffix.csv, for observations of
// another shape (samples over time, events). Like the main CSV it is
// written under a temporary name and installed only when the run succeeds.
// One suffix opens one file; asking again returns the same sink.
func (e *Env) CSV(suffix string, proto any) (*Sink, error) {
	if e.extra == nil {
		e.extra = map[string]*atomicCSV{}
	}
	if f := e.extra[suffix]; f != nil {
		return f.Sink, nil
	}
	f, err := createCSV(e.Dir, e.name+"-"+suffix, proto)
	if err != nil {
		return nil, err
	}
	e.extra[suffix] = f
	return f.Sink, nil
}

// Registry holds the catalogue in the order experiments were registered.
type Registry struct{ list []Experiment }

// Register adds e; names must be unique.
func (r *Registry) Register(e Experiment) {
	if r.Lookup(e.Spec().Name) != nil {
		panic("experiments: duplicate experiment " + e.Spec().Name) // a programming error, caught by tests
	}
	r.list = append(r.list, e)
}

// Lookup returns the named experiment or nil.
func (r *Registry) Lookup(name string) Experiment {
	for _, e := range r.list {
		if e.Spec().Name == name {
			return e
		}
	}
	return nil
}

// All returns the catalogue.
func (r *Registry) All() []Experiment { return slices.Clone(r.list) }

// Names lists the experiment names.
func (r *Registry) Names() []string {
	names := make([]string, len(r.list))
	for i, e := range r.list {
		names[i] = e.Spec().Name
	}
	return names
}

// backendAliases maps the names a backend was known by to its name now:
// the kube experiments' Pods ran on "kind" before every family took one
// Kubernetes backend for any cluster.
var backendAliases = map[string]string{"kind": "kubernetes"}

// CanonicalBackend returns the backend b names now (b itself unless it is
// an old name).
func CanonicalBackend(b string) string {
	if now, ok := backendAliases[b]; ok {
		return now
	}
	return b
}

// CheckBackend returns an error naming the valid backends when b is not one.
func CheckBackend(e Experiment, b string) error {
	sp := e.Spec()
	b = CanonicalBackend(b)
	if slices.Contains(sp.Backends, b) {
		return nil
	}
	return fmt.Errorf("experiment %s: backend %q not supported (want one of %s)", sp.Name, b, strings.Join(sp.Backends, ", "))
}

// ErrUnavailable wraps the error of an experiment that cannot run on this
// machine at all (a tool it measures with is not installed): `ringside run
// all` reports it and goes on with the others.
var ErrUnavailable = errors.New("not available on this machine")
