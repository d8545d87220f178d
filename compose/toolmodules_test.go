package compose

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The Dockerfile's Kubernetes, CoreDNS and compose v2 stages start from
// its deps stage, whose build cache holds every package of another module that
// ringside's commands import — client-go, the API types, protobuf and
// hundreds more that those tools import too. They find them compiled only
// where the tool's module builds them from the same module versions: a
// module at another version, and every package that imports it, compiles
// twice on a fresh machine.
func TestToolsShareRingsidesModules(t *testing.T) {
	list := exec.Command("go", "list", "-deps", "-f",
		"{{with .Module}}{{.Path}} {{with .Replace}}{{.Version}}{{else}}{{.Version}}{{end}}{{end}}", "./cmd/...")
	list.Dir = ".."
	list.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := list.Output()
	require.NoError(t, err, "go list: %s", stderrOf(err))
	ours := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if path, version, ok := strings.Cut(line, " "); ok && version != "" {
			ours[path] = version
		}
	}
	require.Contains(t, ours, "k8s.io/client-go", "ringside's commands import client-go")

	// Modules a tool keeps at its own version, and why: none of the
	// packages they provide is one both builds import.
	kept := map[string]map[string]string{
		"kubernetes": {"github.com/containerd/errdefs": "v1.0 drops FromGRPC, which the kubelet's cAdvisor calls"},
	}
	for _, tool := range []string{"kubernetes", "coredns", "compose"} {
		t.Run(tool, func(t *testing.T) {
			theirs := requirements(t, "tools/"+tool+"/go.mod")
			var differ []string
			shared := 0
			for path, v := range theirs {
				if ours[path] == "" || kept[tool][path] != "" {
					continue
				}
				shared++
				if ours[path] != v {
					differ = append(differ, fmt.Sprintf("%s@%s (ringside: %s)", path, v, ours[path]))
				}
			}
			slices.Sort(differ)
			assert.Greater(t, shared, 40, "modules both builds use")
			assert.Empty(t, differ, "tools/%s builds these at versions other than ringside's commands: "+
				"cd tools/%[1]s && go get MODULE@VERSION... && go mod tidy", tool)
		})
	}
}

// requirements are the module versions a go.mod selects, replacements
// applied, as `go mod edit -json` reads the file.
func requirements(t *testing.T, gomod string) map[string]string {
	edit := exec.Command("go", "mod", "edit", "-json", gomod)
	edit.Dir = ".."
	out, err := edit.Output()
	require.NoError(t, err, "go mod edit %s: %s", gomod, stderrOf(err))
	type version struct{ Path, Version string }
	var mod struct {
		Require []version
		Replace []struct{ Old, New version }
	}
	require.NoError(t, json.Unmarshal(out, &mod), gomod)
	selected := map[string]string{}
	for _, r := range mod.Require {
		selected[r.Path] = r.Version
	}
	for _, r := range mod.Replace {
		selected[r.Old.Path] = r.New.Version
	}
	return selected
}

// stderrOf is what a failed command wrote to its standard error.
func stderrOf(err error) string {
	if exit, ok := err.(*exec.ExitError); ok {
		return string(exit.Stderr)
	}
	return ""
}
