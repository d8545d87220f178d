package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ringside/ringside/bld"
	"github.com/ringside/ringside/experiments/backend/kube/controlplane"
	"github.com/ringside/ringside/internal/imagebuild"
	"github.com/ringside/ringside/internal/klogtest"
)

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

func getJSON(addr, path string) (map[string]any, string, error) {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	var m map[string]any
	err = json.NewDecoder(resp.Body).Decode(&m)
	return m, resp.Header.Get("Content-Type"), err
}

func body(t *testing.T, addr, path string) string {
	resp, err := http.Get("http://" + addr + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// The elector binary against a real API server: GET / answers
// {"name":"<leader>"} like the 2016 leader-elector sidecar on every
// replica, /healthz and /metrics answer, and SIGTERM on the leader hands
// leadership on well before the lease would expire.
func TestSidecarHTTPContract(t *testing.T) {
	ctx := context.Background()
	cp, err := controlplane.Start(ctx, t.TempDir())
	require.NoError(t, err)
	t.Cleanup(cp.Stop)
	cs, err := cp.Clientset()
	require.NoError(t, err)
	bin, err := imagebuild.Static(ctx, "github.com/ringside/ringside/cmd/elector")
	require.NoError(t, err)

	const ns, election = "sidecar", "app"
	_, err = cs.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	ids := []string{"app-0", "app-1", "app-2"}
	addrs := map[string]string{}
	procs := map[string]*exec.Cmd{}
	for i, id := range ids {
		node := fmt.Sprintf("w%d", i+1)
		_, err := cs.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = cs.CoreV1().Pods(ns).Create(ctx, &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: id, Labels: map[string]string{bld.ElectionLabel: election}},
			Spec:       v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "app", Image: "none"}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		addrs[id] = freeAddr(t)
		cmd := exec.Command(bin, "--algorithm", "ranked", "--election", election, "--namespace", ns, "--id", id,
			"--http", addrs[id], "--kubeconfig", cp.Kubeconfig, "--lease-duration", "10s", "--renew-deadline", "8s",
			"--retry-period", "500ms", "--rank-interval", "300ms")
		cmd.Stderr, _ = os.Create(filepath.Join(t.TempDir(), id+".log"))
		require.NoError(t, cmd.Start())
		procs[id] = cmd
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}

	// The leader every live sidecar names, with the term all of them
	// report for it (-1 while any does not know it).
	var term float64
	leaderOfAll := func() string {
		var leader string
		terms := map[float64]bool{}
		term = -1
		defer func() {
			for tm := range terms {
				if len(terms) == 1 {
					term = tm
				}
			}
		}()
		for _, id := range ids {
			if procs[id].ProcessState != nil {
				continue
			}
			m, ct, err := getJSON(addrs[id], "/")
			name, _ := m["name"].(string)
			if err != nil || name == "" || (leader != "" && name != leader) {
				return ""
			}
			if ct != "application/json" {
				return ""
			}
			leader = name
			tm, ok := m["term"].(float64)
			if !ok {
				tm = -1
			}
			terms[tm] = true
		}
		return leader
	}
	leaseTerm := func() float64 {
		l, err := cs.CoordinationV1().Leases(ns).Get(ctx, election, metav1.GetOptions{})
		require.NoError(t, err)
		return float64(*l.Spec.LeaseTransitions)
	}
	var leader string
	require.Eventually(t, func() bool { leader = leaderOfAll(); return leader != "" }, 30*time.Second, 50*time.Millisecond,
		"every sidecar names the same leader")
	assert.Contains(t, ids, leader)
	require.Eventually(t, func() bool { return leaderOfAll() == leader && term >= 0 }, 10*time.Second, 50*time.Millisecond,
		"every sidecar reports the leader's term")
	first := term
	assert.Equal(t, leaseTerm(), first, "the term is the Lease's leaseTransitions")
	for _, id := range ids {
		assert.Equal(t, "ok\n", body(t, addrs[id], "/healthz"))
		want := "elector_is_leader 0"
		if id == leader {
			want = "elector_is_leader 1"
		}
		assert.Contains(t, body(t, addrs[id], "/metrics"), want, id)
	}

	// Once the leader has ranked both followers on the lease, SIGTERM it:
	// the hand-over makes another replica leader. The lease was renewed at
	// most a retry period (0.5 s) before the signal and lasts 10 s, so a
	// new leader within 8 s cannot come from its expiry.
	require.Eventually(t, func() bool {
		l, err := cs.CoordinationV1().Leases(ns).Get(ctx, election, metav1.GetOptions{})
		var ranked []bld.Follower
		return err == nil && json.Unmarshal([]byte(l.Annotations[bld.SuccessorAnnotation]), &ranked) == nil && len(ranked) == 2
	}, 20*time.Second, 50*time.Millisecond, "the leader ranks its two followers")
	require.NoError(t, procs[leader].Process.Signal(syscall.SIGTERM))
	require.NoError(t, procs[leader].Wait())
	var next string
	require.Eventually(t, func() bool { next = leaderOfAll(); return next != "" && next != leader }, 8*time.Second, 20*time.Millisecond, "hand-over, not lease expiry")
	assert.Contains(t, ids, next)
	require.Eventually(t, func() bool { return leaderOfAll() == next && term > first }, 10*time.Second, 50*time.Millisecond,
		"the new leader's term is larger than its predecessor's")
	assert.Equal(t, leaseTerm(), term)

	out, err := exec.Command(bin, "--algorithm", "fastest", "--election", "x", "--id", "y", "--kubeconfig", cp.Kubeconfig, "--http", freeAddr(t)).CombinedOutput()
	require.Error(t, err)
	assert.True(t, strings.Contains(string(out), "fastest"), "a bad algorithm is named: %s", out)
}

// A --campaign-at (or ELECTOR_CAMPAIGN_AT) that is no RFC 3339 instant is
// refused with the flag named, before the elector reaches for the API
// server.
func TestRefusesACampaignInstantThatIsNone(t *testing.T) {
	for _, v := range []string{"tomorrow", "2026-12-03 14:00:00", "1764770400", "2026-12-03T14:00:00"} {
		err := run(context.Background(), []string{"--campaign-at", v, "--election", "e", "--id", "p", "--kubeconfig", "/nonexistent"})
		require.Error(t, err, v)
		assert.Contains(t, err.Error(), "--campaign-at", v)
	}
	t.Setenv("ELECTOR_CAMPAIGN_AT", "next tuesday")
	err := run(context.Background(), []string{"--election", "e", "--id", "p", "--kubeconfig", "/nonexistent"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--campaign-at")
}

// What client-go logs through klog reaches this candidate's logger: with
// its id and election, at its level (the info line stays below
// --log-level warn).
func TestClientGoLogsThroughTheCandidatesLogger(t *testing.T) {
	out := klogtest.Stderr(t, func() {
		err := run(t.Context(), []string{"--election", "e", "--id", "p", "--kubeconfig", "/nonexistent", "--clock-rate", "2", "--log-level", "warn"})
		require.ErrorContains(t, err, "--clock-rate", "refused after the logger is set up")
	})
	assert.Contains(t, out, "level=ERROR msg=\""+klogtest.Error+"\" id=p election=e")
	assert.NotContains(t, out, klogtest.Info)
}
