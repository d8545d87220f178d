package experiments

import (
	"context"
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

// Experiment is one entry of the catalogue.
type Experiment interface {
	Name() string
	// Summary is one line for `ringside list`.
	Summary() string
	// Backends lists the supported backends; the first is the default.
	Backends() []string
	// Reps is the default number of repetitions for a profile.
	Reps(profile string) int
	// Flags returns the experiment's parameters; every flag is recorded
	// in meta.json. Called once per run.
	Flags() *flag.FlagSet
	// Columns is the CSV header, units in the names.
	Columns() []string
	// Run emits one row per observation through env.
	Run(ctx context.Context, env *Env) error
	// Report summarises the experiment's CSV as a markdown section.
	Report(in *ReportInput) (string, error)
}

// Env is what a running experiment gets.
type Env struct {
	Seed     uint64
	Reps     int
	Profile  string
	Backend  string
	Dir      string // output directory, for experiments that keep extra files
	Log      *slog.Logger
	Progress *Progress
	sink     *Sink
}

// Emit writes one observation. Values must match Columns() in order.
func (e *Env) Emit(row Row) error { return e.sink.Write(row) }

// Registry holds the catalogue in the order experiments were registered.
type Registry struct{ list []Experiment }

// Register adds e; names must be unique.
func (r *Registry) Register(e Experiment) {
	if r.Lookup(e.Name()) != nil {
		panic("experiments: duplicate experiment " + e.Name()) // a programming error, caught by tests
	}
	r.list = append(r.list, e)
}

// Lookup returns the named experiment or nil.
func (r *Registry) Lookup(name string) Experiment {
	for _, e := range r.list {
		if e.Name() == name {
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
		names[i] = e.Name()
	}
	return names
}

// CheckBackend returns an error naming the valid backends when b is not one.
func CheckBackend(e Experiment, b string) error {
	if slices.Contains(e.Backends(), b) {
		return nil
	}
	return fmt.Errorf("experiment %s: backend %q not supported (want one of %s)", e.Name(), b, strings.Join(e.Backends(), ", "))
}
