package bld

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authzv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// A candidate answers the strategy controller's pings with no more than
// a namespaced Role grants (the cle-balanced overlay's): client-go
// v0.32's own candidate lists LeaseCandidates at cluster scope and, so
// confined, never answered one.
func TestCandidateAnswersPingsWithANamespacedRole(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	_, err := cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "elector"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leasecandidates", "leases"},
			Verbs: []string{"create", "get", "list", "watch", "update", "delete"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	user := "system:serviceaccount:" + ns + ":app-elector"
	_, err = cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "elector"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "elector"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: user}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	// The API server authorizes from an informer's copy of the RBAC
	// objects: until that copy has the binding, the confined candidate is
	// refused. Wait, as a user of a new binding would, until it is asked
	// for and allowed.
	require.Eventually(t, func() bool {
		r, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
			User: user, ResourceAttributes: &authzv1.ResourceAttributes{Namespace: ns, Verb: "create", Group: "coordination.k8s.io", Resource: "leases"}}},
			metav1.CreateOptions{})
		return err == nil && r.Status.Allowed
	}, 10*time.Second, 20*time.Millisecond, "the binding takes effect")
	cfg := rest.CopyConfig(rc)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	confined, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)

	c, err := NewCandidate(CandidateConfig{Algorithm: "cle-balanced", Election: "app", Namespace: ns, Identity: "app-0", Node: "w1",
		Client: confined, LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 200 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(tWriter{t}, nil))})
	require.NoError(t, err)
	// The Lease first, as a candidate makes it: v1.32's API server
	// crashes on a third-party candidate of a Lease that does not exist.
	require.NoError(t, c.ensureCoordinatedLease(ctx))
	require.NoError(t, c.register(ctx))
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	go c.answerPings(pctx)

	lcs := cs.CoordinationV1alpha2().LeaseCandidates(ns)
	var pinged time.Time
	require.Eventually(t, func() bool { // ping, as the controller does, until one lands
		lc, err := lcs.Get(ctx, "app-0", metav1.GetOptions{})
		if err != nil {
			return false
		}
		if pinged.IsZero() {
			at := metav1.NewMicroTime(lc.Spec.RenewTime.Add(time.Millisecond))
			lc.Spec.PingTime = &at
			if _, err := lcs.Update(ctx, lc, metav1.UpdateOptions{}); err != nil {
				return false
			}
			pinged = at.Time
			return false
		}
		return lc.Spec.RenewTime != nil && lc.Spec.RenewTime.After(pinged)
	}, 10*time.Second, 20*time.Millisecond, "the ping is answered")
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }
