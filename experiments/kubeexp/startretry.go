package kubeexp

import (
	"errors"

	"github.com/ringside/ringside/experiments"
	"github.com/ringside/ringside/experiments/backend/kube"
)

// startTries bounds the runs of one repetition whose electors' containers
// the runtime failed to start.
const startTries = 3

// againOnFailedStart runs one repetition and, when the runtime failed to
// start one of its electors' containers (kube.ErrStartFailed: the
// platform's failure, not the algorithm's — on kind, runc's "unable to
// create new parent process"), runs it again, whole, up to startTries runs
// in all; anything else, success or error, ends it at once. run must
// deploy into a fresh namespace each time and leave the cluster as it
// found it. attrs name the repetition in the warning.
func againOnFailedStart[T any](env *experiments.Env, run func() (T, error), attrs ...any) (T, error) {
	return againOn(env, kube.ErrStartFailed, startTries, "an elector's container failed to start; running the repetition again", run, attrs...)
}

// againOn runs run until its error is not target, at most tries runs in
// all, warning with msg and attrs before each run again.
func againOn[T any](env *experiments.Env, target error, tries int, msg string, run func() (T, error), attrs ...any) (T, error) {
	for try := 1; ; try++ {
		r, err := run()
		if !errors.Is(err, target) || try >= tries {
			return r, err
		}
		env.Log.Warn(msg, append(attrs, "try", try, "err", err)...)
	}
}
