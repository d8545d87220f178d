package bld

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/ringside/ringside/bld/balance"
)

// A ranked candidate that cannot reach the API server yet when it starts
// (a relay beside it still starting) publishes its probe address once the
// server answers, instead of ending; a refusal ends it at once.
func TestPublishRetriesWhatMayPass(t *testing.T) {
	for _, c := range []struct {
		name     string
		fail     error
		attempts int32
		ok       bool
	}{
		{"connection refused", errors.New("dial tcp 127.0.0.1:6444: connect: connection refused"), 2, true},
		{"forbidden", apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "p", errors.New("no")), 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cs := fake.NewSimpleClientset(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: v1.PodSpec{NodeName: "n1"}})
			var attempts atomic.Int32
			cs.PrependReactor("patch", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
				if attempts.Add(1) == 1 {
					return true, nil, c.fail
				}
				return false, nil, nil
			})
			cand, err := NewCandidate(CandidateConfig{Algorithm: balance.Ranked, Election: "app", Namespace: "ns", Identity: "p", Client: cs,
				ProbeAddr: "10.0.0.1:4040", LeaseDuration: 300 * time.Millisecond, RenewDeadline: 200 * time.Millisecond, RetryPeriod: 10 * time.Millisecond})
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err = cand.publish(ctx)
			assert.Equal(t, c.attempts, attempts.Load())
			if !c.ok {
				assert.True(t, apierrors.IsForbidden(err), "%v", err)
				return
			}
			require.NoError(t, err)
			p, err := cs.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, "10.0.0.1:4040", p.Annotations[ProbeAnnotation])
			assert.Equal(t, "n1", cand.cfg.Node)
		})
	}
}
