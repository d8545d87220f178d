package controlplane

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ringside/ringside/internal/klogslog"
)

// TestMain runs a package's tests against one control plane started for
// them all, and exits: call it from the package's TestMain. setup gets
// the running control plane first (to keep its clients, create nodes);
// an error there fails the run before any test. client-go's klog output
// is silenced: the tests report what they check.
func TestMain(m *testing.M, setup func(ctx context.Context, cp *ControlPlane) error) {
	klogslog.Install() // errors too: with its output sent nowhere, klog still copied them to stderr
	klogslog.Use(slog.New(slog.DiscardHandler))
	os.Exit(runTests(m, setup))
}

func runTests(m *testing.M, setup func(ctx context.Context, cp *ControlPlane) error) int {
	// A fuzz worker runs only the fuzz target, which must not need an API
	// server: each of them starting one would starve the fuzzing.
	flag.Parse()
	if f := flag.Lookup("test.fuzzworker"); f != nil && f.Value.String() == "true" {
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "ringside-controlplane-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "control plane:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	cp, err := Start(ctx, dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "control plane:", err)
		return 1
	}
	defer cp.Stop()
	if err := setup(ctx, cp); err != nil {
		fmt.Fprintln(os.Stderr, "control plane setup:", err)
		return 1
	}
	return m.Run()
}

// CreateNodes registers nodes by name (no kubelet runs them: Pods bound
// to them stay Pending, which is all an elector needs).
func (cp *ControlPlane) CreateNodes(ctx context.Context, names ...string) error {
	cs, err := cp.Clientset()
	if err != nil {
		return err
	}
	for _, n := range names {
		if _, err := cs.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create node %s: %w", n, err)
		}
	}
	return nil
}
