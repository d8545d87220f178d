package bld

// A coordinated candidate's LeaseCandidate: registered once its Lease
// exists, renewed whenever the strategy controller pings it, removed when
// it leaves.

import (
	"context"
	"fmt"
	"time"

	"k8s.io/api/coordination/v1alpha2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/ringside/ringside/bld/strategy"
)

// answerPings renews this candidate's LeaseCandidate whenever the
// controller pings it (a pingTime after its renewTime) — what client-go's
// leaderelection.NewCandidate does, but for one thing: client-go v0.32
// lists LeaseCandidates at cluster scope, which the namespaced Role a
// candidate gets cannot grant, so on a real cluster its cache never
// synced and no ping was ever answered (a SIGKILLed leader's election
// then waited for candidates registered after its Lease ran out).
func (c *Candidate) answerPings(ctx context.Context) {
	pinged := make(chan struct{}, 1)
	note := func(obj any) {
		lc, ok := obj.(*v1alpha2.LeaseCandidate)
		if ok && lc.Spec.PingTime != nil && (lc.Spec.RenewTime == nil || lc.Spec.PingTime.After(lc.Spec.RenewTime.Time)) {
			select {
			case pinged <- struct{}{}:
			default:
			}
		}
	}
	f := c.watchOne(c.cfg.Identity)
	inf := f.Coordination().V1alpha2().LeaseCandidates().Informer()
	inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: note, UpdateFunc: func(_, n any) { note(n) }})
	f.Start(ctx.Done())
	for {
		select {
		case <-ctx.Done():
			return
		case <-pinged:
		}
		// A failed answer is tried again while the ping stands: a conflict
		// is a newer ping, which the watch delivers anyway.
		for attempt := 0; ; attempt++ {
			err := c.renewCandidate(ctx)
			if err == nil || ctx.Err() != nil || apierrors.IsConflict(err) {
				break
			}
			if attempt == 4 {
				c.cfg.Log.Warn("answering the strategy controller's ping", "err", err)
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-c.cfg.Clock.After(100 * time.Millisecond):
			}
		}
	}
}

// renewCandidate sets the candidate's renewTime to now.
func (c *Candidate) renewCandidate(ctx context.Context) error {
	lcs := c.cfg.Client.CoordinationV1alpha2().LeaseCandidates(c.cfg.Namespace)
	lc, err := lcs.Get(ctx, c.cfg.Identity, metav1.GetOptions{})
	if err != nil {
		return err
	}
	now := metav1.NewMicroTime(c.cfg.Clock.Now())
	lc.Spec.RenewTime = &now
	_, err = lcs.Update(ctx, lc, metav1.UpdateOptions{})
	return err
}

// register creates this candidate's LeaseCandidate with its node, before
// client-go's candidate renews it (which keeps the annotation).
func (c *Candidate) register(ctx context.Context) error {
	lcs := c.cfg.Client.CoordinationV1alpha2().LeaseCandidates(c.cfg.Namespace)
	now := metav1.NewMicroTime(c.cfg.Clock.Now())
	obj := &v1alpha2.LeaseCandidate{
		ObjectMeta: metav1.ObjectMeta{Name: c.cfg.Identity, Namespace: c.cfg.Namespace, Annotations: map[string]string{NodeAnnotation: c.cfg.Node}},
		Spec:       v1alpha2.LeaseCandidateSpec{LeaseName: c.cfg.Election, Strategy: strategy.Name, BinaryVersion: binaryVersion, RenewTime: &now},
	}
	_, err := lcs.Create(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) { // a restarted candidate: take its object over
		var old *v1alpha2.LeaseCandidate
		if old, err = lcs.Get(ctx, c.cfg.Identity, metav1.GetOptions{}); err == nil {
			old.Annotations, old.Spec = obj.Annotations, obj.Spec
			_, err = lcs.Update(ctx, old, metav1.UpdateOptions{})
		}
	}
	if err != nil {
		return fmt.Errorf("candidate %s: registering its LeaseCandidate: %w", c.cfg.Identity, err)
	}
	return nil
}

// leave unregisters the candidate, then lets a Lease it still holds run
// out — in that order, so the controller does not name it again.
func (c *Candidate) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.RenewDeadline)
	defer cancel()
	err := c.cfg.Client.CoordinationV1alpha2().LeaseCandidates(c.cfg.Namespace).Delete(ctx, c.cfg.Identity, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		c.cfg.Log.Warn("unregistering the candidate", "err", err)
	}
	c.expire()
}
