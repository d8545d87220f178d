package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The ring's secret never shows in podfault's usage; the in-cluster
// commands refuse a command line that is not a run, and a malformed
// environment value, by name.
func TestPodfaultAndClusterRefuseClearly(t *testing.T) {
	const secret = "s3cret-value-0123456789"
	t.Setenv("RINGNODE_SECRET", secret)
	out, errb, err := cli("podfault", "--help")
	assert.Error(t, err)
	assert.Contains(t, errb, "-secret")
	assert.NotContains(t, out+errb, secret)

	_, _, err = cli("cluster", "--kubeconfig", "/nonexistent", "--", "report", "x")
	assert.ErrorContains(t, err, "run EXPERIMENT|all")
	_, _, err = cli("job", "--", "kube", "up")
	assert.ErrorContains(t, err, "run EXPERIMENT|all")
	t.Setenv("RINGSIDE_CLUSTER_TIMEOUT", "soon")
	_, _, err = cli("cluster", "--", "run", "ring-failover")
	assert.ErrorContains(t, err, "RINGSIDE_CLUSTER_TIMEOUT")
}
