// Package kindrun runs kind (built by `make kind` into bin/) the way the
// Makefile's kind-* targets do: with k8s/kindshim first on its PATH when
// the engine refuses `docker run --privileged` (this sandbox), plain
// elsewhere. Tests and the kube experiments create, use and delete
// clusters through it.
package kindrun

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/ringside/ringside/internal/imagebuild"
)

// DefaultNodeImage is the node image `make kind-node-image` builds.
const DefaultNodeImage = "ringside/kind-node:v1.32.13"

// Kind is one kind binary and how to run it.
type Kind struct {
	Bin  string // the kind binary
	Shim string // directory of the docker shim to put first on PATH, or ""
}

// Find locates kind ($RINGSIDE_KIND, else the newest bin/kind-* of the
// ringside checkout that contains the working directory) and probes
// whether the engine needs the shim.
func Find(ctx context.Context) (*Kind, error) {
	root, err := imagebuild.ModuleRoot()
	if err != nil {
		return nil, fmt.Errorf("kind: %w", err)
	}
	bin := os.Getenv("RINGSIDE_KIND")
	if bin == "" {
		found, _ := filepath.Glob(filepath.Join(root, "bin", "kind-v*"))
		if len(found) == 0 {
			return nil, fmt.Errorf("kind: no bin/kind-v* in %s and RINGSIDE_KIND is unset: run `make kind`", root)
		}
		bin = found[len(found)-1]
	}
	k := &Kind{Bin: bin}
	// The probe image is the Debian base every ringside build has.
	probe := exec.CommandContext(ctx, "docker", "run", "--rm", "--privileged", "debian:bookworm-slim", "true")
	if out, err := probe.CombinedOutput(); err != nil {
		if !bytes.Contains(out, []byte("operation not permitted")) {
			return nil, fmt.Errorf("kind: probing docker run --privileged: %w: %s", err, bytes.TrimSpace(out))
		}
		k.Shim = filepath.Join(root, "k8s", "kindshim")
	}
	return k, nil
}

// Run runs kind with args and returns its standard output.
func (k *Kind) Run(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, k.Bin, args...)
	if k.Shim != "" {
		cmd.Env = append(os.Environ(), "PATH="+k.Shim+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("kind %s: %w: %s", strings.Join(args, " "), err, tail(stderr.String(), 2000))
	}
	return out, nil
}

// Create creates cluster name from config (a kind config file) and node
// image, and returns its kubeconfig.
func (k *Kind) Create(ctx context.Context, name, config, image string) ([]byte, error) {
	args := []string{"create", "cluster", "--name", name, "--config", config}
	if image != "" {
		args = append(args, "--image", image)
	}
	if _, err := k.Run(ctx, args...); err != nil {
		return nil, err
	}
	return k.Run(ctx, "get", "kubeconfig", "--name", name)
}

// Load copies local images into the nodes of cluster name that run Pods.
// A kind cluster of more than one node keeps kubeadm's NoSchedule taint on
// its control plane, so only its workers get them: each node unpacks every
// image into its containerd (the kind test loads four images; into four
// nodes that was a quarter more of that work, for a node no Pod of theirs
// can run on). A cluster of one node gets them on that node.
func (k *Kind) Load(ctx context.Context, name string, images ...string) error {
	out, err := k.Run(ctx, "get", "nodes", "--name", name)
	if err != nil {
		return err
	}
	args := []string{"load", "docker-image", "--name", name}
	if workers := Workers(name, strings.Fields(string(out))); len(workers) > 0 {
		args = append(args, "--nodes", strings.Join(workers, ","))
	}
	_, err = k.Run(ctx, append(args, images...)...)
	return err
}

// Workers picks the worker nodes of cluster name from its node names as
// kind names them: NAME-worker, NAME-worker2, …, beside
// NAME-control-plane[N] and NAME-external-load-balancer.
func Workers(name string, nodes []string) []string {
	var workers []string
	for _, n := range nodes {
		role, ok := strings.CutPrefix(n, name+"-")
		if !ok {
			continue
		}
		if num, ok := strings.CutPrefix(role, "worker"); ok && strings.Trim(num, "0123456789") == "" {
			workers = append(workers, n)
		}
	}
	return workers
}

// Delete deletes cluster name.
func (k *Kind) Delete(ctx context.Context, name string) error {
	_, err := k.Run(ctx, "delete", "cluster", "--name", name)
	return err
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
