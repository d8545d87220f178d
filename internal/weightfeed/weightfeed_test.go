package weightfeed

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func good() Weights {
	return Weights{Type: TypeWeights, Seq: 3, Workers: []Worker{
		{ID: "a", Addr: "127.0.0.1:9001", Score: 90, Category: CategoryLow, State: StateActive, Weight: 90},
		{ID: "b", Addr: "worker-2:8080", Score: 10, Category: CategoryHigh, State: StateSundown, Weight: 0},
	}}
}

func TestWeightsRoundTrip(t *testing.T) {
	b, err := json.Marshal(good())
	require.NoError(t, err)
	m, err := DecodeWeights(b)
	require.NoError(t, err)
	assert.Equal(t, good(), m)
}

func TestWeightsRejected(t *testing.T) {
	cases := map[string]struct {
		edit func(*Weights)
		raw  string
		want string
	}{
		"nan":      {raw: `{"type":"weights","workers":[{"id":"a","addr":"h:1","score":1,"category":"low","state":"active","weight":NaN}]}`, want: "invalid character"},
		"negative": {edit: func(m *Weights) { m.Workers[0].Weight = -1 }, want: "workers: weight[0] = -1"},
		"sum overflows": {edit: func(m *Weights) {
			m.Workers[1].State, m.Workers[0].Weight, m.Workers[1].Weight = StateActive, math.MaxFloat64, math.MaxFloat64
		}, want: "workers: the 2 weights sum past the largest float64"},
		"all zero":    {edit: func(m *Weights) { m.Workers[0].Weight = 0 }, want: "workers: all 2 weights are zero"},
		"no workers":  {edit: func(m *Weights) { m.Workers = nil }, want: "workers: no weights"},
		"dup id":      {edit: func(m *Weights) { m.Workers[1].ID = "a" }, want: `workers[1].id "a" is repeated`},
		"bad addr":    {edit: func(m *Weights) { m.Workers[0].Addr = "nohost" }, want: "workers[0].addr"},
		"category":    {edit: func(m *Weights) { m.Workers[0].Category = "huge" }, want: "workers[0].category"},
		"sundown>0":   {edit: func(m *Weights) { m.Workers[1].Weight = 5 }, want: "sundown worker must have weight 0"},
		"score":       {edit: func(m *Weights) { m.Workers[0].Score = 101 }, want: "workers[0].score"},
		"type":        {edit: func(m *Weights) { m.Type = "tally" }, want: `type "tally"`},
		"unknown key": {raw: `{"type":"weights","bogus":1}`, want: "unknown field"},
		"trailing":    {raw: `{"type":"weights"} {}`, want: "trailing data"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			raw := []byte(c.raw)
			if c.edit != nil {
				m := good()
				c.edit(&m)
				raw, _ = json.Marshal(m)
			}
			_, err := DecodeWeights(raw)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

func TestReport(t *testing.T) {
	r, err := DecodeTally([]byte(`{"type":"tally","balancer":"b","workers":[{"id":"a","active":2,"requests":10,"failures":1}]}`))
	require.NoError(t, err)
	assert.Equal(t, int64(2), r.Workers[0].Active)
	_, err = DecodeTally([]byte(`{"type":"tally","workers":[{"id":"a","active":-2}]}`))
	assert.ErrorContains(t, err, "workers[0].active -2 is negative")
	_, err = DecodeTally([]byte(`{"type":"tally","workers":[{"id":""}]}`))
	assert.ErrorContains(t, err, "workers[0].id is empty")
}

func FuzzDecodeWeights(f *testing.F) {
	b, _ := json.Marshal(good())
	f.Add(b)
	f.Add([]byte(`{"type":"weights","workers":[]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeWeights(b)
		if err != nil {
			return
		}
		// Whatever is accepted must be usable as is.
		require.NoError(t, m.Validate())
		sum := 0.0
		for _, w := range m.Workers {
			sum += w.Weight
		}
		require.Greater(t, sum, 0.0)
	})
}

func FuzzDecodeTally(f *testing.F) {
	f.Add([]byte(`{"type":"tally","balancer":"b","workers":[{"id":"a","active":2}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeTally(b)
		if err != nil {
			return
		}
		for _, w := range r.Workers {
			require.NotEmpty(t, w.ID)
			require.GreaterOrEqual(t, w.Active, int64(0))
		}
	})
}
