package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/ringside/ringside/experiments"
	"github.com/ringside/ringside/experiments/catalog"
	"github.com/ringside/ringside/internal/dockerapi"
)

// stackCmd is the experiments service of docker-compose.yml: it takes the
// kubeconfig of the stack's API server, runs the catalogue (or
// $RINGSIDE_EXPERIMENTS) on the compose and docker backends wherever an
// experiment has them, writes the report, removes whatever its
// experiments started, and gives the results to the owner of the
// checkout. Arguments go to `run all`.
func stackCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	out := envOr("RINGSIDE_OUT", "/results")
	cli, err := dockerapi.Connect(ctx)
	if err != nil {
		return fmt.Errorf("stack: the experiments need the Docker socket: %w", err)
	}
	defer cli.Close()
	_, labels, _, err := dockerapi.Self(ctx, cli)
	if err != nil {
		return err
	}
	stack := labels["com.docker.compose.project"]
	if stack == "" {
		stack = "ringside"
	}
	os.Setenv(dockerapi.StackEnv, stack)
	if err := dockerapi.RemoveStack(ctx, cli, stack); dockerapi.OnlyStuck(err) {
		fmt.Fprintln(stderr, "ringside: stack: going on beside what an earlier run left:", err)
	} else if err != nil {
		return fmt.Errorf("stack: remove what an earlier run left: %w", err)
	}
	defer func() {
		c, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := dockerapi.RemoveStack(c, cli, stack); err != nil {
			fmt.Fprintln(stderr, "ringside: stack:", err)
		}
	}()

	if url := envOr("RINGSIDE_KUBECONFIG_URL", ""); url != "" {
		path := filepath.Join(os.TempDir(), "ringside-kubeconfig")
		if err := fetchKubeconfig(ctx, url, path); err != nil {
			return err
		}
		os.Setenv("RINGSIDE_KUBECONFIG", path)
	}
	if os.Getenv("RINGSIDE_PREFER_BACKENDS") == "" {
		os.Setenv("RINGSIDE_PREFER_BACKENDS", "compose,docker")
	}
	reg := catalog.New()
	runErr := runAll(ctx, reg, append([]string{"--out", out}, args...), common{}, stdout, stderr)
	if path, err := experiments.WriteReport(out, reg); err != nil {
		runErr = errors.Join(runErr, err)
	} else {
		fmt.Fprintln(stdout, "wrote", path)
	}
	if owner := envOr("RINGSIDE_OWNER_OF", ""); owner != "" {
		runErr = errors.Join(runErr, chownLike(out, owner))
	}
	return runErr
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// fetchKubeconfig takes the kubeconfig the stack's API server hands over,
// waiting for it as long as the server takes to start (its image may still
// be building its PKI, etcd may still be starting).
func fetchKubeconfig(ctx context.Context, url, path string) error {
	hc := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(3 * time.Minute)
	var last error
	for time.Now().Before(deadline) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("RINGSIDE_KUBECONFIG_URL %q: %w", url, err)
		}
		resp, err := hc.Do(req)
		if err == nil {
			b, rerr := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && rerr == nil {
				return os.WriteFile(path, b, 0o600)
			}
			err = fmt.Errorf("%s", resp.Status)
		}
		last = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return fmt.Errorf("stack: no kubeconfig from %s after 3 minutes: %v", url, last)
}

// chownLike gives dir and everything in it to the owner of ref (the
// checkout, bind-mounted): the container runs as root for the Docker
// socket, the results belong to whoever ran compose.
func chownLike(dir, ref string) error {
	st, err := os.Stat(ref)
	if err != nil {
		return fmt.Errorf("results owner: %w", err)
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	uid, gid := int(sys.Uid), int(sys.Gid)
	return filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}
