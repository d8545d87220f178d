// Package weightfeed is the wire format between the deployment agent and
// its balancers (seed 004 §2.2): the agent pushes the ordered queue of
// workers with their scores and weights; balancers answer with what they
// saw per worker. Messages are JSON text frames on a websocket.
//
// Decoders validate everything a balancer would act on, so a malformed
// message is rejected as a whole and the last good table stays in force.
package weightfeed

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"slices"

	"github.com/ringside/ringside/balancer/pick"
)

// Message types.
const (
	TypeWeights = "weights"
	TypeTally   = "tally"
)

// Worker categories (seed 004 §2.3) and the states beside them.
const (
	CategoryLow    = "low"
	CategoryMedium = "medium"
	CategoryHigh   = "high"
	StateActive    = "active"
	StateSundown   = "sundown"
)

// Worker is one entry of the queue.
type Worker struct {
	ID       string  `json:"id"`
	Addr     string  `json:"addr"` // host:port the balancer proxies to
	Score    float64 `json:"score"`
	Category string  `json:"category"`
	State    string  `json:"state"`
	Weight   float64 `json:"weight"`
}

// Weights is the agent's periodic push: the queue ordered by descending
// score, and a sequence number so a balancer can tell a stale message.
type Weights struct {
	Type    string   `json:"type"`
	Seq     uint64   `json:"seq"`
	Workers []Worker `json:"workers"`
}

// WorkerTally is what one balancer saw of one worker.
type WorkerTally struct {
	ID       string `json:"id"`
	Active   int64  `json:"active"`   // requests in flight now
	Requests uint64 `json:"requests"` // since the balancer started
	Failures uint64 `json:"failures"`
}

// Tally is a balancer's answer.
type Tally struct {
	Type     string        `json:"type"`
	Balancer string        `json:"balancer"`
	Workers  []WorkerTally `json:"workers"`
}

// MaxWorkers bounds a message, so a hostile peer cannot make us allocate
// without limit; far above any host's worker count.
const MaxWorkers = 4096

var categories = []string{CategoryLow, CategoryMedium, CategoryHigh}

func decodeStrict(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("trailing data after the message")
	}
	return nil
}

// DecodeWeights parses and validates a weights message: a known type, at
// most MaxWorkers workers with unique non-empty IDs, host:port addresses,
// known categories and states, finite non-negative weights and scores, a
// sundown worker at weight 0, and at least one positive weight.
func DecodeWeights(b []byte) (Weights, error) {
	var m Weights
	if err := decodeStrict(b, &m); err != nil {
		return Weights{}, fmt.Errorf("weights message: %w", err)
	}
	if err := m.Validate(); err != nil {
		return Weights{}, fmt.Errorf("weights message: %w", err)
	}
	return m, nil
}

// Validate checks m as DecodeWeights does.
func (m Weights) Validate() error {
	if m.Type != TypeWeights {
		return fmt.Errorf("type %q: want %q", m.Type, TypeWeights)
	}
	if len(m.Workers) > MaxWorkers {
		return fmt.Errorf("%d workers: at most %d", len(m.Workers), MaxWorkers)
	}
	seen := make(map[string]bool, len(m.Workers))
	weights := make([]float64, 0, len(m.Workers))
	for i, w := range m.Workers {
		at := fmt.Sprintf("workers[%d]", i)
		if w.ID == "" {
			return fmt.Errorf("%s.id is empty", at)
		}
		if seen[w.ID] {
			return fmt.Errorf("%s.id %q is repeated", at, w.ID)
		}
		seen[w.ID] = true
		if _, _, err := net.SplitHostPort(w.Addr); err != nil || w.Addr == "" {
			return fmt.Errorf("%s.addr %q: want host:port", at, w.Addr)
		}
		if !slices.Contains(categories, w.Category) {
			return fmt.Errorf("%s.category %q: want low, medium or high", at, w.Category)
		}
		if w.State != StateActive && w.State != StateSundown {
			return fmt.Errorf("%s.state %q: want active or sundown", at, w.State)
		}
		if math.IsNaN(w.Score) || w.Score < 0 || w.Score > 100 {
			return fmt.Errorf("%s.score %v: must be in [0, 100]", at, w.Score)
		}
		if w.State == StateSundown && w.Weight != 0 {
			return fmt.Errorf("%s: a sundown worker must have weight 0, has %v", at, w.Weight)
		}
		weights = append(weights, w.Weight)
	}
	if err := pick.CheckWeights(weights, false); err != nil {
		return fmt.Errorf("workers: %w", err)
	}
	return nil
}

// DecodeTally parses and validates a balancer's tally: what it saw of each worker.
func DecodeTally(b []byte) (Tally, error) {
	var m Tally
	if err := decodeStrict(b, &m); err != nil {
		return Tally{}, fmt.Errorf("tally message: %w", err)
	}
	if m.Type != TypeTally {
		return Tally{}, fmt.Errorf("tally message: type %q: want %q", m.Type, TypeTally)
	}
	if len(m.Workers) > MaxWorkers {
		return Tally{}, fmt.Errorf("tally message: %d workers: at most %d", len(m.Workers), MaxWorkers)
	}
	for i, w := range m.Workers {
		if w.ID == "" {
			return Tally{}, fmt.Errorf("tally message: workers[%d].id is empty", i)
		}
		if w.Active < 0 {
			return Tally{}, fmt.Errorf("tally message: workers[%d].active %d is negative", i, w.Active)
		}
	}
	return m, nil
}
