package controlplane

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ringside/ringside/internal/accept"
	"github.com/ringside/ringside/internal/serve"
)

// ServeOptions configure an API server that runs as a service of its own
// beside an etcd service (the experiments stack, compose files at the root).
type ServeOptions struct {
	Dir     string   // PKI, logs
	Etcd    string   // etcd's client URL
	Port    int      // the API server's port, on every interface
	Names   []string // host names and IPs clients reach it by (certificate SANs)
	Server  string   // the URL written into the served kubeconfig
	Handoff string   // address that serves the kubeconfig: GET /kubeconfig
	Workers []string // worker nodes to create, as a cluster without kubelets has none
	Log     *slog.Logger
}

// Serve runs kube-apiserver until ctx ends or it exits. The PKI and the
// admin token are made at start, so no credential is baked into an image
// or shared between stacks. The kubeconfig is handed over on o.Handoff in
// plain HTTP: that address belongs on the stack's private network only,
// where etcd — the whole cluster state — is open anyway.
func Serve(ctx context.Context, o ServeOptions) error {
	bins, err := Binaries("kube-apiserver")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return err
	}
	cp := &ControlPlane{Dir: o.Dir, URL: "https://127.0.0.1:" + strconv.Itoa(o.Port), Kubeconfig: o.Dir + "/kubeconfig"}
	defer cp.Stop()
	// etcd's service may still be starting: the API server retries it, and
	// its readiness waits for it.
	if err := cp.startAPIServer(ctx, bins[0], o.Etcd, "0.0.0.0", o.Port, o.Names...); err != nil {
		if b, rerr := os.ReadFile(o.Dir + "/kube-apiserver.log"); rerr == nil {
			os.Stderr.Write(tail(b, 4096))
		}
		return err
	}
	cs, err := cp.Clientset()
	if err != nil {
		return err
	}
	for _, n := range o.Workers {
		_, err := cs.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create node %s: %w", n, err)
		}
	}
	kc, err := cp.kubeconfig(o.Server)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.Handoff)
	if err != nil {
		return fmt.Errorf("kubeconfig hand-off: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /kubeconfig", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		w.Write(kc)
	})
	srv := serve.Limit(&http.Server{Handler: mux})
	go srv.Serve(accept.Bound(ln))
	defer srv.Close()
	o.Log.Info("kube-apiserver ready", "server", o.Server, "kubeconfig", "http://"+ln.Addr().String()+"/kubeconfig", "workers", o.Workers)

	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			for _, p := range cp.procs {
				if p.Exited() {
					return fmt.Errorf("%s exited: %v", p.Name(), p.Err())
				}
			}
		}
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
