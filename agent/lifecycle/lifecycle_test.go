package lifecycle

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Unix(0, 0)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func pool(t *testing.T, cfg Config) *Pool {
	p, err := NewPool(cfg)
	require.NoError(t, err)
	return p
}

func TestCategoriesWithHysteresis(t *testing.T) {
	c := Config{}.WithDefaults() // low 30, high 75, h 5
	cases := []struct {
		cur  State
		u    float64
		want State
	}{
		{Medium, 29, Low}, {Low, 33, Low}, {Low, 36, Medium}, {Medium, 74, Medium},
		{Medium, 75, High}, {High, 71, High}, {High, 69, Medium}, {High, 10, Low}, {Low, 90, High},
	}
	for _, k := range cases {
		assert.Equal(t, k.want, c.Category(k.cur, k.u), "%s at %v", k.cur, k.u)
	}
}

func TestSundownThenShutdown(t *testing.T) {
	p := pool(t, Config{Min: 1, SundownAfter: 10 * time.Second, DrainGrace: 2 * time.Second})
	p.Add("d", true, t0)
	p.Add("x", false, t0)
	idle := []Observation{{ID: "d", Utilisation: 5}, {ID: "x", Utilisation: 5, Active: 3}}
	assert.Empty(t, p.Step(at(1), idle))
	assert.Empty(t, p.Step(at(10), idle), "t_low counts from entering Low at 1 s")
	assert.Equal(t, []Action{{SundownA, "x"}}, p.Step(at(11), idle))
	// The default worker is never sundowned; x still has connections.
	assert.Empty(t, p.Step(at(30), idle))
	idle[1].Active = 0
	assert.Equal(t, []Action{{Shutdown, "x"}}, p.Step(at(31), idle))
	p.Remove("x")
	assert.Empty(t, p.Step(at(100), idle[:1]), "the default worker stays for ever")
}

func TestNeverBelowMinimum(t *testing.T) {
	p := pool(t, Config{Min: 2, SundownAfter: time.Second})
	p.Add("a", false, t0)
	p.Add("b", false, t0)
	obs := []Observation{{ID: "a"}, {ID: "b"}}
	for s := 1.0; s < 20; s++ {
		assert.Empty(t, p.Step(at(s), obs))
	}
	p.Remove("b") // b died
	assert.Equal(t, []Action{{Kind: Refill}}, p.Step(at(21), obs[:1]))
}

func TestScaleUpOnSustainedHigh(t *testing.T) {
	p := pool(t, Config{Min: 1, Max: 2, ScaleUpAfter: 5 * time.Second, SundownAfter: time.Second})
	p.Add("a", true, t0)
	busy := []Observation{{ID: "a", Utilisation: 90}}
	assert.Empty(t, p.Step(at(1), busy))
	assert.Empty(t, p.Step(at(3), []Observation{{ID: "a", Utilisation: 50}}), "a dip resets the window")
	assert.Empty(t, p.Step(at(4), busy))
	assert.Empty(t, p.Step(at(8), busy))
	assert.Equal(t, []Action{{Kind: ScaleUp}}, p.Step(at(9), busy))
	p.Add("b", false, at(9))
	busy = append(busy, Observation{ID: "b", Utilisation: 90})
	assert.Empty(t, p.Step(at(20), busy), "at the maximum")

	// Load drops: b goes to sundown; load returns: b is revived, not a new worker.
	idle := []Observation{{ID: "a", Utilisation: 1, Active: 1}, {ID: "b", Utilisation: 1, Active: 1}}
	p.Step(at(21), idle)
	assert.Equal(t, []Action{{SundownA, "b"}}, p.Step(at(22), idle))
	busy = busy[:1]
	p.Step(at(23), busy)
	assert.Equal(t, []Action{{Revive, "b"}}, p.Step(at(28), busy))
	w, _ := p.Get("b")
	assert.Equal(t, Medium, w.State)
}

func TestRestoreResumes(t *testing.T) {
	p := pool(t, Config{})
	p.Add("a", true, t0)
	p.Step(at(1), []Observation{{ID: "a", Utilisation: 99}})
	q := pool(t, Config{})
	q.Restore(p.Workers())
	assert.Equal(t, p.Workers(), q.Workers())
	assert.Equal(t, High, q.Workers()[0].State)
}

func TestConfigValidate(t *testing.T) {
	_, err := NewPool(Config{Low: 80, High: 70})
	assert.ErrorContains(t, err, "low < high")
	_, err = NewPool(Config{Low: 40, High: 50, Hysteresis: 6})
	assert.ErrorContains(t, err, "hysteresis")
	_, err = NewPool(Config{Min: 3, Max: 2})
	assert.ErrorContains(t, err, "min=3 max=2")
}
