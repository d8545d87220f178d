package ring

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The guide's worked example is ring/lelann.go, whole, and its registry
// entry is the one init registers: the code a researcher copies is the
// code the conformance suite runs.
func TestGuideExampleIsLeLann(t *testing.T) {
	doc, err := os.ReadFile("../docs/election-algorithms.md")
	require.NoError(t, err)
	blocks := goBlocks(string(doc))
	src, err := os.ReadFile("lelann.go")
	require.NoError(t, err)
	require.Contains(t, blocks, string(src), "docs/election-algorithms.md shows ring/lelann.go whole")

	reg, err := os.ReadFile("algorithm.go")
	require.NoError(t, err)
	found := false
	for _, b := range blocks {
		if strings.Contains(b, "Register(Algorithm{") {
			require.Contains(t, string(reg), b, "the guide's registry entry is init's")
			found = true
		}
	}
	require.True(t, found, "the guide shows the registry entry")
}

// goBlocks returns the contents of the ```go fences of a markdown text.
func goBlocks(md string) []string {
	var out []string
	for {
		i := strings.Index(md, "```go\n")
		if i < 0 {
			return out
		}
		md = md[i+len("```go\n"):]
		j := strings.Index(md, "```")
		if j < 0 {
			return out
		}
		out = append(out, md[:j])
		md = md[j+3:]
	}
}
