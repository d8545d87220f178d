package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
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
	var s Snapshot
	if s.Desired, err = strconv.Atoi(d); err != nil {
		return Snapshot{}, false, fmt.Errorf("redis %s:desired = %q: %w", r.prefix, d, err)
	}
	all, err := r.rdb.HGetAll(ctx, r.prefix+":workers").Result()
	if err != nil {
		return Snapshot{}, false, fmt.Errorf("load workers from redis: %w", err)
	}
	for id, raw := range all {
		var w WorkerState
		if err := json.Unmarshal([]byte(raw), &w); err != nil {
			return Snapshot{}, false, fmt.Errorf("redis %s:workers[%s]: %w", r.prefix, id, err)
		}
		s.Workers = append(s.Workers, w)
	}
	sortWorkers(s.Workers)
	return s, true, nil
}
