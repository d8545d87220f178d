package incluster

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// MaxResults bounds what Unpack writes: an experiment's results are
// megabytes; a gigabyte is a runner gone wrong, or a hostile one.
const MaxResults = 1 << 30

// Pack writes the regular files under dir to w as a tar stream, with
// slash-separated names relative to dir.
func Pack(w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil // directories come with their files; nothing else is a result
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: filepath.ToSlash(rel), Mode: 0o644, Size: st.Size(), ModTime: st.ModTime()}); err != nil {
			return err
		}
		_, err = io.CopyN(tw, f, st.Size())
		return err
	})
	if err != nil {
		return fmt.Errorf("pack %s: %w", dir, err)
	}
	return tw.Close()
}

// Unpack writes the regular files of the tar stream r under dir and
// returns their names. The stream comes from a Pod, so it is read as
// hostile: a name that would land outside dir (absolute, "..", a
// backslash), a link, a device or anything but a regular file is refused
// by name, and at most limit bytes are written. A file is written
// whole or not at all (under a temporary name, then renamed), so an
// earlier result of the same name survives a broken stream.
func Unpack(r io.Reader, dir string, limit int64) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("unpack: %w", err)
	}
	// Every path is opened through the root: a symbolic link inside dir
	// cannot lead a file outside it either.
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("unpack: %w", err)
	}
	defer root.Close()
	tr := tar.NewReader(r)
	var names []string
	var total int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names, nil
		}
		if err != nil {
			return names, fmt.Errorf("unpack: %w", err)
		}
		name, err := localName(h.Name)
		if err != nil {
			return names, fmt.Errorf("unpack: %q: %w", h.Name, err)
		}
		if h.Typeflag == tar.TypeDir {
			continue
		}
		if h.Typeflag != tar.TypeReg {
			return names, fmt.Errorf("unpack: %q: type %q is not a regular file", h.Name, h.Typeflag)
		}
		if h.Size < 0 || h.Size > limit-total {
			return names, fmt.Errorf("unpack: %q: %d bytes would pass the limit of %d", h.Name, h.Size, limit)
		}
		total += h.Size
		if err := writeFile(root, name, tr, h.Size); err != nil {
			return names, fmt.Errorf("unpack: %q: %w", h.Name, err)
		}
		names = append(names, name)
	}
}

// localName checks that a tar name stays inside the folder it is
// unpacked to, on any system.
func localName(name string) (string, error) {
	if strings.ContainsAny(name, "\\\x00") || strings.HasPrefix(name, "/") {
		return "", errors.New("not a relative slash-separated path")
	}
	clean := path.Clean(name)
	if !filepath.IsLocal(filepath.FromSlash(clean)) || clean == "." {
		return "", errors.New("leaves the results folder")
	}
	return clean, nil
}

func writeFile(root *os.Root, name string, r io.Reader, size int64) error {
	if err := root.MkdirAll(path.Dir(name), 0o755); err != nil {
		return err
	}
	tmp := path.Join(path.Dir(name), ".unpack-"+path.Base(name))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer root.Remove(tmp)
	if _, err := io.CopyN(f, r, size); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return root.Rename(tmp, name)
}
