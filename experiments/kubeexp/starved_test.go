package kubeexp

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/ringside/ringside/experiments/backend/kube"
)

// An application is starved once every candidate was refused, and refused
// again a retry period or more after its first refusal.
func TestStarvedNeedsEveryCandidateRefusedAgainARetryLater(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ev := func(id, event string, after time.Duration) kube.Event {
		return kube.Event{TS: t0.Add(after), Event: event, ID: "ns/" + id, Election: "ns/x"}
	}
	retry := 2 * time.Second
	both := []string{"ns/a", "ns/b"}
	for _, tc := range []struct {
		name   string
		events []kube.Event
		want   bool
	}{
		{"each refused twice, a retry apart", []kube.Event{ev("a", "refused", 0), ev("b", "refused", 50*time.Millisecond),
			ev("a", "refused", 2*time.Second), ev("b", "refused", 3*time.Second)}, true},
		{"b's second refusal too soon", []kube.Event{ev("a", "refused", 0), ev("b", "refused", time.Second),
			ev("a", "refused", 2*time.Second), ev("b", "refused", 2900*time.Millisecond)}, false},
		{"b never refused", []kube.Event{ev("a", "refused", 0), ev("a", "refused", 5*time.Second)}, false},
		{"other events do not count", []kube.Event{ev("a", "campaign", 0), ev("b", "campaign", 0),
			ev("a", "refused", 2*time.Second), ev("b", "refused", 2*time.Second)}, false},
		{"recorded out of order", []kube.Event{ev("a", "refused", 2*time.Second), ev("b", "refused", 2*time.Second),
			ev("a", "refused", 0), ev("b", "refused", 0)}, true},
	} {
		assert.Equal(t, tc.want, starved(tc.events, both, retry), tc.name)
	}
	assert.False(t, starved(nil, nil, retry), "no candidates: nothing starved")
}
