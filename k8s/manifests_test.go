package k8s

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/klog/v2"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/ringside/ringside/bld"
	"github.com/ringside/ringside/experiments/backend/kube/controlplane"
)

var overlays = []string{bld.Default, bld.BLD, bld.BLDPlus, bld.Ranked}

// render builds an overlay with kustomize, as `kubectl apply -k` would.
func render(t *testing.T, overlay string) []*unstructured.Unstructured {
	t.Helper()
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), "overlays/"+overlay)
	require.NoError(t, err, "kustomize build k8s/overlays/%s", overlay)
	var out []*unstructured.Unstructured
	for _, r := range res.Resources() {
		b, err := r.MarshalJSON()
		require.NoError(t, err)
		u := &unstructured.Unstructured{}
		require.NoError(t, u.UnmarshalJSON(b))
		out = append(out, u)
	}
	return out
}

func find(objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind {
			return o
		}
	}
	return nil
}

func TestOverlaysRender(t *testing.T) {
	for _, alg := range overlays {
		t.Run(alg, func(t *testing.T) {
			objs := render(t, alg)
			ns := find(objs, "Namespace")
			require.NotNil(t, ns)
			assert.Equal(t, "ringside", ns.GetName())
			dep := find(objs, "Deployment")
			require.NotNil(t, dep)
			containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
			require.Len(t, containers, 1)
			env, _, _ := unstructured.NestedSlice(containers[0].(map[string]any), "env")
			assert.Equal(t, map[string]any{"name": "ELECTOR_ALGORITHM", "value": alg}, env[0])
			for _, o := range objs {
				switch o.GetKind() {
				case "Namespace", "ClusterRole", "ClusterRoleBinding":
					assert.Empty(t, o.GetNamespace(), o.GetKind())
				default:
					assert.Equal(t, "ringside", o.GetNamespace(), "%s %s", o.GetKind(), o.GetName())
				}
			}
		})
	}
}

// TestElectorsRunWithTheManifestsRights deploys an overlay's objects to a
// real API server and runs candidates of every algorithm as the elector
// ServiceAccount: the RBAC must be enough for each of them, and no more
// than it says.
func TestElectorsRunWithTheManifestsRights(t *testing.T) {
	klog.SetOutput(io.Discard)
	klog.LogToStderr(false)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, t.TempDir())
	require.NoError(t, err)
	defer cp.Stop()
	admin, err := cp.RestConfig()
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(admin)
	require.NoError(t, err)
	apply(ctx, t, admin, render(t, bld.BLDPlus))

	workers := []string{"w1", "w2", "w3"}
	for _, n := range workers {
		_, err := cs.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	tok, err := cs.CoreV1().ServiceAccounts("ringside").CreateToken(ctx, "elector", &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{}}, metav1.CreateOptions{})
	require.NoError(t, err)
	sa := rest.AnonymousClientConfig(admin)
	sa.BearerToken = tok.Status.Token
	// One client per candidate, as each elector is its own process.
	newClient := func() *kubernetes.Clientset {
		c, err := kubernetes.NewForConfig(sa)
		require.NoError(t, err)
		return c
	}
	elector := newClient()

	// What the elector may not do.
	_, err = elector.CoreV1().Secrets("ringside").List(ctx, metav1.ListOptions{})
	assert.True(t, apierrors.IsForbidden(err), "secrets: %v", err)
	err = elector.CoreV1().Pods("ringside").Delete(ctx, "nope", metav1.DeleteOptions{})
	assert.True(t, apierrors.IsForbidden(err), "deleting pods: %v", err)
	_, err = elector.CoreV1().ConfigMaps("ringside").Get(ctx, "other", metav1.GetOptions{})
	assert.True(t, apierrors.IsForbidden(err), "configmaps other than the record: %v", err)
	_, err = elector.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	assert.True(t, apierrors.IsForbidden(err), "pods outside its namespace: %v", err)

	// Every node already holds a leader, so that the balanced
	// algorithms need the nodes (bld) and their peers (bld-plus) too.
	rec := &bld.Record{Client: cs.CoreV1(), Namespace: "ringside"}
	for i, n := range workers {
		_, err := rec.Reserve(ctx, nil, fmt.Sprint("other-", i), "x", n, "", 0, func(bld.Placement) (bool, error) { return true, nil })
		require.NoError(t, err)
	}

	algs := []string{bld.Default, bld.BLD, bld.BLDLiteral, bld.BLDPlus, bld.Ranked}
	locks := map[string]string{bld.Default: bld.LockEndpoints} // the papers' lock too
	var wg sync.WaitGroup
	leaders := make([]chan string, len(algs))
	for i, alg := range algs {
		leaders[i] = make(chan string, 3)
		app := "app-" + alg
		for r, node := range workers {
			id := fmt.Sprintf("%s-%d", app, r)
			_, err := cs.CoreV1().Pods("ringside").Create(ctx, &v1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: id, Labels: map[string]string{bld.ElectionLabel: app}},
				Spec:       v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "elector", Image: "ringside/elector:dev"}}},
			}, metav1.CreateOptions{})
			require.NoError(t, err)
			c, err := bld.NewCandidate(bld.CandidateConfig{
				Algorithm: alg, Lock: locks[alg], Election: app, Namespace: "ringside", Identity: id,
				Client: newClient(), ProbeAddr: "127.0.0.1:1", // the Pod is read for its node, and patched with this
				LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 200 * time.Millisecond,
				OnEvent: func(event, _ string) {
					if event == "started" {
						leaders[i] <- id
					}
				},
				Log: slog.New(slog.DiscardHandler),
			})
			require.NoError(t, err)
			wg.Go(func() {
				if err := c.Run(ctx); err != nil && ctx.Err() == nil {
					t.Errorf("%s: %v", id, err)
				}
			})
		}
	}
	for i, alg := range algs {
		select {
		case id := <-leaders[i]:
			t.Logf("%s: %s leads", alg, id)
		case <-time.After(20 * time.Second):
			t.Errorf("%s: no leader with the elector ServiceAccount's rights (see k8s/base/rbac.yaml)", alg)
		}
	}
	cancel()
	wg.Wait()
}

// apply creates the rendered objects with the admin's rights.
func apply(ctx context.Context, t *testing.T, cfg *rest.Config, objs []*unstructured.Unstructured) {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	require.NoError(t, err)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		require.NoError(t, err, "%s", gvk)
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			ri = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
		}
		_, err = ri.Create(ctx, o, metav1.CreateOptions{FieldValidation: "Strict"})
		require.NoError(t, err, "create %s %s", o.GetKind(), o.GetName())
	}
}

// A user's overlay that moves everything to another namespace the way
// k8s/base/kustomization.yaml says keeps the nodes ClusterRoleBinding
// pointing at the moved ServiceAccount.
func TestOverlayInAnotherNamespace(t *testing.T) {
	base, err := filepath.Abs("base")
	require.NoError(t, err)
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, base) // kustomize takes no absolute base
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(`resources:
  - `+rel+`
transformers:
  - |-
    apiVersion: builtin
    kind: NamespaceTransformer
    metadata:
      name: namespace
      namespace: lab
    setRoleBindingSubjects: allServiceAccounts
`), 0o644))
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	require.NoError(t, err)
	var checked int
	for _, r := range res.Resources() {
		switch r.GetKind() {
		case "Namespace":
			t.Errorf("the base brings a Namespace %s", r.GetName())
		case "ClusterRole", "ClusterRoleBinding":
		default:
			assert.Equal(t, "lab", r.GetNamespace(), "%s %s", r.GetKind(), r.GetName())
		}
		if r.GetKind() != "ClusterRoleBinding" && r.GetKind() != "RoleBinding" {
			continue
		}
		subjects, err := r.GetFieldValue("subjects")
		require.NoError(t, err)
		for _, s := range subjects.([]any) {
			assert.Equal(t, "lab", s.(map[string]any)["namespace"], "%s %s", r.GetKind(), r.GetName())
			checked++
		}
	}
	assert.Equal(t, 2, checked)
}
