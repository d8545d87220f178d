package cle

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/ringside/ringside/bld"
)

func versioned(l *coordinationv1.Lease, rv string) *coordinationv1.Lease {
	l = l.DeepCopy()
	l.ResourceVersion = rv
	return l
}

// The overlay returns the controller's write until the informer has that
// version or a later one, then forgets it; versions that do not compare
// (the API server may send any string) leave the informer's copy, and
// nothing panics.
func TestOwnWritesOverTheInformersCopy(t *testing.T) {
	base := lease("a", bld.Unassigned, time.Now(), 2)
	var w written
	assert.Equal(t, "7", w.over(versioned(base, "7")).ResourceVersion, "nothing written")
	w.note(versioned(base, "8"))
	assert.Equal(t, "8", w.over(versioned(base, "7")).ResourceVersion, "the informer is behind")
	assert.Equal(t, "8", w.over(versioned(base, "8")).ResourceVersion, "caught up")
	assert.Equal(t, "7", w.over(versioned(base, "7")).ResourceVersion, "forgotten once caught up")
	for _, rv := range [][2]string{{"x9", "7"}, {"9", ""}, {"18446744073709551616", "7"}, {"-1", "7"}} {
		w.note(versioned(base, rv[0]))
		assert.Equal(t, rv[1], w.over(versioned(base, rv[1])).ResourceVersion, "own %q, informer's %q", rv[0], rv[1])
		assert.Empty(t, w.m, "own %q forgotten", rv[0])
	}
	w.note(versioned(base, "9"))
	w.keep(map[string]bool{"x/other": true})
	assert.Empty(t, w.m, "a Lease no election names")
}

// Two looks at a free election before the informer has the first look's
// write: the second sees the controller's own write — a holder — and
// writes nothing (before, it named a holder again, refused as a
// conflict, and counted the first leader nowhere).
func TestALookAfterAWriteSeesIt(t *testing.T) {
	now := time.Now()
	free := versioned(lease("a", bld.Unassigned, now.Add(-time.Minute), 2), "5")
	cs := fake.NewClientset()
	var updates int
	cs.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		updates++
		l := a.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
		rv, _ := strconv.Atoi(l.ResourceVersion)
		l.ResourceVersion = strconv.Itoa(rv + 1)
		return true, l, nil
	})
	ctl, err := New(Config{Client: cs, AckWait: time.Second, Log: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	ctl.leases = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	ctl.candidates = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	ctl.pods = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{byElection: electionOf})
	require.NoError(t, ctl.leases.Add(free))
	require.NoError(t, ctl.candidates.Add(candidate("c1", "a", map[string]string{bld.NodeAnnotation: "w1"}, now)))
	ctl.reconcile(context.Background())
	require.Equal(t, 1, updates, "the first look names a holder")
	ctl.reconcile(context.Background())
	assert.Equal(t, 1, updates, "the second look, the informer still behind, writes nothing")
	l, _, _ := ctl.leases.GetByKey("x/a")
	assert.Equal(t, "c1", *ctl.own.over(l.(*coordinationv1.Lease)).Spec.HolderIdentity)
}
