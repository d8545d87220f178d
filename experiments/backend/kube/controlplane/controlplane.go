// Package controlplane runs a real Kubernetes control plane — etcd and
// kube-apiserver built from the Go module proxy (make kube-tools) — on
// 127.0.0.1 with generated PKI, for tests, experiments and `ringside kube
// up`. There is no kubelet or scheduler: Pods stay Pending, which is all
// leader election needs.
package controlplane

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ringside/ringside/internal/freeport"
	"github.com/ringside/ringside/internal/imagebuild"
	"github.com/ringside/ringside/internal/proc"
)

// ControlPlane is a running etcd + kube-apiserver pair.
type ControlPlane struct {
	Dir        string // state: PKI, etcd data, logs, kubeconfig
	Kubeconfig string
	URL        string
	procs      []*proc.Proc
	pki        pkiFiles
}

// BinDir finds the directory holding kube-apiserver and etcd:
// $RINGSIDE_KUBE_BIN, else bin/ at the root of the ringside checkout that
// contains the working directory.
func BinDir() (string, error) {
	if d := os.Getenv("RINGSIDE_KUBE_BIN"); d != "" {
		return d, nil
	}
	root, err := imagebuild.ModuleRoot()
	if err != nil {
		return "", fmt.Errorf("kube binaries: %w and RINGSIDE_KUBE_BIN is unset", err)
	}
	return filepath.Join(root, "bin"), nil
}

// Binaries returns the paths of the named binaries (kube-apiserver, etcd)
// in BinDir, or an error that says how to build them.
func Binaries(names ...string) ([]string, error) {
	dir, err := BinDir()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range names {
		p := filepath.Join(dir, n)
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("%s missing: run `make kube-tools` first (builds kube-apiserver and etcd from the Go module proxy)", p)
		}
		out = append(out, p)
	}
	return out, nil
}

// freePort is a port no one listens on now; a variable so that a test can
// hand out one that is taken.
var freePort = freeport.Port

// Start launches etcd and kube-apiserver with state in dir and waits until
// the API server is ready. Stop ends both.
func Start(ctx context.Context, dir string) (*ControlPlane, error) {
	bins, err := Binaries("kube-apiserver", "etcd")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// The ports are found free, then bound by etcd and kube-apiserver a
	// moment later, and a process starting beside them may take one in
	// between (go test runs packages side by side: a CI run lost a test
	// to etcd's "bind: address already in use"). A control plane that
	// failed so starts again on other ports, with a fresh etcd.
	for attempt := 1; ; attempt++ {
		cp, err := start(ctx, dir, bins)
		if err == nil || attempt == 3 || !portTaken(dir) {
			return cp, err
		}
		if err := os.RemoveAll(filepath.Join(dir, "etcd")); err != nil {
			return nil, err
		}
	}
}

// portTaken reports whether a process of the control plane in dir failed
// because its port was taken.
func portTaken(dir string) bool {
	for _, log := range []string{"etcd.log", "kube-apiserver.log"} {
		if b, err := os.ReadFile(filepath.Join(dir, log)); err == nil && bytes.Contains(b, []byte("address already in use")) {
			return true
		}
	}
	return false
}

func start(ctx context.Context, dir string, bins []string) (*ControlPlane, error) {
	var err error
	var ports [3]int // etcd client, etcd peer, API server
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			return nil, err
		}
	}
	cp := &ControlPlane{Dir: dir, URL: fmt.Sprintf("https://127.0.0.1:%d", ports[2]), Kubeconfig: filepath.Join(dir, "kubeconfig")}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	if err := cp.spawn(bins[1], "etcd.log",
		"--name", "ringside", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "ringside="+peerURL,
		"--unsafe-no-fsync", "--log-level", "warn"); err != nil {
		return nil, err
	}
	if err := cp.startAPIServer(ctx, bins[0], etcdURL, "127.0.0.1", ports[2]); err != nil {
		cp.Stop()
		return nil, err
	}
	return cp, nil
}

// The feature gate and API group of Kubernetes' coordinated leader
// election, on in every control plane ringside runs (this one, the
// compose stack's, which is this one in a container, and kind's:
// k8s/kind.yaml).
const (
	CoordinatedElectionGate = "CoordinatedLeaderElection=true"
	CoordinatedElectionAPI  = "coordination.k8s.io/v1alpha2"
)

// startAPIServer makes the PKI (valid for names too), runs kube-apiserver
// on bind:port against etcdURL, writes the kubeconfig for cp.URL and waits
// until the server is ready.
func (cp *ControlPlane) startAPIServer(ctx context.Context, bin, etcdURL, bind string, port int, names ...string) error {
	pki, err := writePKI(filepath.Join(cp.Dir, "pki"), names...)
	if err != nil {
		return err
	}
	cp.pki = pki
	args := []string{"--etcd-servers", etcdURL, "--bind-address", bind, "--secure-port", strconv.Itoa(port)}
	if ip := net.ParseIP(bind); ip != nil && !ip.IsUnspecified() {
		args = append(args, "--advertise-address", bind)
	}
	if err := cp.spawn(bin, "kube-apiserver.log", append(args,
		"--cert-dir", filepath.Join(cp.Dir, "pki"),
		"--tls-cert-file", pki.serverCert, "--tls-private-key-file", pki.serverKey, "--client-ca-file", pki.caCert,
		"--token-auth-file", pki.tokens, "--authorization-mode", "RBAC",
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", pki.saPub, "--service-account-signing-key-file", pki.saKey,
		"--service-cluster-ip-range", "10.96.0.0/16",
		"--endpoint-reconciler-type", "none",
		"--disable-admission-plugins", "ServiceAccount",
		"--enable-priority-and-fairness=false",
		// Coordinated leader election (KEP-4355, alpha in v1.32): the
		// LeaseCandidate API and a Lease's strategy and preferredHolder.
		"--feature-gates", CoordinatedElectionGate,
		"--runtime-config", CoordinatedElectionAPI+"=true",
		"--v", "0")...); err != nil {
		return err
	}
	if err := cp.writeKubeconfig(cp.Kubeconfig, cp.URL); err != nil {
		return err
	}
	return cp.waitReady(ctx)
}

func (cp *ControlPlane) spawn(bin, log string, args ...string) error {
	f, err := os.Create(filepath.Join(cp.Dir, log))
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	// Its own process group, so a test's Ctrl-C does not race our Stop.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p, err := proc.Start(cmd, func() { f.Close() })
	if err != nil {
		f.Close()
		return err
	}
	cp.procs = append(cp.procs, p)
	return nil
}

// writeKubeconfig writes a self-contained kubeconfig (the CA inline) for
// the admin user of the API server at url.
func (cp *ControlPlane) writeKubeconfig(path, url string) error {
	b, err := cp.kubeconfig(url)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

func (cp *ControlPlane) kubeconfig(url string) ([]byte, error) {
	ca, err := os.ReadFile(cp.pki.caCert)
	if err != nil {
		return nil, err
	}
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: ringside
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: admin
  user:
    token: %s
contexts:
- name: ringside
  context:
    cluster: ringside
    user: admin
current-context: ringside
`, url, base64.StdEncoding.EncodeToString(ca), cp.pki.token), nil
}

func (cp *ControlPlane) waitReady(ctx context.Context) error {
	cfg, err := cp.RestConfig()
	if err != nil {
		return err
	}
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return err
	}
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	deadline := time.Now().Add(60 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		for _, p := range cp.procs {
			if p.Exited() {
				return fmt.Errorf("%s exited (%v): see %s", p.Name(), p.Err(), cp.Dir)
			}
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cp.URL+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+cp.pki.token)
		resp, err := hc.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status + " " + strings.TrimSpace(string(b))
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("kube-apiserver not ready after 60s (%s); logs in %s", last, cp.Dir)
}

// RestConfig returns a client configuration for the admin user.
func (cp *ControlPlane) RestConfig() (*rest.Config, error) {
	return clientcmd.BuildConfigFromFlags("", cp.Kubeconfig)
}

// Clientset returns an admin clientset.
func (cp *ControlPlane) Clientset() (*kubernetes.Clientset, error) {
	cfg, err := cp.RestConfig()
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 1000, 2000
	return kubernetes.NewForConfig(cfg)
}

// Stop ends the API server, then etcd.
func (cp *ControlPlane) Stop() {
	for i := len(cp.procs) - 1; i >= 0; i-- {
		cp.procs[i].Stop(syscall.SIGTERM, 10*time.Second)
	}
	cp.procs = nil
}

// pidFile lists a detached control plane's processes, API server last.
const pidFile = "pids"

// Detach leaves the control plane running after this process exits (its
// processes have their own process groups) and records their PIDs in the
// state directory for StopDir.
func (cp *ControlPlane) Detach() error {
	var b strings.Builder
	for _, p := range cp.procs {
		fmt.Fprintln(&b, p.Pid())
	}
	if err := os.WriteFile(filepath.Join(cp.Dir, pidFile), []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("record control plane pids: %w", err)
	}
	cp.procs = nil
	return nil
}

// StopDir stops a control plane that Detach left running in dir: the API
// server first, then etcd. A process that is already gone is not an error.
func StopDir(dir string) error {
	raw, err := os.ReadFile(filepath.Join(dir, pidFile))
	if err != nil {
		return fmt.Errorf("no detached control plane in %s: %w", dir, err)
	}
	fields := strings.Fields(string(raw))
	for i := len(fields) - 1; i >= 0; i-- {
		pid, err := strconv.Atoi(fields[i])
		if err != nil {
			return fmt.Errorf("%s: bad pid %q", filepath.Join(dir, pidFile), fields[i])
		}
		if syscall.Kill(pid, syscall.SIGTERM) != nil {
			continue
		}
		for deadline := time.Now().Add(10 * time.Second); syscall.Kill(pid, 0) == nil; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				syscall.Kill(pid, syscall.SIGKILL)
				break
			}
		}
	}
	return os.Remove(filepath.Join(dir, pidFile))
}
