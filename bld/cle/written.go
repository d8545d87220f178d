package cle

import (
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/ringside/ringside/bld"
)

// written keeps the controller's own successful writes over the
// informer's Leases until the informer has caught up. A look right after
// a write otherwise saw the Lease still free: it named a holder again (a
// conflict, a round trip lost) and counted the new leader nowhere, so the
// next application's choice could crowd its node and need a move later.
// (client-go's MutationCache does this too, but panics on a
// resourceVersion that is not an integer, which the API server is free
// to send.)
type written struct {
	mu sync.Mutex
	m  map[string]*coordinationv1.Lease
}

// note records l as written.
func (w *written) note(l *coordinationv1.Lease) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string]*coordinationv1.Lease{}
	}
	w.m[l.Namespace+"/"+l.Name] = l
}

// over returns the newer of the informer's copy of a Lease and the
// controller's own write of it, and forgets the write once the informer
// has it (or a later version, or versions that do not compare).
func (w *written) over(informer *coordinationv1.Lease) *coordinationv1.Lease {
	key := informer.Namespace + "/" + informer.Name
	w.mu.Lock()
	defer w.mu.Unlock()
	own, ok := w.m[key]
	if !ok {
		return informer
	}
	if bld.OlderVersion(informer, own) {
		return own
	}
	delete(w.m, key)
	return informer
}

// keep forgets the writes of Leases not in seen (removed, or no longer
// the strategy's), so the map holds no more than the elections.
func (w *written) keep(seen map[string]bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k := range w.m {
		if !seen[k] {
			delete(w.m, k)
		}
	}
}

// get returns the controller's own write of the Lease key, if it keeps one.
func (w *written) get(key string) (*coordinationv1.Lease, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	l, ok := w.m[key]
	return l, ok
}
