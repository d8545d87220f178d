package purity

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cores are the pure state machines: every algorithm and protocol role
// that runs in the seeded simulator as on the network.
var cores = []string{
	"github.com/ringside/ringside/ring",
	"github.com/ringside/ringside/ring/coordinator",
	"github.com/ringside/ringside/ring/membership",
	"github.com/ringside/ringside/ring/lease",
	"github.com/ringside/ringside/agent/lifecycle",
	"github.com/ringside/ringside/agent/score",
	"github.com/ringside/ringside/k8s/podnet",
	"github.com/ringside/ringside/balancer/pick",
	"github.com/ringside/ringside/bld/balance",
	"github.com/ringside/ringside/bld/strategy",
}

// forbidden are the packages no core may reach, even through another
// package: I/O and Kubernetes belong to the shells. os is not among them
// because fmt imports it; a core's own code must not (checked below).
func forbidden(path string) bool {
	return slices.Contains([]string{"net", "net/http", "os/exec"}, path) || strings.HasPrefix(path, "k8s.io/")
}

// clockCalls are the functions that read the wall clock: a core takes its
// time from Tick or from its caller.
var clockCalls = []string{"Now", "Since", "Until", "Sleep", "After", "Tick", "NewTimer", "NewTicker", "AfterFunc"}

type listed struct {
	ImportPath, Dir string
	GoFiles         []string
	Imports, Deps   []string
	Module          *struct{ Path string }
}

func list(t *testing.T, pkgs ...string) []listed {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-deps", "-json"}, pkgs...)...).Output()
	require.NoError(t, err, "go list")
	var all []listed
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else {
			require.NoError(t, err)
		}
		all = append(all, p)
	}
	return all
}

// impurities lists what makes the core at path impure: a forbidden package
// anywhere below it, os imported by ringside's own code below it, or a
// wall-clock call in its own files.
func impurities(t *testing.T, path string) []string {
	var found []string
	for _, p := range list(t, path) {
		if forbidden(p.ImportPath) {
			found = append(found, "depends on "+p.ImportPath)
		}
		if p.Module != nil && p.Module.Path == "github.com/ringside/ringside" {
			touch(t, p.Dir)
			if slices.Contains(p.Imports, "os") {
				found = append(found, p.ImportPath+" imports os")
			}
		}
		if p.ImportPath != path {
			continue
		}
		fset := token.NewFileSet()
		for _, f := range p.GoFiles {
			file, err := parser.ParseFile(fset, filepath.Join(p.Dir, f), nil, 0)
			require.NoError(t, err)
			timeName := ""
			for _, im := range file.Imports {
				if im.Path.Value == `"time"` {
					timeName = "time"
					if im.Name != nil {
						timeName = im.Name.Name
					}
				}
			}
			if timeName == "" {
				continue
			}
			ast.Inspect(file, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == timeName && slices.Contains(clockCalls, sel.Sel.Name) {
					found = append(found, fmt.Sprintf("%s: time.%s", fset.Position(sel.Pos()), sel.Sel.Name))
				}
				return true
			})
		}
	}
	return found
}

// touch reads a package's folder and Go files through the os package, so
// that go test's cache, which cannot see into `go list`, keys this test's
// result on them: a file added to a core, or an import changed, reruns it.
func touch(t *testing.T, dir string) {
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".go") {
			_, err := os.ReadFile(filepath.Join(dir, e.Name()))
			require.NoError(t, err)
		}
	}
}

func TestCoresArePure(t *testing.T) {
	for _, c := range cores {
		assert.Empty(t, impurities(t, c), "%s is a pure core", c)
	}
}

// The guard itself: a package that reaches the network and reads the
// clock is caught (the shells are, by design).
func TestTheGuardCatchesAShell(t *testing.T) {
	got := impurities(t, "github.com/ringside/ringside/ring/transport")
	assert.Contains(t, got, "depends on net")
	assert.True(t, slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, "time.") }), "%v", got)
}
