package kube

import (
	"testing"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"
)

// A container the runtime failed to create is told from an elector that
// ran and died: only the first lets a caller run its set again.
func TestPodCrashesTellsAFailedStartFromACrash(t *testing.T) {
	terminated := func(reason string, code int32) v1.ContainerState {
		return v1.ContainerState{Terminated: &v1.ContainerStateTerminated{Reason: reason, ExitCode: code, Message: "m"}}
	}
	running := v1.ContainerState{Running: &v1.ContainerStateRunning{}}
	pod := func(s ...v1.ContainerStatus) *v1.Pod {
		return &v1.Pod{Status: v1.PodStatus{ContainerStatuses: s}}
	}
	for _, c := range []struct {
		name      string
		pod       *v1.Pod
		crashes   int
		startOnly bool
	}{
		{"running", pod(v1.ContainerStatus{Name: "elector", State: running}), 0, true},
		{"restarted after a failed start", pod(v1.ContainerStatus{Name: "elector", State: running, RestartCount: 1, LastTerminationState: terminated("StartError", 128)}), 1, true},
		{"failed to start, not yet restarted", pod(v1.ContainerStatus{Name: "elector", State: terminated("StartError", 128)}), 1, true},
		{"restarted after it ran and exited", pod(v1.ContainerStatus{Name: "elector", State: running, RestartCount: 1, LastTerminationState: terminated("Error", 2)}), 1, false},
		{"exited", pod(v1.ContainerStatus{Name: "elector", State: terminated("Completed", 0)}), 1, false},
		// After a failed start it ran and may have failed again: the
		// last state speaks for the last run only.
		{"restarted twice", pod(v1.ContainerStatus{Name: "elector", State: running, RestartCount: 2, LastTerminationState: terminated("StartError", 128)}), 1, false},
		{"one failed start beside a crash", pod(
			v1.ContainerStatus{Name: "elector", State: running, RestartCount: 1, LastTerminationState: terminated("StartError", 128)},
			v1.ContainerStatus{Name: "sidecar", State: terminated("OOMKilled", 137)}), 2, false},
		{"no state recorded", pod(v1.ContainerStatus{Name: "elector", State: running, RestartCount: 1}), 1, false},
	} {
		errs, startOnly := podCrashes("ns", c.pod)
		assert.Len(t, errs, c.crashes, c.name)
		if c.crashes > 0 {
			assert.Equal(t, c.startOnly, startOnly, c.name)
		}
	}
	// An init container's clean exit is its end, not a crash.
	init := &v1.Pod{Status: v1.PodStatus{InitContainerStatuses: []v1.ContainerStatus{{Name: "init", State: terminated("Completed", 0)}}}}
	errs, _ := podCrashes("ns", init)
	assert.Empty(t, errs)
	errs, _ = podCrashes("ns", pod(v1.ContainerStatus{Name: "elector", State: running, RestartCount: 1, LastTerminationState: terminated("StartError", 128)}))
	assert.EqualError(t, errs[0], "container elector of ns/ ended (restarted 1 times): StartError, exit 128: m")
}
