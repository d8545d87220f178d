package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ringside/ringside/agent/lifecycle"
)

// WorkerState is everything the agent knows of a worker, as stored in
// Redis and shown on the dashboard.
type WorkerState struct {
	ID       string    `json:"id"`
	Name     string    `json:"name"`
	Addr     string    `json:"addr"`
	Default  bool      `json:"default"`
	CPULimit float64   `json:"cpu_limit"`
	State    string    `json:"state"` // low, medium, high, sundown
	Since    int64     `json:"since_unix_ms"`
	Score    float64   `json:"score"`
	CPU      float64   `json:"cpu_pct"`
	Mem      float64   `json:"mem_pct"`
	NetMBps  float64   `json:"net_mbps"`
	Avail    float64   `json:"avail_score"`
	Weight   float64   `json:"weight"`
	Active   int64     `json:"active"`
	Requests uint64    `json:"requests"`
	Times    []float64 `json:"response_ms,omitempty"` // availability window, oldest first
}

// Snapshot is the agent's persisted state: desired and actual workers.
type Snapshot struct {
	Desired int           `json:"desired"`
	Workers []WorkerState `json:"workers"`
}

// Store persists snapshots so that a restarted agent resumes.
type Store interface {
	Save(ctx context.Context, s Snapshot) error
	Load(ctx context.Context) (Snapshot, bool, error)
}

// RedisStore keeps the snapshot under a key prefix: PREFIX:desired (the
// number of workers the agent wants) and PREFIX:workers (a hash, worker
// ID → JSON), written in one MULTI so a reader never sees half a step.
type RedisStore struct {
	rdb    *redis.Client
	prefix string
}

// NewRedisStore uses rdb under prefix (default "ringside:agent").
func NewRedisStore(rdb *redis.Client, prefix string) *RedisStore {
	if prefix == "" {
		prefix = "ringside:agent"
	}
	return &RedisStore{rdb: rdb, prefix: prefix}
}

func (r *RedisStore) Save(ctx context.Context, s Snapshot) error {
	fields := make([]any, 0, 2*len(s.Workers))
	for _, w := range s.Workers {
		b, err := json.Marshal(w)
		if err != nil {
			return fmt.Errorf("encode worker %s: %w", w.ID, err)
		}
		fields = append(fields, w.ID, b)
	}
	_, err := r.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, r.prefix+":workers")
		if len(fields) > 0 {
			p.HSet(ctx, r.prefix+":workers", fields...)
		}
		p.Set(ctx, r.prefix+":desired", s.Desired, 0)
		return nil
	})
	if err != nil {
		return fmt.Errorf("save state to redis: %w", err)
	}
	return nil
}

// Load returns the stored snapshot; ok is false when there is none. A
// corrupt entry is an error naming it, not a silent fresh start.
func (r *RedisStore) Load(ctx context.Context) (Snapshot, bool, error) {
	d, err := r.rdb.Get(ctx, r.prefix+":desired").Result()
	if err == redis.Nil {
		return Snapshot{}, false, nil
	}
	if err != nil {
		return Snapshot{}, false, fmt.Errorf("load state from redis: %w", err)
	}
	all, err := r.rdb.HGetAll(ctx, r.prefix+":workers").Result()
	if err != nil {
		return Snapshot{}, false, fmt.Errorf("load workers from redis: %w", err)
	}
	s, err := decodeSnapshot(r.prefix, d, all)
	return s, err == nil, err
}

// Bounds on a stored snapshot: anyone who can write to Redis writes it,
// and a restarted agent acts on it.
const (
	maxStoredWorkers = 4096
	maxStoredTimes   = 1024
)

// decodeSnapshot reads PREFIX:desired and the PREFIX:workers hash. Every
// worker is checked like input: its hash key is its ID, its state one the
// lifecycle knows, its numbers finite and in range.
func decodeSnapshot(prefix, desired string, workers map[string]string) (Snapshot, error) {
	var s Snapshot
	var err error
	if s.Desired, err = strconv.Atoi(desired); err != nil || s.Desired < 0 || s.Desired > maxStoredWorkers {
		return Snapshot{}, fmt.Errorf("redis %s:desired = %q: want a count of workers, 0 to %d", prefix, desired, maxStoredWorkers)
	}
	if len(workers) > maxStoredWorkers {
		return Snapshot{}, fmt.Errorf("redis %s:workers holds %d workers, over %d", prefix, len(workers), maxStoredWorkers)
	}
	for id, raw := range workers {
		var w WorkerState
		if err := json.Unmarshal([]byte(raw), &w); err != nil {
			return Snapshot{}, fmt.Errorf("redis %s:workers[%q]: %w", prefix, id, err)
		}
		if err := w.check(id); err != nil {
			return Snapshot{}, fmt.Errorf("redis %s:workers[%q]: %w", prefix, id, err)
		}
		if len(w.Times) == 0 {
			w.Times = nil // as saved: an empty window is left out
		}
		s.Workers = append(s.Workers, w)
	}
	sortWorkers(s.Workers)
	return s, nil
}

// check validates a stored worker filed under key.
func (w WorkerState) check(key string) error {
	switch {
	case w.ID == "" || w.ID != key:
		return fmt.Errorf("id %q, filed under %q", w.ID, key)
	case !slices.Contains([]lifecycle.State{"", lifecycle.Low, lifecycle.Medium, lifecycle.High, lifecycle.Sundown}, lifecycle.State(w.State)):
		return fmt.Errorf("state %q: want low, medium, high, sundown or none yet", w.State)
	case len(w.Times) > maxStoredTimes:
		return fmt.Errorf("%d response times, over %d", len(w.Times), maxStoredTimes)
	case w.Active < 0:
		return fmt.Errorf("active %d: negative", w.Active)
	}
	for name, v := range map[string]float64{"cpu_limit": w.CPULimit, "cpu_pct": w.CPU, "mem_pct": w.Mem, "net_mbps": w.NetMBps, "weight": w.Weight} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return fmt.Errorf("%s %v: want a finite number, 0 or more", name, v)
		}
	}
	for name, v := range map[string]float64{"score": w.Score, "avail_score": w.Avail} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%s %v: want a finite number", name, v)
		}
	}
	for _, ms := range w.Times {
		if math.IsNaN(ms) || ms < 0 || ms > float64(math.MaxInt64/int64(time.Millisecond)) {
			return fmt.Errorf("response time %v ms: out of range", ms)
		}
	}
	return nil
}
