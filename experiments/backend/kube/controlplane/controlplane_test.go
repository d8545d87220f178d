package controlplane

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// startTest starts a control plane in a temporary directory, stopped (and
// its logs' tails shown if t failed) when t ends.
func startTest(t *testing.T) *ControlPlane {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	cp, err := Start(ctx, dir)
	require.NoError(t, err)
	t.Cleanup(cp.Stop)
	logTailOnFailure(t, dir)
	return cp
}

func TestControlPlaneServesTheAPI(t *testing.T) {
	cp := startTest(t)
	cs, err := cp.Clientset()
	require.NoError(t, err)
	v, err := cs.Discovery().ServerVersion()
	require.NoError(t, err)
	require.Equal(t, "v1.32.13", v.GitVersion)
	_, err = cs.CoordinationV1().Leases("default").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	RequireCoordinatedElection(t, cs)
}

// Two control planes never share a credential: each makes its own admin
// token, and one's token is refused by the other.
func TestEachControlPlaneHasItsOwnToken(t *testing.T) {
	a, b := startTest(t), startTest(t)
	require.NotEqual(t, a.pki.token, b.pki.token)
	require.Len(t, a.pki.token, 48)
	cfg, err := a.RestConfig()
	require.NoError(t, err)
	cfg.BearerToken = b.pki.token
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	_, err = cs.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{})
	require.True(t, apierrors.IsUnauthorized(err), "another control plane's token: %v", err)
}

// Serve runs the API server against an etcd it did not start, creates the
// worker nodes, and hands over a kubeconfig that works from outside.
func TestServeHandsOverAWorkingKubeconfig(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bins, err := Binaries("etcd")
	require.NoError(t, err)
	etcdCP := &ControlPlane{Dir: t.TempDir()}
	defer etcdCP.Stop()
	var ports [4]int // etcd client, etcd peer, API server, hand-off
	for i := range ports {
		ports[i], err = freePort()
		require.NoError(t, err)
	}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	require.NoError(t, etcdCP.spawn(bins[0], "etcd.log", "--data-dir", etcdCP.Dir+"/etcd",
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL, "--initial-cluster", "default="+peerURL,
		"--unsafe-no-fsync"))

	serveCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- Serve(serveCtx, ServeOptions{
			Dir: t.TempDir(), Etcd: etcdURL, Port: ports[2], Names: []string{"kube-apiserver"},
			Server: fmt.Sprintf("https://127.0.0.1:%d", ports[2]), Handoff: fmt.Sprintf("127.0.0.1:%d", ports[3]),
			Workers: []string{"w1", "w2", "w3"}, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
	}()
	var kc []byte
	require.Eventually(t, func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/kubeconfig", ports[3]))
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		kc, err = io.ReadAll(resp.Body)
		return err == nil && resp.StatusCode == http.StatusOK
	}, time.Minute, 100*time.Millisecond)
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var names []string
	for _, n := range nodes.Items {
		names = append(names, n.Name)
	}
	require.ElementsMatch(t, []string{"w1", "w2", "w3"}, names)
	stop()
	require.NoError(t, <-done)
}

// logTailOnFailure logs the end of the control plane's logs in dir when
// t fails: a failure on a loaded CI machine is explained by them, and
// t.TempDir is gone afterwards.
func logTailOnFailure(t *testing.T, dir string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, name := range []string{"kube-apiserver.log", "etcd.log"} {
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Logf("%s: %v", name, err)
				continue
			}
			t.Logf("end of %s:\n%s", name, tail(b, 8000))
		}
	})
}

// RequireCoordinatedElection fails t unless cs's API server serves
// coordinated leader election.
func RequireCoordinatedElection(t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	require.NoError(t, CheckCoordinatedElection(t.Context(), cs))
}

// A port found free and taken before etcd binds it (another process
// starting beside this one) costs a retry on other ports, not the start.
func TestStartOutlivesATakenPort(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	real := freePort
	handed := false
	freePort = func() (int, error) {
		if !handed { // etcd's client port, on the first try only
			handed = true
			return taken.Addr().(*net.TCPAddr).Port, nil
		}
		return real()
	}
	defer func() { freePort = real }()
	cp := startTest(t)
	require.True(t, handed, "the taken port was handed out")
	cs, err := cp.Clientset()
	require.NoError(t, err)
	_, err = cs.Discovery().ServerVersion()
	require.NoError(t, err)
}
