package compose

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The Dockerfile compiles the packages image-deps.txt names before it
// copies ringside's source. A package the list lacks compiles again in
// every image build; one it names that go.mod no longer provides breaks
// them all. Either way the list is rewritten: make image-deps.
func TestImageDepsAreCurrent(t *testing.T) {
	fresh := filepath.Join(t.TempDir(), "image-deps.txt")
	cmd := exec.Command("make", "-s", "--no-print-directory", "image-deps", "IMAGE_DEPS="+fresh)
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	want, err := os.ReadFile(fresh)
	require.NoError(t, err)
	have, err := os.ReadFile("../image-deps.txt")
	require.NoError(t, err)
	assert.Equal(t, string(want), string(have), "image-deps.txt is not what ./cmd/... imports: run make image-deps")
}
