package incluster

import (
	"archive/tar"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func tarOf(t testing.TB, hs ...tar.Header) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range hs {
		body := strings.Repeat("x", int(h.Size))
		require.NoError(t, tw.WriteHeader(&h))
		_, err := tw.Write([]byte(body))
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	return b.Bytes()
}

// What Pack writes, Unpack gives back: the same files, nested folders
// included, and nothing else.
func TestPackUnpackRoundTrip(t *testing.T) {
	src := t.TempDir()
	files := map[string]string{"ring-failover.csv": "a,b\n1,2\n", "meta/ring-failover.json": "{}", "report.md": "# r\n", "empty.csv": ""}
	for name, body := range files {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(src, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(src, name), []byte(body), 0o600))
	}
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(src, "link")), "not a result: left out")
	var b bytes.Buffer
	require.NoError(t, Pack(&b, src))
	dst := t.TempDir()
	names, err := Unpack(&b, dst, MaxResults)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"ring-failover.csv", "meta/ring-failover.json", "report.md", "empty.csv"}, names)
	assert.Equal(t, files, readTree(t, dst))
}

func readTree(t testing.TB, dir string) map[string]string {
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			rel, _ := filepath.Rel(dir, p)
			out[filepath.ToSlash(rel)] = string(b)
		}
		return nil
	}))
	return out
}

// A hostile archive is refused by name and writes nothing outside the
// folder; a file that an earlier run left is not clobbered by a
// truncated one.
func TestUnpackRefusesHostileArchives(t *testing.T) {
	for _, c := range []struct {
		name string
		h    tar.Header
		says string
	}{
		{"parent", tar.Header{Name: "../evil", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}, "leaves"},
		{"nested parent", tar.Header{Name: "a/../../evil", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}, "leaves"},
		{"absolute", tar.Header{Name: "/tmp/evil", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}, "relative"},
		{"backslash", tar.Header{Name: `..\evil`, Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}, "relative"},
		{"symlink", tar.Header{Name: "link", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd", Mode: 0o777}, "regular"},
		{"hard link", tar.Header{Name: "hard", Typeflag: tar.TypeLink, Linkname: "/etc/passwd", Mode: 0o644}, "regular"},
		{"device", tar.Header{Name: "dev", Typeflag: tar.TypeChar, Mode: 0o644}, "regular"},
		{"dot", tar.Header{Name: ".", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}, "leaves"},
		{"too big", tar.Header{Name: "big", Typeflag: tar.TypeReg, Size: 100, Mode: 0o644}, "limit"},
	} {
		t.Run(c.name, func(t *testing.T) {
			parent := t.TempDir()
			dst := filepath.Join(parent, "results")
			_, err := Unpack(bytes.NewReader(tarOf(t, c.h)), dst, 50)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.says)
			assert.Empty(t, readTree(t, parent), "nothing written")
		})
	}
	t.Run("truncated", func(t *testing.T) {
		dst := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dst, "r.csv"), []byte("good"), 0o644))
		b := tarOf(t, tar.Header{Name: "r.csv", Typeflag: tar.TypeReg, Size: 2000, Mode: 0o644})
		_, err := Unpack(bytes.NewReader(b[:1000]), dst, MaxResults)
		require.Error(t, err)
		assert.Equal(t, map[string]string{"r.csv": "good"}, readTree(t, dst), "the earlier file survives whole")
	})
	t.Run("symlinked folder", func(t *testing.T) {
		parent := t.TempDir()
		dst := filepath.Join(parent, "results")
		outside := filepath.Join(parent, "outside")
		require.NoError(t, os.MkdirAll(dst, 0o755))
		require.NoError(t, os.MkdirAll(outside, 0o755))
		require.NoError(t, os.Symlink(outside, filepath.Join(dst, "sub")))
		_, err := Unpack(bytes.NewReader(tarOf(t, tar.Header{Name: "sub/x", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644})), dst, MaxResults)
		require.Error(t, err, "a link inside the folder leads nowhere outside it")
		assert.Empty(t, readTree(t, outside))
	})
}

// Whatever bytes arrive, Unpack writes only regular files inside its
// folder, at most its limit in all, and lists exactly what it wrote.
func FuzzUnpack(f *testing.F) {
	f.Add(tarOf(f, tar.Header{Name: "a.csv", Typeflag: tar.TypeReg, Size: 3, Mode: 0o644}))
	f.Add(tarOf(f, tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o755}, tar.Header{Name: "d/b", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}))
	f.Add(tarOf(f, tar.Header{Name: "../x", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, b []byte) {
		parent := t.TempDir()
		dst := filepath.Join(parent, "results")
		const limit = 4096
		names, _ := Unpack(bytes.NewReader(b), dst, limit)
		got := readTree(t, parent)
		total := 0
		for name, body := range got {
			require.True(t, strings.HasPrefix(name, "results/"), "%q written outside the folder", name)
			total += len(body)
		}
		require.LessOrEqual(t, total, limit)
		for _, n := range names {
			_, ok := got["results/"+n]
			require.True(t, ok, "listed %q, not written", n)
		}
		require.LessOrEqual(t, len(got), len(names), "wrote more than it listed")
	})
}
