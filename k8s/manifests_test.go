package k8s

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
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
	"k8s.io/apimachinery/pkg/types"
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
	"github.com/ringside/ringside/bld/balance"
	"github.com/ringside/ringside/bld/cle"
	"github.com/ringside/ringside/bld/strategy"
	"github.com/ringside/ringside/experiments/backend/kube/controlplane"
)

var overlays = []string{balance.Default, "default-endpoints", balance.BLD, balance.BLDPlus, balance.Ranked, balance.CLEBalanced}

// policy finds a ValidatingAdmissionPolicy by name.
func policy(objs []*unstructured.Unstructured, name string) bool {
	for _, o := range objs {
		if o.GetKind() == "ValidatingAdmissionPolicy" && o.GetName() == name {
			return true
		}
	}
	return false
}

func render(t *testing.T, overlay string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := Render(overlay)
	require.NoError(t, err)
	return objs
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
	for _, overlay := range overlays {
		t.Run(overlay, func(t *testing.T) {
			objs := render(t, overlay)
			ns := find(objs, "Namespace")
			require.NotNil(t, ns)
			assert.Equal(t, "ringside", ns.GetName())
			dep := find(objs, "Deployment")
			require.NotNil(t, dep)
			containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
			require.Len(t, containers, 1)
			env, _, _ := unstructured.NestedSlice(containers[0].(map[string]any), "env")
			alg := strings.TrimSuffix(overlay, "-endpoints")
			assert.Equal(t, map[string]any{"name": "ELECTOR_ALGORITHM", "value": alg}, env[0])
			// cle-balanced's Pods announce the strategy and the elector's
			// default lease, for the controller to name a first holder.
			annotations, _, _ := unstructured.NestedStringMap(dep.Object, "spec", "template", "metadata", "annotations")
			if overlay == balance.CLEBalanced {
				assert.Equal(t, map[string]string{bld.StrategyAnnotation: strategy.Name, bld.LeaseDurationAnnotation: "10s"}, annotations)
			} else {
				assert.NotContains(t, annotations, bld.StrategyAnnotation)
			}
			for _, o := range objs {
				switch o.GetKind() {
				case "Namespace", "ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
					assert.Empty(t, o.GetNamespace(), o.GetKind())
				default:
					assert.Equal(t, "ringside", o.GetNamespace(), "%s %s", o.GetKind(), o.GetName())
				}
			}
			// Least privilege: what may be changed is named, Pod patch
			// only where ranked publishes its probe address, the Endpoints
			// rule only with the Endpoints lock.
			grants := roleGrants(t, find(objs, "Role"))
			assert.Equal(t, []string{"app"}, grants["coordination.k8s.io/leases/update"])
			assert.Equal(t, []string{"ringside-leaders"}, grants["/configmaps/update"])
			// Reading is namespace-wide: bld-optimistic watches every Lease.
			assert.Contains(t, grants, "coordination.k8s.io/leases/watch")
			assert.Empty(t, grants["coordination.k8s.io/leases/watch"], "every Lease, not one by name")
			_, patch := grants["/pods/patch"]
			assert.Equal(t, overlay == balance.Ranked, patch, "pods patch")
			assert.Equal(t, overlay == balance.Ranked, policy(objs, "ringside-elector-own-pod"), "own-pod policy")
			// Coordinated candidates: their LeaseCandidates, each its own.
			_, candidates := grants["coordination.k8s.io/leasecandidates/create"]
			assert.Equal(t, overlay == balance.CLEBalanced, candidates, "leasecandidates rule")
			assert.Equal(t, overlay == balance.CLEBalanced, policy(objs, "ringside-elector-own-candidate"), "own-candidate policy")
			eps, endpoints := grants["/endpoints/update"]
			assert.Equal(t, overlay == "default-endpoints", endpoints, "endpoints rule")
			if endpoints {
				assert.Equal(t, []string{"app"}, eps)
			}
		})
	}
}

// roleGrants maps group/resource/verb to the resourceNames it is
// restricted to (nil: any name).
func roleGrants(t *testing.T, role *unstructured.Unstructured) map[string][]string {
	t.Helper()
	require.NotNil(t, role)
	rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	out := map[string][]string{}
	for _, r := range rules {
		rm := r.(map[string]any)
		var names []string
		for _, n := range asSlice(rm["resourceNames"]) {
			names = append(names, n.(string))
		}
		for _, g := range asSlice(rm["apiGroups"]) {
			for _, res := range asSlice(rm["resources"]) {
				for _, v := range asSlice(rm["verbs"]) {
					key := fmt.Sprintf("%s/%s/%s", g, res, v)
					_, seen := out[key]
					require.False(t, seen, "%s granted twice", key)
					out[key] = names
				}
			}
		}
	}
	return out
}

func asSlice(v any) []any { s, _ := v.([]any); return s }

func TestApplicationsHaveTheirOwnRights(t *testing.T) {
	objs, err := Applications(render(t, balance.Ranked), "alpha", "beta")
	require.NoError(t, err)
	var deps, roles int
	for _, o := range objs {
		switch o.GetKind() {
		case "Deployment":
			deps++
			name := o.GetName()
			sa, _, _ := unstructured.NestedString(o.Object, "spec", "template", "spec", "serviceAccountName")
			assert.Equal(t, name+"-elector", sa)
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			assert.Contains(t, containers[0].(map[string]any)["args"], "--election="+name)
			sel, _, _ := unstructured.NestedStringMap(o.Object, "spec", "selector", "matchLabels")
			labels, _, _ := unstructured.NestedStringMap(o.Object, "spec", "template", "metadata", "labels")
			assert.Equal(t, name, sel["app.kubernetes.io/name"])
			assert.Equal(t, name, labels["app.kubernetes.io/name"])
			assert.Equal(t, name, labels[bld.ElectionLabel])
		case "Role":
			roles++
			app := strings.TrimSuffix(o.GetName(), "-elector")
			assert.Equal(t, []string{app}, roleGrants(t, o)["coordination.k8s.io/leases/update"])
		case "ClusterRoleBinding":
			subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
			require.Len(t, subjects, 2)
			assert.Equal(t, "beta-elector", subjects[1].(map[string]any)["name"])
		}
	}
	assert.Equal(t, 2, deps)
	assert.Equal(t, 2, roles)
}

// TestElectorsRunWithTheManifestsRights deploys every overlay's
// application to a real API server and runs its candidates with exactly
// their ServiceAccount's rights, each with a token bound to its own Pod as
// a kubelet would mount it: the RBAC must be enough for each algorithm,
// and no more than it says — one application cannot take another's lock,
// and a ranked candidate cannot rewrite a peer's probe address.
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

	// overlay → the algorithm and lock its Deployment runs.
	type run struct{ alg, lock string }
	runs := map[string]run{
		balance.Default:     {balance.Default, bld.LockLease},
		"default-endpoints": {balance.Default, bld.LockEndpoints},
		balance.BLD:         {balance.BLD, bld.LockLease},
		balance.BLDPlus:     {balance.BLDPlus, bld.LockLease},
		balance.Ranked:      {balance.Ranked, bld.LockLease},
		balance.CLEBalanced: {balance.CLEBalanced, bld.LockLease},
	}
	for _, overlay := range overlays {
		objs, err := Applications(render(t, overlay), "app-"+overlay)
		require.NoError(t, err)
		apply(ctx, t, admin, objs)
	}

	workers := []string{"w1", "w2", "w3"}
	for _, n := range workers {
		_, err := cs.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	// asPod is a client with the token a kubelet would mount in pod of
	// app: its ServiceAccount's, bound to the Pod.
	asPod := func(app, pod string) *kubernetes.Clientset {
		p, err := cs.CoreV1().Pods("ringside").Get(ctx, pod, metav1.GetOptions{})
		require.NoError(t, err)
		tok, err := cs.CoreV1().ServiceAccounts("ringside").CreateToken(ctx, app+"-elector", &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{
			BoundObjectRef: &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod, UID: p.UID},
		}}, metav1.CreateOptions{})
		require.NoError(t, err)
		sa := rest.AnonymousClientConfig(admin)
		sa.BearerToken = tok.Status.Token
		c, err := kubernetes.NewForConfig(sa)
		require.NoError(t, err)
		return c
	}
	for _, overlay := range overlays {
		app := "app-" + overlay
		for r, node := range workers {
			_, err := cs.CoreV1().Pods("ringside").Create(ctx, &v1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", app, r), Labels: map[string]string{bld.ElectionLabel: app}},
				Spec:       v1.PodSpec{NodeName: node, ServiceAccountName: app + "-elector", Containers: []v1.Container{{Name: "elector", Image: "ringside/elector:dev"}}},
			}, metav1.CreateOptions{})
			require.NoError(t, err)
		}
	}

	// Every node already holds a leader, so that the balanced
	// algorithms need the nodes (bld) and their peers (bld-plus) too.
	rec := &bld.Record{Client: cs.CoreV1(), Namespace: "ringside"}
	for i, n := range workers {
		_, err := rec.Reserve(ctx, nil, fmt.Sprint("other-", i), "x", n, "", 0, func(balance.Placement) (bool, error) { return true, nil })
		require.NoError(t, err)
	}

	var wg sync.WaitGroup
	// cle-balanced's candidates lead when its controller names them: run
	// it with its ServiceAccount's rights.
	tok, err := cs.CoreV1().ServiceAccounts("ringside").CreateToken(ctx, "cle-balanced", &authv1.TokenRequest{}, metav1.CreateOptions{})
	require.NoError(t, err)
	ctlCfg := rest.AnonymousClientConfig(admin)
	ctlCfg.BearerToken = tok.Status.Token
	ctlClient, err := kubernetes.NewForConfig(ctlCfg)
	require.NoError(t, err)
	ctl, err := cle.New(cle.Config{Client: ctlClient, Namespace: "ringside", AckWait: 500 * time.Millisecond, Log: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	wg.Go(func() {
		if err := ctl.Run(ctx); err != nil {
			t.Errorf("cle-balanced controller: %v", err)
		}
	})
	// Every channel exists before any candidate runs: the map is only
	// read while they do.
	leaders := map[string]chan string{}
	for _, overlay := range overlays {
		leaders[overlay] = make(chan string, 3)
	}
	for _, overlay := range overlays {
		won := leaders[overlay]
		app := "app-" + overlay
		for r := range workers {
			id := fmt.Sprintf("%s-%d", app, r)
			c, err := bld.NewCandidate(bld.CandidateConfig{
				Algorithm: runs[overlay].alg, Lock: runs[overlay].lock, Election: app, Namespace: "ringside", Identity: id,
				Client: asPod(app, id), ProbeAddr: "127.0.0.1:1", // the Pod is read for its node, and patched with this
				LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 200 * time.Millisecond,
				OnEvent: func(event, _ string) {
					if event == "started" {
						select { // the first is read; a re-election's must not block
						case won <- id:
						default:
						}
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
	for _, overlay := range overlays {
		select {
		case id := <-leaders[overlay]:
			t.Logf("%s: %s leads", overlay, id)
		case <-time.After(20 * time.Second):
			t.Errorf("%s: no leader with the ServiceAccount's rights (see k8s/base/rbac.yaml)", overlay)
		}
	}

	// What an elector may not do.
	bldPod := asPod("app-bld", "app-bld-0")
	_, err = bldPod.CoreV1().Secrets("ringside").List(ctx, metav1.ListOptions{})
	assert.True(t, apierrors.IsForbidden(err), "secrets: %v", err)
	err = bldPod.CoreV1().Pods("ringside").Delete(ctx, "app-bld-1", metav1.DeleteOptions{})
	assert.True(t, apierrors.IsForbidden(err), "deleting pods: %v", err)
	_, err = bldPod.CoreV1().ConfigMaps("ringside").Get(ctx, "other", metav1.GetOptions{})
	assert.True(t, apierrors.IsForbidden(err), "configmaps other than the record: %v", err)
	_, err = bldPod.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	assert.True(t, apierrors.IsForbidden(err), "pods outside its namespace: %v", err)
	lease, err := cs.CoordinationV1().Leases("ringside").Get(ctx, "app-default", metav1.GetOptions{})
	require.NoError(t, err)
	holder := "app-bld-0"
	lease.Spec.HolderIdentity = &holder
	_, err = bldPod.CoordinationV1().Leases("ringside").Update(ctx, lease, metav1.UpdateOptions{})
	assert.True(t, apierrors.IsForbidden(err), "taking another application's lease: %v", err)
	_, err = bldPod.CoreV1().Endpoints("ringside").Get(ctx, "app-default-endpoints", metav1.GetOptions{})
	assert.True(t, apierrors.IsForbidden(err), "endpoints without the endpoints lock: %v", err)
	probe := []byte(`{"metadata":{"annotations":{"` + bld.ProbeAnnotation + `":"10.0.0.66:4040"}}}`)
	_, err = bldPod.CoreV1().Pods("ringside").Patch(ctx, "app-bld-0", types.MergePatchType, probe, metav1.PatchOptions{})
	assert.True(t, apierrors.IsForbidden(err), "pod patch outside ranked: %v", err)
	ranked := asPod("app-ranked", "app-ranked-0")
	// The policy is enforced once the API server's informer has it.
	assert.Eventually(t, func() bool {
		_, err = ranked.CoreV1().Pods("ringside").Patch(ctx, "app-ranked-1", types.MergePatchType, probe, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil
	}, 10*time.Second, 100*time.Millisecond, "a ranked candidate may rewrite a peer's probe address")
	assert.ErrorContains(t, err, "only its own Pod")
	_, err = ranked.CoreV1().Pods("ringside").Patch(ctx, "app-ranked-0", types.MergePatchType, probe, metav1.PatchOptions{})
	assert.NoError(t, err, "its own probe address")
	// A coordinated candidate cannot unregister a peer.
	coordinated := asPod("app-cle-balanced", "app-cle-balanced-0")
	assert.Eventually(t, func() bool {
		err = coordinated.CoordinationV1alpha2().LeaseCandidates("ringside").Delete(ctx, "app-cle-balanced-1", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil
	}, 10*time.Second, 100*time.Millisecond, "a coordinated candidate may remove a peer's LeaseCandidate")
	assert.ErrorContains(t, err, "only its own Pod as a candidate")
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
		// Discovery can fail for a while on a cluster just created on a
		// loaded machine ("couldn't get current server API group list:
		// unknown"): ask again, afresh, until a deadline.
		var m *meta.RESTMapping
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			if m, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
				mapper.Reset()
			}
			require.NoError(c, err, "%s", gvk)
		}, time.Minute, 500*time.Millisecond)
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			ri = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
		}
		_, err = ri.Create(ctx, o, metav1.CreateOptions{FieldValidation: "Strict"})
		if apierrors.IsAlreadyExists(err) && m.Scope.Name() != meta.RESTScopeNameNamespace {
			// Shared by the overlays (the Namespace, the policy); the
			// nodes binding gains their subjects.
			if o.GetKind() == "ClusterRoleBinding" {
				have, err := ri.Get(ctx, o.GetName(), metav1.GetOptions{})
				require.NoError(t, err)
				subjects, _, _ := unstructured.NestedSlice(have.Object, "subjects")
				more, _, _ := unstructured.NestedSlice(o.Object, "subjects")
				require.NoError(t, unstructured.SetNestedSlice(have.Object, append(subjects, more...), "subjects"))
				_, err = ri.Update(ctx, have, metav1.UpdateOptions{})
				require.NoError(t, err)
			}
			continue
		}
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
