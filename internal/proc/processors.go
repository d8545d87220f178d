package proc

import (
	"os"
	"slices"
)

// OneProcessor returns env with GOMAXPROCS=1 added, for a Go child that
// runs among many like it on a machine of few cores: with Go's default
// every runtime starts and keeps a thread per core, and work handed from
// one process to the next waits on their scheduling (ringnode's hops,
// the electors' starts; docs/ringnode.md, docs/bld-optimistic.md). When
// this process's own caller set GOMAXPROCS, env comes back as it is: the
// caller chose, and a child started with os.Environ() inherits the
// choice.
func OneProcessor(env []string) []string {
	if _, set := os.LookupEnv("GOMAXPROCS"); set {
		return env
	}
	return append(slices.Clip(env), "GOMAXPROCS=1")
}
