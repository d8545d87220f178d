// Package imagebuild makes ringside's binaries and their images FROM
// scratch: there is no registry to pull a base from (DESIGN §6).
package imagebuild

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/moby/moby/client"

	"github.com/ringside/ringside/internal/dockerapi"
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

// BinariesEnv names a folder of prebuilt static binaries, by base name.
// The experiments image sets it: it has no Go toolchain and no source,
// only the binaries its builder stage made.
const BinariesEnv = "RINGSIDE_BINARIES"

// Static builds pkg as a static binary into the user cache and returns
// its path. The go command's build cache makes repeated calls cheap.
// With $RINGSIDE_BINARIES set it returns the prebuilt binary there.
func Static(ctx context.Context, pkg string) (string, error) {
	if dir := os.Getenv(BinariesEnv); dir != "" {
		bin := filepath.Join(dir, filepath.Base(pkg))
		if _, err := os.Stat(bin); err != nil {
			return "", fmt.Errorf("%s: no prebuilt %s: %w", BinariesEnv, filepath.Base(pkg), err)
		}
		if err := checkStatic(bin); err != nil {
			return "", fmt.Errorf("%s: %w", BinariesEnv, err)
		}
		return bin, nil
	}
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

// checkStatic refuses a prebuilt binary that cannot run FROM scratch:
// one that is not an ELF executable, or one linked against a dynamic
// loader (a plain go build with cgo on), which in a container dies at
// once and shows only as a server that never became healthy.
func checkStatic(bin string) error {
	f, err := elf.Open(bin)
	if err != nil {
		return fmt.Errorf("%s is not an ELF executable: %w", bin, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			interp, _ := io.ReadAll(io.LimitReader(p.Open(), 256))
			return fmt.Errorf("%s is dynamically linked (it asks for %s), and the images are FROM scratch: build it with CGO_ENABLED=0",
				bin, strings.TrimRight(string(interp), "\x00"))
		}
	}
	return nil
}

// NonRoot is the user every ringside image runs as (distroless'
// "nonroot"), but for those in RunsAsRoot.
const NonRoot = "65532"

// RunsAsRoot names the images that keep root, and why.
var RunsAsRoot = map[string]string{
	"agent": "it starts and stops worker containers through the Docker socket, which only root (or the host's docker group, whose id varies by host) may use",
}

// Dockerfile is the final stage of every ringside image in the
// repository's Dockerfile: the static binaries alone, FROM scratch, the
// first the entrypoint, run as NonRoot with a /data folder it owns
// (ringnode's store).
func Dockerfile(name string, more ...string) string {
	user := "USER " + NonRoot + "\n"
	if _, ok := RunsAsRoot[name]; ok {
		user = ""
	}
	var copies strings.Builder
	for _, n := range append([]string{name}, more...) {
		fmt.Fprintf(&copies, "COPY %[1]s /%[1]s\n", n)
	}
	return fmt.Sprintf("FROM scratch\nCOPY --chown=%[2]s:%[2]s data /data\n%[3]s%[4]sENTRYPOINT [\"/%[1]s\"]\n", name, NonRoot, copies.String(), user)
}

// Build builds image from the static binaries of pkgs, the first its
// entrypoint, FROM scratch (the final stage of the repository's
// Dockerfile without its builder stage), through the engine's API. Tests
// use it to never run a stale image; the layer cache keeps it cheap.
func Build(ctx context.Context, image string, pkgs ...string) error {
	type file struct {
		name string
		mode int64
		body []byte
	}
	names := make([]string, len(pkgs))
	files := []file{{"data/", 0o755, nil}}
	for i, pkg := range pkgs {
		bin, err := Static(ctx, pkg)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(bin)
		if err != nil {
			return err
		}
		names[i] = filepath.Base(pkg)
		files = append(files, file{names[i], 0o755, b})
	}
	if len(names) == 0 {
		return fmt.Errorf("build %s: no binary", image)
	}
	files = append(files, file{"Dockerfile", 0o644, []byte(Dockerfile(names[0], names[1:]...))})
	var tarball bytes.Buffer
	tw := tar.NewWriter(&tarball)
	for _, f := range files {
		typ := byte(tar.TypeReg)
		if strings.HasSuffix(f.name, "/") {
			typ = tar.TypeDir
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: typ, Name: f.name, Mode: f.mode, Size: int64(len(f.body))}); err != nil {
			return err
		}
		if _, err := tw.Write(f.body); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	cli, err := dockerapi.Connect(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	res, err := cli.ImageBuild(ctx, &tarball, client.ImageBuildOptions{Tags: []string{image}, Remove: true, ForceRemove: true})
	if err != nil {
		return fmt.Errorf("build %s: %w", image, err)
	}
	defer res.Body.Close()
	return buildError(image, res.Body)
}

// buildError reads the engine's build progress: a JSON message per step,
// with the failure, if any, in its error field.
func buildError(image string, body io.Reader) error {
	dec := json.NewDecoder(body)
	for {
		var msg struct {
			Error string `json:"error"`
		}
		if err := dec.Decode(&msg); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("build %s: reading the engine's progress: %w", image, err)
		}
		if msg.Error != "" {
			return fmt.Errorf("build %s: %s", image, msg.Error)
		}
	}
}
