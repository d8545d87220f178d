package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// --prefer picks each experiment's first preferred backend it has, and
// kind, the kube experiments' old backend name, is kubernetes.
func TestPreferredBackend(t *testing.T) {
	kube := []string{"kube", "kubernetes"}
	assert.Equal(t, "kubernetes", preferredBackend(kube, []string{"compose", "kind"}))
	assert.Equal(t, "kubernetes", preferredBackend(kube, []string{"kubernetes", "kube"}))
	assert.Equal(t, "kube", preferredBackend(kube, []string{"kube", "kind"}))
	assert.Equal(t, "", preferredBackend([]string{"sim"}, []string{"kind", "compose"}), "none: the default")
	assert.Equal(t, "", preferredBackend(kube, nil))
}
