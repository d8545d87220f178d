package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ringside/ringside/internal/weightfeed"
)

// A balancer listening on every interface is, to the feed, any of this
// host's addresses with its port: each is refused as a worker.
func TestSelfAddrs(t *testing.T) {
	got := selfAddrs(":8080", "127.0.0.1:9090")
	assert.Contains(t, got, ":8080")
	assert.Contains(t, got, "127.0.0.1:8080", "the loopback interface's address, with the proxy's port")
	assert.Contains(t, got, "127.0.0.1:9090")
	assert.NotContains(t, got, "127.0.0.1:7000")
}

// An unknown front, by flag or environment, is refused by name, with the
// ones there are.
func TestUnknownFrontRefused(t *testing.T) {
	err := run(t.Context(), []string{"--workers", "127.0.0.1:1=1", "--addr", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--front", "gnet"})
	assert.ErrorContains(t, err, `--front "gnet": want one of epoll, fasthttp, conn, net/http`)
	t.Setenv("BALANCER_FRONT", "fast http")
	err = run(t.Context(), []string{"--workers", "127.0.0.1:1=1", "--addr", "127.0.0.1:0", "--admin", "127.0.0.1:0"})
	assert.ErrorContains(t, err, `--front "fast http": want one of`, "the environment's value is refused the same way")
}

// --workers: a bad item is named as written, with what is wrong with it.
func TestParseWorkersNamesTheBadItem(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:1=NaN":              `item 1 "127.0.0.1:1=NaN": the weight must be a finite number ≥ 0`,
		"127.0.0.1:1=1,127.0.0.1:2=-1": `item 2 "127.0.0.1:2=-1": the weight must be a finite number ≥ 0`,
		"127.0.0.1:1=+Inf":             `the weight must be a finite number ≥ 0`,
		"127.0.0.1=1":                  `item 1 "127.0.0.1=1": want host:port=weight`,
		"127.0.0.1:1":                  `want host:port=weight`,
		"":                             `want host:port=weight`,
	} {
		_, err := parseWorkers(in)
		assert.ErrorContains(t, err, want, in)
	}
	_, err := parseWorkers(strings.Repeat("127.0.0.1:1=1,", weightfeed.MaxWorkers) + "127.0.0.1:1=1")
	assert.ErrorContains(t, err, fmt.Sprintf("--workers: %d items, at most %d", weightfeed.MaxWorkers+1, weightfeed.MaxWorkers))
	m, err := parseWorkers(" 127.0.0.1:1=2 ,[::1]:2=0.5")
	require.NoError(t, err)
	require.NoError(t, m.Validate())
	assert.Equal(t, "[::1]:2", m.Workers[1].Addr)
	assert.Equal(t, 0.5, m.Workers[1].Weight)
}

// What parseWorkers accepts is the list as written — an item per worker,
// its address and weight — and the table takes it, unless the weights
// together leave no worker to pick or overflow (checked on the table).
func FuzzParseWorkers(f *testing.F) {
	for _, s := range []string{"127.0.0.1:1=1", "a:1=0,b:2=3.5", "x:1=1e308,y:2=1e308", "a:1=0", "[::1]:80=1,", ":1=NaN", "a:b=c=d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := parseWorkers(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "--workers") {
				t.Fatalf("error does not name the flag: %v", err)
			}
			return
		}
		items := strings.Split(s, ",")
		if len(m.Workers) != len(items) {
			t.Fatalf("%d items, %d workers", len(items), len(m.Workers))
		}
		for i, w := range m.Workers {
			addr, weight, _ := strings.Cut(strings.TrimSpace(items[i]), "=")
			v, _ := strconv.ParseFloat(weight, 64)
			if w.Addr != addr || w.Weight != v || !(v >= 0) || math.IsInf(v, 0) {
				t.Fatalf("item %q became worker %+v", items[i], w)
			}
		}
		if err := m.Validate(); err != nil && !strings.HasPrefix(err.Error(), "workers: ") {
			t.Fatalf("an item the table refuses passed the flag's check: %v", err)
		}
	})
}
