package kube

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// The Pod faults and hand-made Pods are the kubernetes backend's: the process
// backend refuses them by name rather than acting on nothing.
func TestPodFaultsNeedTheKindBackend(t *testing.T) {
	ctx := context.Background()
	c := &Cluster{el: &Processes{}}
	_, err := c.PodTemplate(ctx, "ns", App{Name: "app"}, "bld", "lease", Timing{})
	assert.ErrorIs(t, err, errNotKind)
	assert.ErrorIs(t, c.FreezeContainers(ctx, "ns", "pod", true, "elector"), errNotKind)
	assert.ErrorIs(t, c.SignalContainer(ctx, "ns", "pod", "faultproxy", "SIGUSR1"), errNotKind)
	assert.ErrorIs(t, c.CutPod(ctx, "ns", "pod", "faultproxy", "10.96.0.1:443", true), errNotKind)
}

// A cut needs an IP address and a port: a name or a bare address would
// make a rule that matches nothing, or the wrong thing.
func TestCutPodWantsIPAndPort(t *testing.T) {
	c := &Cluster{el: &podRunner{}}
	for _, dst := range []string{"", "10.96.0.1", "kubernetes.default:443", "10.96.0.1:443; rm -rf /", "10.96.0.1:0", "10.96.0.1:65536"} {
		err := c.CutPod(context.Background(), "ns", "pod", "faultproxy", dst, true)
		assert.ErrorContains(t, err, "want ip:port", "%q", dst)
	}
}

// Leftovers finds a run's namespace that is not being deleted and a
// binding made for a run's namespace; it ignores a namespace on its way
// out and everything not made by a run.
func TestLeftovers(t *testing.T) {
	gone := metav1.Now()
	cs := fake.NewSimpleClientset(
		&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "split-a", Labels: managedBy}},
		&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "split-b", Labels: managedBy, DeletionTimestamp: &gone}},
		&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "nodes-split-a-app", Labels: map[string]string{NamespaceLabel: "split-a"}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "cluster-admin"}},
	)
	left, err := Leftovers(context.Background(), cs)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"namespace split-a", "clusterrolebinding nodes-split-a-app"}, left)
}

// meta.json's account of the pod network: kube-system's DaemonSets, sorted
// (none on a control plane without kubelets).
func TestNetworkNamesTheDaemonSets(t *testing.T) {
	cs := fake.NewSimpleClientset(
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy", Namespace: "kube-system"}},
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "kindnet", Namespace: "kube-system"}},
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: "default"}},
	)
	assert.Equal(t, []string{"kindnet", "kube-proxy"}, network(context.Background(), cs))
	assert.Empty(t, network(context.Background(), fake.NewSimpleClientset()))
}
