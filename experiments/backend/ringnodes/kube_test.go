package ringnodes

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
)

// The ring's Pods get what the faults need and nothing more: no API
// token, root only for the agent with NET_ADMIN added and nothing else,
// the secret from the Secret (never in a value or an argument), the
// run's settings in the environment.
func TestRingPodsLeastPrivilege(t *testing.T) {
	k := &Kube{image: "ringside/runner:test", env: []string{"RINGNODE_SUSPECT=700ms", "RINGNODE_ELECTION=franklin"}, secret: "0123456789abcdef0123"}
	ss := k.statefulSet(3, map[string]string{"app.kubernetes.io/name": "ringnode"})
	require.Equal(t, int32(3), *ss.Spec.Replicas)
	pod := ss.Spec.Template.Spec
	assert.False(t, *pod.AutomountServiceAccountToken, "ringnode needs no API access")
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	assert.Equal(t, []string{"/ringside", "podfault"}, c.Command)
	assert.Empty(t, c.Args)
	assert.Equal(t, []v1.Capability{"NET_ADMIN"}, c.SecurityContext.Capabilities.Add)
	assert.Nil(t, c.SecurityContext.Privileged)
	env := map[string]v1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
		assert.NotContains(t, e.Value, k.secret, e.Name)
	}
	require.NotNil(t, env["RINGNODE_SECRET"].ValueFrom)
	assert.Equal(t, "ringnode", env["RINGNODE_SECRET"].ValueFrom.SecretKeyRef.Name)
	assert.Equal(t, "700ms", env["RINGNODE_SUSPECT"].Value)
	assert.Equal(t, "franklin", env["RINGNODE_ELECTION"].Value)
	assert.True(t, strings.HasPrefix(env["RINGNODE_ADDR"].Value, "$(POD_IP):"), "identity from the Pod's IP")
	assert.Equal(t, "/healthz", c.ReadinessProbe.HTTPGet.Path, "ready when the agent is: the runner starts the servers")
}
