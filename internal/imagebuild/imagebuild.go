// Package imagebuild makes ringside's binaries and their images FROM
// scratch: there is no registry to pull a base from (DESIGN §6).
package imagebuild

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ModuleRoot is the root of the ringside checkout that contains the
// working directory: the folder whose go.mod declares the module.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.HasPrefix(string(b), "module github.com/ringside/ringside\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the ringside checkout")
		}
		dir = parent
	}
}

// Static builds pkg as a static binary into the user cache and returns
// its path. The go command's build cache makes repeated calls cheap.
func Static(ctx context.Context, pkg string) (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	// One folder per checkout: two checkouts building at once (a test run
	// beside a development tree) must not swap each other's binaries.
	root, err := ModuleRoot()
	if err != nil {
		root, _ = os.Getwd()
	}
	sum := sha256.Sum256([]byte(root))
	out := filepath.Join(dir, "ringside", "bin", hex.EncodeToString(sum[:6]), filepath.Base(pkg))
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v: %s", pkg, err, strings.TrimSpace(string(b)))
	}
	return out, nil
}

// Build builds image from the static binary of pkg and dockerfile, which
// copies the binary by its base name (the last element of pkg). Tests use
// it to never run a stale image; the layer cache keeps it cheap.
func Build(ctx context.Context, image, pkg string, dockerfile []byte) error {
	bin, err := Static(ctx, pkg)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "ringside-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	b, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, filepath.Base(pkg)), b, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), dockerfile, 0o644); err != nil {
		return err
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "docker", "build", "-q", "-t", image, dir)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("docker build %s: %v: %s", image, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
