// Package kubefake gives client-go's fake clientset the API server's
// optimistic concurrency. The fake's object tracker stores whatever it is
// given: an update that carries a stale resourceVersion succeeds there,
// so a test cannot tell a write guarded by the version from one that is
// not — the guard every controller's compare-and-swap rests on.
package kubefake

import (
	"fmt"
	"strconv"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// firstVersion is above any version a test writes into its fixtures.
const firstVersion = 1000

// Versioned makes cs number every object it creates or updates, one
// counter for all as etcd's revision, and answer as the API server does:
// an update naming a resourceVersion other than the stored one gets 409
// Conflict (one naming none is unconditional, as Leases allow), a create
// naming one 400. Objects given to NewClientset keep the versions they
// have: give them one, or an update of them is unconditional. Subresources
// and other verbs are left to the fake.
func Versioned(cs *fake.Clientset) {
	var rev atomic.Int64
	rev.Store(firstVersion)
	next := func() string { return strconv.FormatInt(rev.Add(1), 10) }
	cs.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca := a.(k8stesting.CreateAction)
		obj, m, ok := written(ca.GetSubresource(), ca.GetObject())
		if !ok {
			return false, nil, nil
		}
		if m.GetResourceVersion() != "" {
			return true, nil, apierrors.NewBadRequest("resourceVersion should not be set on objects to be created")
		}
		m.SetResourceVersion(next())
		if err := cs.Tracker().Create(a.GetResource(), obj, ca.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, obj, nil
	})
	cs.PrependReactor("update", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ua := a.(k8stesting.UpdateAction)
		obj, m, ok := written(ua.GetSubresource(), ua.GetObject())
		if !ok {
			return false, nil, nil
		}
		stored, err := cs.Tracker().Get(a.GetResource(), ua.GetNamespace(), m.GetName())
		if err != nil {
			return true, nil, err
		}
		sm, err := meta.Accessor(stored)
		if err != nil {
			return true, nil, err
		}
		if rv := m.GetResourceVersion(); rv != "" && rv != sm.GetResourceVersion() {
			return true, nil, apierrors.NewConflict(a.GetResource().GroupResource(), m.GetName(),
				fmt.Errorf("the object has been modified (resourceVersion %s, stored %s); please apply your changes to the latest version and try again", rv, sm.GetResourceVersion()))
		}
		m.SetResourceVersion(next())
		if err := cs.Tracker().Update(a.GetResource(), obj, ua.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, obj, nil
	})
}

// written is a copy of the object a create or update sends and its
// metadata; not ok for a subresource's write or an object without
// metadata, which the fake handles as it always has.
func written(subresource string, obj runtime.Object) (runtime.Object, metav1.Object, bool) {
	if subresource != "" {
		return nil, nil, false
	}
	obj = obj.DeepCopyObject()
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil, false
	}
	return obj, m, true
}
