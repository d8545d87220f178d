package experiments

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"
)

// Meta is written beside every CSV as EXPERIMENT.meta.json.
type Meta struct {
	Experiment string `json:"experiment"`
	Backend    string `json:"backend"`
	// Requested is the backend asked for when the run fell back to
	// another (lb-live without a Docker engine).
	Requested string            `json:"requested_backend,omitempty"`
	Profile   string            `json:"profile"`
	Seed      uint64            `json:"seed"`
	Reps      int               `json:"reps"`
	Params    map[string]string `json:"params"`
	// Cluster describes the Kubernetes cluster a kube experiment ran on
	// (version, nodes, workers).
	Cluster   map[string]any `json:"cluster,omitempty"`
	Rows      int            `json:"rows"`
	Command   []string       `json:"command,omitempty"`
	GitCommit string         `json:"git_commit"`
	GoVersion string         `json:"go_version"`
	Platform  string         `json:"platform"`
	CPUs      int            `json:"cpus"`
	Start     time.Time      `json:"start"`
	End       time.Time      `json:"end"`
}

// RunOptions are the common settings of `ringside run`.
type RunOptions struct {
	Seed    uint64
	Reps    int // 0: the profile's default
	Profile string
	Backend string // "": the experiment's default
	Out     string
	Command []string
	Status  io.Writer // progress and notes; nil discards
	TTY     bool
	Log     *slog.Logger
}

// Run runs e with its already-parsed flags and writes OUT/NAME.csv and
// OUT/NAME.meta.json. The CSV is written under a temporary name and renamed
// at the end, so a failed run never replaces the last good result.
func Run(ctx context.Context, e Experiment, flags *flag.FlagSet, o RunOptions) (Meta, error) {
	if o.Profile == "" {
		o.Profile = ProfileQuick
	}
	if o.Profile != ProfileQuick && o.Profile != ProfilePaper {
		return Meta{}, fmt.Errorf("profile %q: want %s or %s", o.Profile, ProfileQuick, ProfilePaper)
	}
	sp := e.Spec()
	if o.Backend == "" {
		o.Backend = sp.Backends[0]
	}
	o.Backend = CanonicalBackend(o.Backend)
	if err := CheckBackend(e, o.Backend); err != nil {
		return Meta{}, err
	}
	if o.Reps < 0 {
		return Meta{}, fmt.Errorf("reps %d: must not be negative", o.Reps)
	}
	if o.Reps == 0 {
		o.Reps = sp.Reps(o.Profile)
	}
	if o.Status == nil {
		o.Status = io.Discard
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(o.Status, nil))
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return Meta{}, fmt.Errorf("output directory: %w", err)
	}
	meta := Meta{
		Experiment: sp.Name, Backend: o.Backend, Profile: o.Profile, Seed: o.Seed, Reps: o.Reps,
		Params: map[string]string{}, Command: o.Command, GitCommit: gitCommit(),
		GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH, CPUs: runtime.NumCPU(),
		Start: time.Now().UTC(),
	}
	if flags != nil {
		flags.VisitAll(func(f *flag.Flag) { meta.Params[f.Name] = f.Value.String() })
	}

	main, err := createCSV(o.Out, sp.Name, sp.Row)
	if err != nil {
		return Meta{}, err
	}
	env := &Env{Seed: o.Seed, Reps: o.Reps, Profile: o.Profile, Backend: o.Backend, Dir: o.Out, Log: o.Log, name: sp.Name, main: main}
	env.Progress = NewProgress(o.Status, o.TTY, sp.Name, 0)
	runErr := e.Run(ctx, env)
	env.Progress.Finish()
	// The extra CSVs go first, the main one last: a reader that finds the
	// new main CSV finds the extras of the same run beside it.
	for _, f := range env.extra {
		if err := f.close(runErr == nil); err != nil && runErr == nil {
			runErr = err
		}
	}
	if err := main.close(runErr == nil); err != nil && runErr == nil {
		runErr = err
	}
	if runErr != nil {
		return Meta{}, fmt.Errorf("run %s: %w", sp.Name, runErr)
	}
	meta.Rows, meta.End, meta.Cluster = main.Rows(), time.Now().UTC(), env.Cluster
	if env.Backend != o.Backend {
		meta.Backend, meta.Requested = env.Backend, o.Backend
	}
	b, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return Meta{}, err
	}
	if err := WriteFile(filepath.Join(o.Out, sp.Name+".meta.json"), append(b, '\n')); err != nil {
		return Meta{}, fmt.Errorf("write meta: %w", err)
	}
	return meta, nil
}

// BuildCommit is the source commit stamped in at link time (-X), by the
// Dockerfile, whose build has no VCS stamp.
var BuildCommit string

// gitCommit names the source the binary came from: the link-time stamp or
// the VCS stamp when the build has one, else the checkout it runs in (go
// run builds without one).
func gitCommit() string {
	if BuildCommit != "" {
		return BuildCommit
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		rev, dirty := "", false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if rev != "" {
			if dirty {
				rev += "-dirty"
			}
			return rev
		}
	}
	out, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	rev := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		rev += "-dirty"
	}
	return rev
}

// RunArgs parses args as e's own flags, runs e with o, and returns the CSV
// it wrote, raw and parsed: one call for scripts and tests that drive an
// experiment the way `ringside run` does.
func RunArgs(ctx context.Context, e Experiment, args []string, o RunOptions) (*Table, []byte, error) {
	fs := NewFlagSet(e)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		return nil, nil, fmt.Errorf("%s flags: %w", e.Spec().Name, err)
	}
	if _, err := Run(ctx, e, fs, o); err != nil {
		return nil, nil, err
	}
	raw, err := os.ReadFile(filepath.Join(o.Out, e.Spec().Name+".csv"))
	if err != nil {
		return nil, nil, err
	}
	t, err := ReadTable(bytes.NewReader(raw))
	return t, raw, err
}
