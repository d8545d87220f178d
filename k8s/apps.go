package k8s

import (
	"embed"
	"fmt"
	iofs "io/fs"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// BaseApp is the application name the kustomize base uses: its
// Deployment, its election, its elector's ServiceAccount, Role and
// RoleBinding (BaseApp+"-elector") and the names its Role grants.
const BaseApp = "app"

// manifests are the kustomize trees, carried by every binary that renders
// them (the kube experiments' pods backend runs from anywhere).
//
//go:embed base namespace components overlays
var manifests embed.FS

// Render builds k8s/overlays/<overlay> with kustomize, as `kubectl apply
// -k` would.
func Render(overlay string) ([]*unstructured.Unstructured, error) {
	fs := filesys.MakeFsInMemory()
	err := iofs.WalkDir(manifests, ".", func(path string, d iofs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := manifests.ReadFile(path)
		if err != nil {
			return err
		}
		return fs.WriteFile("/"+path, b)
	})
	if err != nil {
		return nil, fmt.Errorf("k8s manifests: %w", err)
	}
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, "/overlays/"+overlay)
	if err != nil {
		return nil, fmt.Errorf("kustomize build k8s/overlays/%s: %w", overlay, err)
	}
	out := make([]*unstructured.Unstructured, 0, len(res.Resources()))
	for _, r := range res.Resources() {
		b, err := r.MarshalJSON()
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(b); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// Applications turns a rendered overlay (one application, BaseApp) into
// the objects of the named applications: each gets its own Deployment,
// election, ServiceAccount, Role and RoleBinding, the Role granting that
// application's lock only; the shared objects (Namespace, ClusterRole,
// admission policy, and objects of other names such as cle-balanced's
// controller) come once, and the nodes ClusterRoleBinding names every
// application's ServiceAccount.
func Applications(objs []*unstructured.Unstructured, names ...string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	var per []*unstructured.Unstructured
	for _, o := range objs {
		perApp := o.GetName() == BaseApp || o.GetName() == BaseApp+"-elector"
		switch o.GetKind() {
		case "Deployment", "ServiceAccount", "Role", "RoleBinding":
			if perApp {
				per = append(per, o)
			} else {
				out = append(out, o.DeepCopy())
			}
		case "ClusterRoleBinding":
			if !boundTo(o, BaseApp+"-elector") {
				out = append(out, o.DeepCopy())
				break
			}
			crb := o.DeepCopy()
			subjects, _, _ := unstructured.NestedSlice(crb.Object, "subjects")
			if len(subjects) != 1 {
				return nil, fmt.Errorf("ClusterRoleBinding %s: want one subject (%s-elector), have %d", crb.GetName(), BaseApp, len(subjects))
			}
			var all []any
			for _, n := range names {
				s := runtime.DeepCopyJSONValue(subjects[0]).(map[string]any)
				s["name"] = n + "-elector"
				all = append(all, s)
			}
			if err := unstructured.SetNestedSlice(crb.Object, all, "subjects"); err != nil {
				return nil, err
			}
			out = append(out, crb)
		default:
			out = append(out, o.DeepCopy())
		}
	}
	for _, n := range names {
		for _, o := range per {
			c, err := rename(o.DeepCopy(), n)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// boundTo reports whether a binding's first subject is the
// ServiceAccount sa.
func boundTo(o *unstructured.Unstructured, sa string) bool {
	subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
	if len(subjects) == 0 {
		return false
	}
	s, _ := subjects[0].(map[string]any)
	return s["kind"] == "ServiceAccount" && s["name"] == sa
}

func rename(o *unstructured.Unstructured, app string) (*unstructured.Unstructured, error) {
	sa := app + "-elector"
	switch o.GetKind() {
	case "ServiceAccount":
		o.SetName(sa)
	case "Role":
		o.SetName(sa)
		rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
		for _, r := range rules {
			rm := r.(map[string]any)
			if names, ok := rm["resourceNames"].([]any); ok {
				rm["resourceNames"] = replaceAll(names, BaseApp, app)
			}
		}
		if err := unstructured.SetNestedSlice(o.Object, rules, "rules"); err != nil {
			return nil, err
		}
	case "RoleBinding":
		o.SetName(sa)
		if err := unstructured.SetNestedField(o.Object, sa, "roleRef", "name"); err != nil {
			return nil, err
		}
		subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
		for _, s := range subjects {
			s.(map[string]any)["name"] = sa
		}
		if err := unstructured.SetNestedSlice(o.Object, subjects, "subjects"); err != nil {
			return nil, err
		}
	case "Deployment":
		o.SetName(app)
		labels := map[string]string{"app.kubernetes.io/name": app}
		o.SetLabels(labels)
		if err := unstructured.SetNestedStringMap(o.Object, labels, "spec", "selector", "matchLabels"); err != nil {
			return nil, err
		}
		tmpl, _, _ := unstructured.NestedStringMap(o.Object, "spec", "template", "metadata", "labels")
		for k, v := range tmpl {
			if v == BaseApp {
				tmpl[k] = app
			}
		}
		if err := unstructured.SetNestedStringMap(o.Object, tmpl, "spec", "template", "metadata", "labels"); err != nil {
			return nil, err
		}
		spec, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
		spec["serviceAccountName"] = sa
		if tsc, ok := spec["topologySpreadConstraints"].([]any); ok {
			for _, c := range tsc {
				if sel, ok := c.(map[string]any)["labelSelector"].(map[string]any); ok {
					sel["matchLabels"] = map[string]any{"app.kubernetes.io/name": app}
				}
			}
		}
		for _, c := range spec["containers"].([]any) {
			cm := c.(map[string]any)
			if args, ok := cm["args"].([]any); ok {
				cm["args"] = replaceAll(args, "--election="+BaseApp, "--election="+app)
			}
		}
		if err := unstructured.SetNestedMap(o.Object, spec, "spec", "template", "spec"); err != nil {
			return nil, err
		}
	}
	return o, nil
}

func replaceAll(xs []any, from, to string) []any {
	out := slices.Clone(xs)
	for i, x := range out {
		if x == from {
			out[i] = to
		}
	}
	return out
}
