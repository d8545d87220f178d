package kubeexp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ringside/ringside/experiments/backend/kube"
	"github.com/ringside/ringside/leaderapp"
)

// splitRun is one repetition of kube-split-brain: an application's
// replicas (leaderapp beside an elector each, every elector reaching the
// API server through a fault relay of its own), writers, and the fault
// on the leader. Where the replicas run is its replicas': local processes
// (splitProcs) or Pods on kind (splitPods); the writers reach each
// replica at url with hc.
type splitRun struct {
	cell splitCell
	t    kube.Timing
	pods []string
	url  map[string]string
	hc   *http.Client
	reps splitReplicas
}

// splitReplicas runs the replicas of one repetition.
type splitReplicas interface {
	// start brings the replicas up: the victim's elector alone until it
	// leads (with the skewed clock, if the cell has one), then the
	// others', then every application, and waits until all follow the
	// victim.
	start(ctx context.Context) error
	// The faults, on (true) and lifted (false): freeze stops the
	// replica's elector and application together (a paused process or
	// VM); cut takes the API server from its elector; overrun holds what
	// its elector sends to the API server past the renew deadline.
	freeze(ctx context.Context, pod string, on bool) error
	cut(ctx context.Context, pod string, on bool) error
	overrun(ctx context.Context, pod string, on bool) error
	// stopApps ends the applications (what they apply after it is not
	// counted) and returns their write logs, each replica's in the order
	// it applied them.
	stopApps(ctx context.Context) ([]appliedWrite, error)
	// crashed names a replica that died on its own.
	crashed() error
	close()
}

// appPoll is how often a replica asks its sidecar who leads.
const appPoll = 50 * time.Millisecond

// replicaNames are the replicas' names: app-0 (the victim) to app-<n-1>.
func replicaNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "app-" + strconv.Itoa(i)
	}
	return out
}

// victim is the replica that leads when the fault hits: it starts first.
func (r *splitRun) victim() string { return r.pods[0] }

// appArgs are the flags of every replica's application but its name,
// listener and peers.
func appArgs(sidecar string, fencing bool) []string {
	return []string{"--sidecar", sidecar, "--write-work", "0", "--read-work", "0", "--poll", appPoll.String(),
		"--write-log", "--log-level", "error", "--fencing=" + strconv.FormatBool(fencing)}
}

// parseApplied reads one line of a replica's write log (leaderapp
// --write-log); other lines are not writes.
func parseApplied(line []byte, pod string) (appliedWrite, bool) {
	var l struct {
		TS     int64  `json:"ts_ns"`
		Key    string `json:"key"`
		Seq    uint64 `json:"seq"`
		Term   int64  `json:"term"`
		As     string `json:"as"`
		Leader string `json:"leader"`
	}
	if json.Unmarshal(line, &l) != nil || l.Key == "" {
		return appliedWrite{}, false
	}
	return appliedWrite{At: time.Unix(0, l.TS), Replica: pod, Key: l.Key, Seq: l.Seq, Term: l.Term, Leader: l.Leader, AsLeader: l.As == "leader"}, true
}

// inject holds the fault on the victim for d and lifts it.
func (r *splitRun) inject(ctx context.Context, d time.Duration) error {
	var fault func(ctx context.Context, pod string, on bool) error
	switch r.cell.fault {
	case faultPause:
		fault = r.reps.freeze
	case faultPartition, faultSkew:
		fault = r.reps.cut
	case faultOverrun:
		fault = r.reps.overrun
	default:
		return fmt.Errorf("fault %q", r.cell.fault)
	}
	v := r.victim()
	if err := fault(ctx, v, true); err != nil {
		return fmt.Errorf("%s on %s: %w", r.cell.fault, v, err)
	}
	var waited error
	select {
	case <-time.After(d):
	case <-ctx.Done():
		waited = ctx.Err()
	}
	// Lifted even when the run is cancelled: a frozen container or a
	// rule left behind would outlive it (the namespace goes anyway).
	lift, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := fault(lift, v, false); err != nil {
		return fmt.Errorf("lift %s on %s: %w", r.cell.fault, v, err)
	}
	return waited
}

// writers write until stop is closed: writer i owns keys w<i>-k<j>, writes
// them in turn with values w<i>-<attempt>, each to the next replica in
// turn (a follower forwards it), and returns the writes acknowledged.
func (r *splitRun) writers(n int, stop <-chan struct{}) func() []ackedWrite {
	var mu sync.Mutex
	var acked []ackedWrite
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			for attempt := 1; ; attempt++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("w%d-k%d", i, attempt%splitKeys)
				pod := r.pods[(i+attempt)%len(r.pods)]
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				req, err := http.NewRequestWithContext(ctx, http.MethodPut, r.url[pod]+"/kv/"+key, strings.NewReader(fmt.Sprintf("w%d-%d", i, attempt)))
				if err != nil {
					cancel()
					continue
				}
				resp, err := r.hc.Do(req)
				if err != nil {
					cancel()
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				cancel()
				seq, err := strconv.ParseUint(resp.Header.Get(leaderapp.HeaderSeq), 10, 64)
				if resp.StatusCode == http.StatusNoContent && err == nil {
					mu.Lock()
					acked = append(acked, ackedWrite{Key: key, Attempt: attempt, Seq: seq, Leader: resp.Header.Get(leaderapp.HeaderLeader)})
					mu.Unlock()
				}
			}
		})
	}
	return func() []ackedWrite {
		wg.Wait()
		return acked
	}
}

// splitKeys is how many keys each writer cycles through: few, so that a
// stale leader and its successor write the same keys.
const splitKeys = 8

// final reads every key of every writer from every replica: replica → key
// → the attempt its value carries.
func (r *splitRun) final(ctx context.Context, writers int) (map[string]map[string]int, error) {
	out := map[string]map[string]int{}
	for _, pod := range r.pods {
		out[pod] = map[string]int{}
		for i := range writers {
			for j := range splitKeys {
				key := fmt.Sprintf("w%d-k%d", i, j)
				rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				req, _ := http.NewRequestWithContext(rctx, http.MethodGet, r.url[pod]+"/kv/"+key, nil)
				resp, err := r.hc.Do(req)
				if err != nil {
					cancel()
					return nil, fmt.Errorf("read %s at %s: %w", key, pod, err)
				}
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
				resp.Body.Close()
				cancel()
				if resp.StatusCode == http.StatusNotFound {
					continue
				}
				_, a, ok := strings.Cut(string(b), "-")
				n, err := strconv.Atoi(a)
				if resp.StatusCode != http.StatusOK || !ok || err != nil {
					return nil, fmt.Errorf("read %s at %s: %s %q", key, pod, resp.Status, b)
				}
				out[pod][key] = n
			}
		}
	}
	return out, nil
}
