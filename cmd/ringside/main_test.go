package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ringside/ringside/internal/klogtest"
	"github.com/ringside/ringside/ring"
)

func cli(args ...string) (string, string, error) {
	var out, errb bytes.Buffer
	err := run(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), err
}

func TestListShowsCatalogue(t *testing.T) {
	out, _, err := cli("list")
	require.NoError(t, err)
	assert.Contains(t, out, "ring-messages")
	assert.Contains(t, out, "ring-chaos")
}

func TestRunAndReport(t *testing.T) {
	dir := t.TempDir()
	out, status, err := cli("run", "ring-messages", "--seed", "1", "--reps", "5", "--n", "4,8", "--out", dir)
	require.NoError(t, err, status)
	assert.Contains(t, out, fmt.Sprintf("ring-messages: %d rows", 40*len(ring.AlgorithmNames())), "2 sizes × 2 orders × 2 initiators × 5 reps per algorithm")
	assert.Contains(t, status, "ring-messages: done")
	for _, f := range []string{"ring-messages.csv", "ring-messages.meta.json"} {
		assert.FileExists(t, filepath.Join(dir, f))
	}
	out, _, err = cli("report", dir)
	require.NoError(t, err)
	assert.Contains(t, out, "report.md")
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	require.NoError(t, err)
	assert.Contains(t, string(md), "## ring-messages")
	assert.FileExists(t, filepath.Join(dir, "ring-messages-messages.png"))
	assert.FileExists(t, filepath.Join(dir, "ring-messages-messages.svg"), "a vector figure for papers")
}

func TestClearErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "no command"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"run"}, "name an experiment"},
		{[]string{"run", "nope"}, `unknown experiment "nope"`},
		{[]string{"run", "ring-messages", "--backend", "kube", "--out", t.TempDir()}, `backend "kube" not supported`},
		{[]string{"run", "ring-messages", "--seed", "-3"}, "invalid value"},
		{[]string{"run", "ring-messages", "extra"}, `unexpected argument "extra"`},
		{[]string{"run", "all", "--backend", "sim"}, "each runs on its default backend"},
		{[]string{"run", "all", "--experiments", "ring-messages,nope"}, `unknown experiment "nope"`},
		{[]string{"run", "all", "extra"}, `unexpected argument "extra"`},
		{[]string{"kube", "serve", "--port", "70000"}, "not a TCP port"},
		{[]string{"kube", "serve", "--server", "http://x"}, "want an https:// URL"},
		{[]string{"report"}, "exactly one directory"},
		{[]string{"report", t.TempDir()}, "no *.meta.json"},
	} {
		_, _, err := cli(tc.args...)
		require.Error(t, err, "%v", tc.args)
		assert.Contains(t, err.Error(), tc.want, "%v", tc.args)
	}
}

func TestMalformedEnvironmentIsAnError(t *testing.T) {
	t.Setenv("RINGSIDE_SEED", "abc")
	_, _, err := cli("run", "ring-messages", "--out", t.TempDir())
	require.ErrorContains(t, err, `environment RINGSIDE_SEED="abc"`)
	_, _, err = cli("run", "all", "--out", t.TempDir())
	require.ErrorContains(t, err, `environment RINGSIDE_SEED="abc"`)
}

// run all with a list runs just those, on the first preferred backend
// each has (ring-messages has only sim), and reports each.
func TestRunAllTakesAListAndPreferredBackends(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("RINGSIDE_EXPERIMENTS", "lb-efficiency, ring-messages")
	out, status, err := cli("run", "all", "--reps", "2", "--prefer", "compose,sim", "--out", dir)
	require.NoError(t, err, status)
	assert.Contains(t, out, "ring-messages:")
	assert.Contains(t, out, "lb-efficiency:")
	assert.NotContains(t, out, "ring-chaos")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var csvs []string
	for _, e := range entries {
		if filepath.Ext(e.Name()) == ".csv" {
			csvs = append(csvs, e.Name())
		}
	}
	assert.ElementsMatch(t, []string{"lb-efficiency.csv", "ring-messages.csv"}, csvs)
}

func TestKubeUpDown(t *testing.T) {
	dir := t.TempDir()
	out, _, err := cli("kube", "up", "--dir", dir)
	require.NoError(t, err)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	assert.Contains(t, out, "kubeconfig: "+kubeconfig)
	t.Cleanup(func() { cli("kube", "down", "--dir", dir) })

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	v, err := cs.Discovery().ServerVersion()
	require.NoError(t, err, "the API server outlives the command")
	assert.Equal(t, "v1.32.13", v.GitVersion)

	_, _, err = cli("kube", "up", "--dir", dir)
	assert.ErrorContains(t, err, "already runs")

	_, _, err = cli("kube", "down", "--dir", dir)
	require.NoError(t, err)
	_, err = cs.Discovery().ServerVersion()
	assert.Error(t, err, "stopped")
	_, _, err = cli("kube", "down", "--dir", dir)
	assert.ErrorContains(t, err, "no detached control plane")
}

func TestMain(m *testing.M) {
	quietClientGo() // as main does, before any test runs client-go
	os.Exit(m.Run())
}

// What client-go logs through klog stays off ringside's terminal, errors
// too: klog's output sent nowhere still copied them to stderr, and a kind
// run printed "Unexpected error when reading response body: context
// canceled" between its progress lines.
func TestClientGoKeepsQuiet(t *testing.T) {
	assert.Empty(t, klogtest.Stderr(t, quietClientGo))
}
