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
	for try := 1; ; try++ {
		r, err := run()
		if !errors.Is(err, kube.ErrStartFailed) || try == startTries {
			return r, err
		}
		env.Log.Warn("an elector's container failed to start; running the repetition again", append(attrs, "try", try, "err", err)...)
	}
}
