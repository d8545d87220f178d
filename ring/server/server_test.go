package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ringside/ringside/internal/memnet"
	"github.com/ringside/ringside/ring"
	"github.com/ringside/ringside/ring/kv"
	"github.com/ringside/ringside/ring/membership"
	"github.com/ringside/ringside/ring/wire"
)

type node struct {
	*Server
	cancel context.CancelFunc
	done   chan error
}

// The tests' servers live on one in-memory network (internal/memnet):
// addresses are made up, so none is taken from the machine and none races
// for a free port; join, rebalance and anti-entropy run over it as over
// TCP. TestRingOverTCP keeps the sockets covered.
var (
	testNet   = memnet.New()
	hostCount atomic.Uint32
	// testClient is the tests' HTTP client: a host of its own on testNet.
	// Loopback addresses are TestRingOverTCP's real sockets.
	testClient = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
		if strings.HasPrefix(addr, "127.") {
			return new(net.Dialer).DialContext(ctx, "tcp", addr)
		}
		return testNet.Host(clientAddr).DialContext(ctx, addr)
	}}}
)

const clientAddr = "10.255.255.254:1"

// newAddr is a server address of its own on testNet.
func newAddr() string {
	n := hostCount.Add(1)
	return fmt.Sprintf("10.%d.%d.%d:7000", n>>16&0xff, n>>8&0xff, n&0xff)
}

const testSecret = "ring-secret-for-tests"

// startNode starts a server with R = testReplicas.
func startNode(t testing.TB, join ...string) *node {
	t.Helper()
	return startNodeAt(t, newAddr(), t.TempDir(), join...)
}

// testReplicas is R for the servers the tests start (withReplicas).
var testReplicas = 2

// withReplicas makes the servers the test starts keep r copies: a ring
// serves keys only with R+1 servers, and some tests run smaller rings.
func withReplicas(t testing.TB, r int) {
	old := testReplicas
	testReplicas = r
	t.Cleanup(func() { testReplicas = old })
}

// startNodeAt starts a server on addr with its data in dir: a restart
// when both are a stopped server's.
func startNodeAt(t testing.TB, addr, dir string, join ...string) *node {
	t.Helper()
	return run(t, testConfig(addr, dir, testNetwork(addr), join...))
}

// testNetwork is the network the servers the tests start are on
// (withNetwork), as seen from their address.
var testNetwork = func(addr string) Network { return testNet.Host(addr) }

// withNetwork puts the servers the test starts on the network f returns
// for their address.
func withNetwork(t testing.TB, f func(addr string) Network) {
	old := testNetwork
	testNetwork = f
	t.Cleanup(func() { testNetwork = old })
}

// testElection is the election the servers the tests start run
// (withElection).
var testElection = ring.ChangRoberts

// withElection makes the servers the test starts run the named election.
func withElection(t testing.TB, name string) {
	old := testElection
	testElection = name
	t.Cleanup(func() { testElection = old })
}

func testConfig(addr, dir string, network Network, join ...string) Config {
	return Config{Addr: addr, Join: join, Dir: dir, HopBound: 5 * time.Millisecond, AckTimeout: 5 * time.Millisecond, Secret: testSecret, Replicas: testReplicas,
		Election:       testElection,
		SuspectTimeout: 300 * time.Millisecond, HeartbeatInterval: 50 * time.Millisecond,
		Network: network, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// run starts a server and stops it when the test ends.
func run(t testing.TB, cfg Config) *node {
	t.Helper()
	s, err := New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	n := &node{Server: s, cancel: cancel, done: make(chan error, 1)}
	go func() { n.done <- s.Run(ctx) }()
	require.Eventually(t, func() bool { return s.currentMeta() != nil }, 5*time.Second, 5*time.Millisecond)
	t.Cleanup(n.stop)
	return n
}

// stop closes every socket at once: to its peers, a crash.
func (n *node) stop() {
	n.cancel()
	<-n.done
	n.done <- nil
}

func startRing(t testing.TB, k int) []*node {
	nodes := []*node{startNode(t)}
	for i := 1; i < k; i++ {
		nodes = append(nodes, startNode(t, nodes[0].Addr()))
	}
	require.Eventually(t, func() bool {
		first := nodes[0].currentMeta()
		for _, n := range nodes {
			m := n.currentMeta()
			// The same metadata everywhere, and every server settled: a
			// change still spreading makes replicas refuse an owner
			// (correctly) that the test means to be stable.
			// And every server leased: an owner serves only with a
			// majority's confirmation of this ring.
			if m == nil || first == nil || len(m.Servers) != k || m.Round != first.Round || m.Version != first.Version || !n.settled.Load() ||
				!n.Snapshot().Leased {
				return false
			}
		}
		return true
	}, 5*time.Second, 10*time.Millisecond, "all servers see the full ring")
	return nodes
}

// do sends one request as a client would: a 503 for want of a serving
// lease (Retry-After; a loaded machine delays the lease's renewal past its
// term now and then) is asked again for up to 10 s. doOnce does not.
func do(t *testing.T, method, url string, body []byte) (int, string) {
	t.Helper()
	return doUntil(t, method, url, body, func(msg string) bool { return strings.Contains(msg, noLease) })
}

// doSettled is do for a test's set-up, which needs the request to pass
// rather than to see how it fails: it asks again after any 503, as a
// client told Retry-After would — a loaded machine's missed heartbeats
// have the ring elect and change its metadata under the request now and
// then (a replica already on the new metadata refuses the old owner:
// "not acknowledged … stale owner").
func doSettled(t *testing.T, method, url string, body []byte) (int, string) {
	t.Helper()
	return doUntil(t, method, url, body, func(string) bool { return true })
}

// doUntil sends the request again, for up to 10 s, while it is answered
// 503 with a message that again accepts.
func doUntil(t *testing.T, method, url string, body []byte, again func(msg string) bool) (int, string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, msg := doOnce(t, method, url, body)
		if code != http.StatusServiceUnavailable || !again(msg) || time.Now().After(deadline) {
			return code, msg
		}
		select {
		case <-t.Context().Done():
			return code, msg
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// peerDo sends a request as a peer would, with secret (none when empty)
// and the given header pairs.
func peerDo(t *testing.T, method, url, body, secret string, header ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	if secret != "" {
		req.Header.Set(HeaderSecret, secret)
	}
	resp, err := testClient.Do(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func doOnce(t *testing.T, method, url string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	require.NoError(t, err)
	resp, err := testClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestJoinPutGetDeleteAnywhere(t *testing.T) {
	nodes := startRing(t, 4)
	for i := range 40 {
		code, msg := doSettled(t, http.MethodPut, fmt.Sprintf("http://%s/kv/k%d", nodes[i%4].Addr(), i), []byte(fmt.Sprint("v", i)))
		require.Equal(t, http.StatusNoContent, code, msg)
	}
	total := 0
	for _, n := range nodes {
		total += n.Snapshot().Keys
	}
	assert.Equal(t, 40*3, total, "owner plus two replicas each")
	for i := range 40 {
		code, body := do(t, http.MethodGet, fmt.Sprintf("http://%s/kv/k%d", nodes[(i+1)%4].Addr(), i), nil)
		require.Equal(t, http.StatusOK, code)
		assert.Equal(t, fmt.Sprint("v", i), body)
	}
	code, _ := do(t, http.MethodDelete, "http://"+nodes[2].Addr()+"/kv/k3", nil)
	require.Equal(t, http.StatusNoContent, code)
	code, _ = do(t, http.MethodGet, "http://"+nodes[1].Addr()+"/kv/k3", nil)
	assert.Equal(t, http.StatusNotFound, code)
}

// boundTCP is the TCP network with the server's socket bound before its
// address is chosen (port 0), so no test guesses a free port.
type boundTCP struct {
	tcpNetwork // dials as the server does by default
	ln         net.Listener
}

func (b boundTCP) Listen(addr string) (net.Listener, error) {
	if addr != b.ln.Addr().String() {
		return nil, fmt.Errorf("listen %s: the bound socket is %s", addr, b.ln.Addr())
	}
	return b.ln, nil
}

// The same server on real sockets: a ring forms over TCP (HTTP and the
// ring transport on one port), a write through one server is read through
// another, and when the coordinator dies the ring elects over TCP.
func TestRingOverTCP(t *testing.T) {
	withReplicas(t, 1)
	var nodes []*node
	for i := range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		var join []string
		if i > 0 {
			join = []string{nodes[0].Addr()}
		}
		nodes = append(nodes, run(t, testConfig(ln.Addr().String(), t.TempDir(), boundTCP{ln: ln}, join...)))
	}
	require.Eventually(t, func() bool {
		for _, n := range nodes {
			if m := n.currentMeta(); m == nil || len(m.Servers) != 3 {
				return false
			}
		}
		return true
	}, 5*time.Second, 10*time.Millisecond, "all servers see the full ring")
	for i := range 10 {
		code, msg := doSettled(t, http.MethodPut, fmt.Sprintf("http://%s/kv/k%d", nodes[i%3].Addr(), i), []byte(fmt.Sprint("v", i)))
		require.Equal(t, http.StatusNoContent, code, msg)
	}
	nodes[0].stop() // the bootstrap server is the coordinator
	live := nodes[1:]
	require.Eventually(t, func() bool {
		a, b := live[0].Snapshot(), live[1].Snapshot()
		return a.Leader != nodes[0].Addr() && a.Leader == b.Leader && len(a.Servers) == 2 && len(b.Servers) == 2
	}, 5*time.Second, 10*time.Millisecond, "the two live servers elect one leader over TCP")
	for i := range 10 {
		code, body := do(t, http.MethodGet, fmt.Sprintf("http://%s/kv/k%d", live[i%2].Addr(), i), nil)
		require.Equal(t, http.StatusOK, code, "k%d", i)
		assert.Equal(t, fmt.Sprint("v", i), body)
	}
}

func TestCoordinatorFailoverElectsMaxLive(t *testing.T) {
	nodes := startRing(t, 5)
	for i := range 30 {
		code, _ := doSettled(t, http.MethodPut, fmt.Sprintf("http://%s/kv/k%d", nodes[1].Addr(), i), []byte("x"))
		require.Equal(t, http.StatusNoContent, code)
	}
	nodes[0].stop() // the bootstrap server is the coordinator
	live := nodes[1:]
	requireFailedOver(t, live, 5*time.Second)
	for i := range 30 {
		code, _ := do(t, http.MethodGet, fmt.Sprintf("http://%s/kv/k%d", live[i%4].Addr(), i), nil)
		assert.Equal(t, http.StatusOK, code, "k%d survives its owner", i)
	}
	require.Eventually(t, func() bool {
		total := 0
		for _, n := range live {
			total += n.Snapshot().Keys
		}
		return total == 30*3
	}, 5*time.Second, 20*time.Millisecond, "re-replication restores three copies")
}

// requireFailedOver waits until every live server follows the max live
// UID with the dead one removed from the ring, and checks that it alone
// holds the coordinator role.
func requireFailedOver(t *testing.T, live []*node, within time.Duration) {
	t.Helper()
	var maxLive string
	for _, n := range live {
		if maxLive == "" || ring.UIDOf(maxLive).Less(ring.UIDOf(n.Addr())) {
			maxLive = n.Addr()
		}
	}
	require.Eventually(t, func() bool {
		for _, n := range live {
			if st := n.Snapshot(); st.Leader != maxLive || len(st.Servers) != len(live) {
				return false
			}
		}
		return true
	}, within, 10*time.Millisecond, "every live server follows the max live UID with the dead one removed")
	coords := 0
	for _, n := range live {
		if n.Snapshot().Coordinator {
			coords++
		}
	}
	assert.Equal(t, 1, coords, "one coordinator")
}

func TestMalformedInputKeepsServing(t *testing.T) {
	withReplicas(t, 1)
	nodes := startRing(t, 2)
	a := nodes[1].Addr()
	for _, tc := range []struct {
		method, path, body string
		code               int
		want               string
	}{
		{http.MethodPut, "/internal/metadata", `{"version":1}`, 400, "servers: empty"},
		{http.MethodPut, "/internal/metadata", `not json`, 400, "metadata"},
		{http.MethodPost, "/internal/join", `{"addr":"nope"}`, 400, "addr"},
		{http.MethodPost, "/internal/transfer", "\x00\x00\x00\x05ab", 400, "key needs 5 bytes"},
		{http.MethodPut, "/internal/replicate/k", "v", 400, "X-Ringside-Version"},
		{http.MethodPut, "/kv/" + strings.Repeat("k", 2000), "v", 400, "key: 2000 bytes"},
		{http.MethodPost, "/internal/pull?for=nope", "{}", 400, "for:"},
		{http.MethodPost, "/internal/pull?for=127.0.0.1:1", "garbage", 400, "pull"},
		{http.MethodPost, "/internal/pull?for=127.0.0.1:1", strings.Repeat("x", 2<<20), 400, "over 1 MiB"},
		{http.MethodGet, "/internal/profile/cpu", "", 400, "seconds \"\": want a whole number from 1 to 50"},
		{http.MethodGet, "/internal/profile/cpu?seconds=-1", "", 400, "seconds"},
		{http.MethodGet, "/internal/profile/cpu?seconds=9999999999999999999", "", 400, "seconds"},
		{http.MethodGet, "/internal/profile/heap?seconds=1", "", 404, `profile "heap": want cpu, block or trace`},
	} {
		req, _ := http.NewRequest(tc.method, "http://"+a+tc.path, strings.NewReader(tc.body))
		req.Header.Set(HeaderSecret, testSecret)
		resp, err := testClient.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, tc.code, resp.StatusCode, tc.path)
		assert.Contains(t, string(b), tc.want, tc.path)
	}

	// A forwarded request's depth is a client's input too: a negative,
	// huge or malformed one is refused (a negative one lifted the loop
	// guard), and the server serves on.
	meta := nodes[1].currentMeta()
	key := ""
	for i := 0; key == ""; i++ {
		if k := fmt.Sprint("k", i); meta.Owner(k) != a {
			key = k
		}
	}
	for _, h := range []string{"-1000000", "x", "99999999999999999999", "3"} {
		req, _ := http.NewRequest(http.MethodPut, "http://"+a+"/kv/"+key, strings.NewReader("v"))
		req.Header.Set(HeaderHops, h)
		resp, err := testClient.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, h)
		assert.Contains(t, string(b), HeaderHops, h)
	}

	// A garbage peer frame, and a well-formed ELECTED naming a usurper
	// from a dialler without the cluster secret: each connection is
	// closed, the server is fine and still follows its leader.
	bad := wire.Append(nil, ring.Message{Type: ring.MsgElection})
	bad[2] = 9
	forged := wire.Append(nil, ring.Message{Type: ring.MsgElected, From: ring.UIDOf("usurper"), To: nodes[0].self,
		Cand: ring.UIDOf("usurper"), Round: 1 << 60})
	for _, frame := range [][]byte{bad, forged} {
		c, err := testNet.Host(clientAddr).DialContext(context.Background(), a)
		require.NoError(t, err)
		c.Write(frame)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = c.Read(make([]byte, 1))
		assert.Error(t, err)
		c.Close()
	}

	code, _ := do(t, http.MethodPut, "http://"+a+"/kv/after", []byte("ok"))
	assert.Equal(t, http.StatusNoContent, code)
	var st Status
	_, body := do(t, http.MethodGet, "http://"+a+"/internal/status", nil)
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	assert.Equal(t, nodes[0].Addr(), st.Leader, "no election was triggered")
	_, metrics := do(t, http.MethodGet, "http://"+a+"/metrics", nil)
	assert.Contains(t, metrics, `ringnode_malformed_total{source="peer"} 2`)
}

func FuzzDecodeItems(f *testing.F) {
	f.Add(AppendItem(AppendItem(nil, Item{Key: "a"}), Item{Key: "b"}))
	f.Add([]byte{0, 0, 0, 1, 'k', 0, 0, 0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		items, err := DecodeItems(b)
		if err != nil {
			return
		}
		var again []byte
		for _, it := range items {
			again = AppendItem(again, it)
		}
		if !bytes.Equal(again, b) {
			t.Fatal("decode/encode not inverse")
		}
	})
}

// Any key — escaped and reserved characters included — round-trips
// through every path: to the owner, forwarded by a non-owner, replicated,
// and read back from each server.
func TestHostileKeysRoundTrip(t *testing.T) {
	nodes := startRing(t, 3)
	keys := []string{"%zz", "%25zz", "a?b", "a#b", "a/b", "../x", "..", ".", "a//b", "/a/", "a b", "ü", "a%2Fb", "?", "/", "k;v=1", "a\\b", strings.Repeat("k", 1024)}
	for i, key := range keys {
		for j, n := range nodes { // each server: the owner, and non-owners forwarding
			val := fmt.Sprintf("v%d-%d", i, j)
			code, msg := do(t, http.MethodPut, "http://"+n.Addr()+"/kv/"+kv.EscapeKey(key), []byte(val))
			require.Equal(t, http.StatusNoContent, code, "PUT %q via %s: %s", key, n.Addr(), msg)
			for _, r := range nodes {
				code, body := do(t, http.MethodGet, "http://"+r.Addr()+"/kv/"+kv.EscapeKey(key), nil)
				require.Equal(t, http.StatusOK, code, "GET %q via %s: %s", key, r.Addr(), body)
				require.Equal(t, val, body, "GET %q via %s", key, r.Addr())
			}
		}
		stored := 0
		for _, n := range nodes {
			if e, ok, _ := n.store.Get(key); ok && !e.Deleted {
				stored++
			}
		}
		assert.Equal(t, 3, stored, "%q: owner and both replicas hold it under its own name", key)
		code, _ := do(t, http.MethodDelete, "http://"+nodes[i%3].Addr()+"/kv/"+kv.EscapeKey(key), nil)
		require.Equal(t, http.StatusNoContent, code)
		code, _ = do(t, http.MethodGet, "http://"+nodes[(i+1)%3].Addr()+"/kv/"+kv.EscapeKey(key), nil)
		require.Equal(t, http.StatusNotFound, code, "%q deleted", key)
	}
	for _, n := range nodes {
		code, _ := do(t, http.MethodGet, "http://"+n.Addr()+"/healthz", nil)
		assert.Equal(t, http.StatusOK, code, "every server is still up")
	}
}

// A write whose replica is down is not acknowledged: 503 naming the
// missing server, never a 204 the ring cannot keep.
func TestWriteWithAReplicaDownIsNotAcknowledged(t *testing.T) {
	withReplicas(t, 1) // two of the three servers hold each key: one can go
	nodes := startRing(t, 3)
	down := nodes[2] // not the coordinator (nodes[0] bootstrapped the ring)
	meta := nodes[0].currentMeta()
	key := ""
	for i := 0; key == ""; i++ {
		k := fmt.Sprint("k", i)
		if r := meta.Responsible(k); r[0] != down.Addr() && slices.Contains(r, down.Addr()) {
			key = k
		}
	}
	owner := meta.Owner(key)
	down.stop()
	code, msg := do(t, http.MethodPut, "http://"+owner+"/kv/"+key, []byte("v"))
	assert.Equal(t, http.StatusServiceUnavailable, code, msg)
	assert.Contains(t, msg, "not acknowledged")
	assert.Contains(t, msg, down.Addr())

	// Once the coordinator has removed the dead server, the two left are
	// the whole ring and writes are acknowledged again.
	require.Eventually(t, func() bool {
		code, _ := do(t, http.MethodPut, "http://"+owner+"/kv/"+key, []byte("v2"))
		return code == http.StatusNoContent
	}, 5*time.Second, 20*time.Millisecond)
}

// FuzzKeyRoundTrip sends arbitrary keys through the HTTP path of a
// two-server ring (so half of them are forwarded): a key the server
// accepts reads back exactly what was written, and no key takes a server
// down.
func FuzzKeyRoundTrip(f *testing.F) {
	for _, k := range []string{"k", "%zz", "a?b", "a/b", "..", "ü", "a\x00b", " "} {
		f.Add(k)
	}
	withReplicas(f, 1)
	nodes := startRing(f, 2)
	f.Fuzz(func(t *testing.T, key string) {
		if key == "" || len(key) > 1024 {
			return
		}
		val := []byte("value of " + key)
		for _, n := range nodes {
			code, msg := do(t, http.MethodPut, "http://"+n.Addr()+"/kv/"+kv.EscapeKey(key), val)
			if code != http.StatusNoContent {
				t.Fatalf("PUT %q via %s: %d %s", key, n.Addr(), code, msg)
			}
			for _, r := range nodes {
				code, body := do(t, http.MethodGet, "http://"+r.Addr()+"/kv/"+kv.EscapeKey(key), nil)
				if code != http.StatusOK || body != string(val) {
					t.Fatalf("GET %q via %s: %d %q", key, r.Addr(), code, body)
				}
			}
		}
	})
}

// Peer-only endpoints refuse callers without the cluster secret: nobody
// can push metadata with a huge round, set a key's version, or read around
// the owner.
func TestPeerEndpointsNeedTheSecret(t *testing.T) {
	nodes := startRing(t, 2)
	a := nodes[1].Addr()
	before := nodes[1].currentMeta()
	huge, err := membership.New(math.MaxUint64, 1, a, 2, []string{a})
	require.NoError(t, err)
	for _, secret := range []string{"", "wrong-secret-of-16+"} {
		for _, tc := range []struct{ method, path, body string }{
			{http.MethodPut, "/internal/metadata", string(huge.Encode())},
			{http.MethodPut, "/internal/replicate/k", "v"},
			{http.MethodDelete, "/internal/replicate/k", ""},
			{http.MethodPost, "/internal/transfer", ""},
			{http.MethodPost, "/internal/join", `{"addr":"127.0.0.1:9"}`},
			{http.MethodGet, "/internal/kv/k", ""},
		} {
			resp, b := peerDo(t, tc.method, "http://"+a+tc.path, tc.body, secret, HeaderVersion, "18446744073709551615")
			assert.Equal(t, http.StatusForbidden, resp.StatusCode, "%s %s with %q", tc.method, tc.path, secret)
			assert.Contains(t, b, HeaderSecret)
		}
	}
	assert.Same(t, before, nodes[1].currentMeta(), "the ring was not taken over")
	_, ok, _ := nodes[1].store.Get("k")
	assert.False(t, ok, "no version was planted")
	code, _ := do(t, http.MethodGet, "http://"+a+"/internal/status", nil)
	assert.Equal(t, http.StatusOK, code, "the read-only views stay open")
	code, _ = do(t, http.MethodGet, "http://"+a+"/internal/ring", nil)
	assert.Equal(t, http.StatusOK, code)

	_, err = New(Config{Addr: newAddr(), Dir: t.TempDir(), Secret: "short", Network: testNet.Host(clientAddr)})
	assert.ErrorContains(t, err, "cluster secret")
}

// An acknowledged write survives its owner: killed right after the 204,
// the key is unavailable (503 naming the owner: a server cannot tell a
// dead owner from a cut-off one still taking writes) until the failover,
// and then the new owner serves the value.
func TestAcknowledgedWriteSurvivesItsOwner(t *testing.T) {
	nodes := startRing(t, 4)
	meta := nodes[0].currentMeta()
	var owner *node
	key := ""
	for i := 0; owner == nil; i++ {
		k := fmt.Sprint("k", i)
		for _, n := range nodes[1:] { // not the coordinator: one failure at a time
			if meta.Owner(k) == n.Addr() {
				owner, key = n, k
			}
		}
	}
	code, msg := do(t, http.MethodPut, "http://"+owner.Addr()+"/kv/"+key, []byte("kept"))
	require.Equal(t, http.StatusNoContent, code, msg)
	owner.stop()
	var other *node
	for _, n := range nodes {
		if n != owner {
			other = n
			break
		}
	}
	code, body := do(t, http.MethodGet, "http://"+other.Addr()+"/kv/"+key, nil)
	if code == http.StatusOK { // the failover may already be done
		assert.Equal(t, "kept", body)
	} else {
		require.Equal(t, http.StatusServiceUnavailable, code, "read while the owner is down")
		assert.Contains(t, body, owner.Addr())
	}
	require.Eventually(t, func() bool {
		m := other.currentMeta()
		return !m.Has(owner.Addr())
	}, 5*time.Second, 20*time.Millisecond, "the dead owner is removed")
	// The new owner may still be taking the failover in (its lease, the
	// data it pulls) when the removal shows: asked again on a 503, as a
	// client would (seen under load: 503 at once after the removal).
	newOwner := other.currentMeta().Owner(key)
	code, body = doSettled(t, http.MethodGet, "http://"+newOwner+"/kv/"+key, nil)
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "kept", body, "the new owner has the acknowledged write")
}

// Bodies past the limits get 413 and the server keeps serving. A ring of
// one: pushing tens of MiB through the race detector can starve a
// 300 ms heartbeat, which is not what this test is about.
func TestOversizeBodiesAre413(t *testing.T) {
	withReplicas(t, 0) // a ring of one
	a := startNode(t).Addr()
	for _, tc := range []struct{ path, body, want string }{
		{"/kv/big", strings.Repeat("v", kv.MaxValueLen+1), "value: over"},
		{"/internal/transfer", strings.Repeat("\xff", transferChunk+kv.MaxKeyLen+kv.MaxValueLen+65), "transfer: over"},
	} {
		method := http.MethodPut
		if strings.HasPrefix(tc.path, "/internal/transfer") {
			method = http.MethodPost
		}
		req, _ := http.NewRequest(method, "http://"+a+tc.path, strings.NewReader(tc.body))
		req.Header.Set(HeaderSecret, testSecret)
		resp, err := testClient.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, tc.path)
		assert.Contains(t, string(b), tc.want, tc.path)
	}
	code, _ := do(t, http.MethodPut, "http://"+a+"/kv/after", []byte("ok"))
	assert.Equal(t, http.StatusNoContent, code)
}

// At most maxTransfers data moves are received at once; one more is told
// to come back (503 with Retry-After), and a slot freed takes the next.
func TestTransfersAreBoundedInConcurrency(t *testing.T) {
	n := startNode(t)
	a := n.Addr()
	post := func(body io.Reader) (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+a+"/internal/transfer", body)
		req.Header.Set(HeaderSecret, testSecret)
		return testClient.Do(req)
	}
	type slow struct {
		w    *io.PipeWriter
		resp chan *http.Response
	}
	var open []slow
	for range maxTransfers {
		r, w := io.Pipe()
		s := slow{w, make(chan *http.Response, 1)}
		go func() {
			resp, err := post(r)
			if err == nil {
				s.resp <- resp
			}
			close(s.resp)
		}()
		_, err := w.Write(AppendItem(nil, Item{Key: "k", Entry: kv.Entry{Version: 1, Value: []byte("v")}}))
		require.NoError(t, err, "the server reads a started transfer")
		open = append(open, s)
	}
	require.Eventually(t, func() bool { return len(n.transfers) == maxTransfers }, 5*time.Second, 5*time.Millisecond,
		"every slot taken by a transfer in progress")

	one := AppendItem(nil, Item{Key: "late", Entry: kv.Entry{Version: 1, Value: []byte("v")}})
	resp, err := post(bytes.NewReader(one))
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Contains(t, string(b), "busy")
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))

	open[0].w.Close()
	first := <-open[0].resp
	require.NotNil(t, first)
	first.Body.Close()
	assert.Equal(t, http.StatusNoContent, first.StatusCode)
	require.Eventually(t, func() bool {
		resp, err := post(bytes.NewReader(one))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusNoContent
	}, 5*time.Second, 20*time.Millisecond, "a freed slot takes the next transfer")
	for _, s := range open[1:] {
		s.w.Close()
		if resp := <-s.resp; resp != nil {
			resp.Body.Close()
		}
	}
}

// A server that rejoins with stale data never serves it: its reads as
// owner take the newest copy among the responsible servers, before and
// after it has pulled what it is responsible for.
func TestRejoinedOwnerServesNoStaleRead(t *testing.T) {
	withReplicas(t, 1)
	nodes := startRing(t, 3)
	meta := nodes[0].currentMeta()
	owner := nodes[1]
	key := ""
	for i := 0; key == ""; i++ {
		if k := fmt.Sprint("k", i); meta.Owner(k) == owner.Addr() {
			key = k
		}
	}
	code, msg := do(t, http.MethodPut, "http://"+owner.Addr()+"/kv/"+key, []byte("old"))
	require.Equal(t, http.StatusNoContent, code, msg)

	// The mechanism: an owner with a stale copy reads the newest.
	code, msg = do(t, http.MethodPut, "http://"+owner.Addr()+"/kv/"+key, []byte("new"))
	require.Equal(t, http.StatusNoContent, code, msg)
	v := owner.store.Version(key)
	require.NoError(t, owner.store.Forget(key))
	_, err := owner.store.Apply(key, kv.Entry{Value: []byte("old"), Version: v - 1})
	require.NoError(t, err)
	for _, n := range nodes {
		_, body := do(t, http.MethodGet, "http://"+n.Addr()+"/kv/"+key, nil)
		assert.Equal(t, "new", body, "the owner's stale copy is outranked by its replica's")
	}

	// For real: the owner dies, a newer write lands while it is away, and
	// it restarts from its log on its address.
	addr, dir := owner.Addr(), owner.cfg.Dir
	owner.stop()
	// Every live server has learnt the removal: one that has not would
	// forward the write to the dead owner (503, correctly unacknowledged).
	require.Eventually(t, func() bool { return !nodes[0].currentMeta().Has(addr) && !nodes[2].currentMeta().Has(addr) },
		5*time.Second, 20*time.Millisecond)
	code, msg = do(t, http.MethodPut, "http://"+nodes[0].Addr()+"/kv/"+key, []byte("newest"))
	require.Equal(t, http.StatusNoContent, code, msg)
	back := startNodeAt(t, addr, dir, nodes[0].Addr())
	require.Eventually(t, func() bool { m := back.currentMeta(); return m != nil && m.Has(addr) }, 5*time.Second, 5*time.Millisecond)
	// Until a majority confirms the rejoined server it refuses (503); what
	// it answers is never the stale copy.
	for range 20 {
		if code, body := do(t, http.MethodGet, "http://"+addr+"/kv/"+key, nil); code != http.StatusServiceUnavailable {
			assert.Equal(t, "newest", body)
		}
	}
	require.Eventually(t, back.settled.Load, 5*time.Second, 10*time.Millisecond, "it settles")
	require.Eventually(t, func() bool { return back.Snapshot().Leased }, 5*time.Second, 10*time.Millisecond, "it is leased")
	code, body := do(t, http.MethodGet, "http://"+addr+"/kv/"+key, nil)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "newest", body)
}

// Replication is fenced by metadata: a replica whose metadata is newer
// than the sender's refuses a write from a server that is no longer the
// key's owner, and a replication without the sender's epoch is malformed.
func TestReplicationFromAStaleOwnerIsRefused(t *testing.T) {
	nodes := startRing(t, 2)
	a := nodes[0]
	meta := a.currentMeta()
	key := "fenced"
	owner := meta.Owner(key)
	other := nodes[0].Addr()
	if other == owner {
		other = nodes[1].Addr()
	}
	// Replication and an owner's read confirmation are fenced alike.
	for _, call := range []struct{ method, path string }{
		{http.MethodPut, "/internal/replicate/"}, {http.MethodGet, "/internal/kv/"},
	} {
		ok := http.StatusNoContent
		send := func(from, epoch string) (int, string) {
			req, _ := http.NewRequest(call.method, "http://"+a.Addr()+call.path+key, strings.NewReader("v"))
			req.Header.Set(HeaderSecret, testSecret)
			req.Header.Set(HeaderVersion, "7")
			if from != "" {
				req.Header.Set(HeaderOwner, from)
				req.Header.Set(HeaderEpoch, epoch)
			}
			resp, err := testClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		code, body := send(other, "0.1")
		assert.Equal(t, http.StatusConflict, code, call.path)
		assert.Contains(t, body, "stale owner", call.path)
		if call.method == http.MethodGet {
			ok = http.StatusOK // the copy replicated above
		}
		code, _ = send(owner, "0.1")
		assert.Equal(t, ok, code, "%s: the owner, even with older metadata", call.path)
		code, _ = send(other, fmt.Sprintf("%d.%d", meta.Round, meta.Version+5))
		assert.Equal(t, ok, code, "%s: a sender with newer metadata is believed", call.path)
		code, body = send("", "")
		assert.Equal(t, http.StatusBadRequest, code, call.path)
		assert.Contains(t, body, HeaderOwner, call.path)
		for _, epoch := range []string{"", "1", "1.2 and more", "+1.2", "1.-2", "18446744073709551616.0"} {
			code, body = send(owner, epoch)
			assert.Equal(t, http.StatusBadRequest, code, "%s: epoch %q", call.path, epoch)
			assert.Contains(t, body, HeaderEpoch, call.path)
		}
	}
}

// Servers started together, each with the others as seeds, form one ring:
// finding only servers that are joining too, the one of largest UID
// starts it and the others join (docker compose v2 starts a ring.yml
// stack this way; every server used to give up).
func TestServersStartedTogetherFormOneRing(t *testing.T) {
	addrs := []string{newAddr(), newAddr(), newAddr(), newAddr()}
	nodes := make([]*node, len(addrs))
	done := make(chan int)
	for i, a := range addrs {
		go func() {
			var seeds []string
			for _, b := range addrs {
				if b != a {
					seeds = append(seeds, b)
				}
			}
			nodes[i] = startNodeAt(t, a, t.TempDir(), seeds...)
			done <- i
		}()
	}
	for range addrs {
		<-done
	}
	require.Eventually(t, func() bool {
		for _, n := range nodes {
			if m := n.currentMeta(); m == nil || len(m.Servers) != len(addrs) {
				return false
			}
		}
		return true
	}, 15*time.Second, 20*time.Millisecond, "one ring of all four")
	// Which server coordinates is not fixed: one that starts before the
	// others listen finds no seed at all and starts the ring itself.
	coord := nodes[0].currentMeta().Coordinator
	for _, n := range nodes {
		assert.Equal(t, coord, n.currentMeta().Coordinator, "one coordinator")
	}
}

// A ring with fewer than R+1 servers serves no key: a write there could
// not survive R failures, and such a ring may be the cut-off side of a
// partition.
func TestTooSmallARingServesNoKeys(t *testing.T) {
	a := startNode(t).Addr() // R = 2, a ring of one
	for _, method := range []string{http.MethodPut, http.MethodGet, http.MethodDelete} {
		code, msg := do(t, method, "http://"+a+"/kv/k", []byte("v"))
		assert.Equal(t, http.StatusServiceUnavailable, code, method)
		assert.Contains(t, msg, "fewer than the 3 (R+1)", method)
	}
}

// An owner the rest of the ring has replaced serves no read: a replica
// that holds the newer metadata refuses to confirm it, so the read is 503
// naming the fencing, not the owner's possibly stale copy. (The replica
// is given the newer metadata directly, as if the owner had been cut off
// while the others moved on.)
func TestReplacedOwnerServesNoRead(t *testing.T) {
	withReplicas(t, 1)
	nodes := startRing(t, 3)
	meta := nodes[0].currentMeta()
	var owner, replica *node
	key := ""
	for i := 0; owner == nil; i++ {
		k := fmt.Sprint("k", i)
		resp := meta.Responsible(k)
		for _, n := range nodes {
			if n.Addr() == resp[0] && n.Addr() != meta.Coordinator {
				owner, key = n, k
			}
		}
		for _, n := range nodes {
			if owner != nil && n.Addr() == resp[1] {
				replica = n
			}
		}
	}
	code, msg := do(t, http.MethodPut, "http://"+owner.Addr()+"/kv/"+key, []byte("v1"))
	require.Equal(t, http.StatusNoContent, code, msg)
	code, body := do(t, http.MethodGet, "http://"+owner.Addr()+"/kv/"+key, nil)
	require.Equal(t, http.StatusOK, code, body)

	newer, err := meta.Without(owner.Addr())
	require.NoError(t, err)
	require.NoError(t, replica.do(context.Background(), func() { replica.installMeta(newer) }))
	code, body = do(t, http.MethodGet, "http://"+owner.Addr()+"/kv/"+key, nil)
	assert.Equal(t, http.StatusServiceUnavailable, code, body)
	assert.Contains(t, body, "stale owner")
	assert.Contains(t, body, replica.Addr())
}

// A partition, on the in-memory network: one server cut off from the
// other three. The three remove it and keep serving every key; alone it is
// no majority, so it removes nobody, holds no serving lease and serves no
// key. Healed, it finds the ring it lost,
// rejoins it and pulls what it is responsible for: every key reads back
// through it, with the values written while it was away.
func TestPartitionedServerRejoinsWhenHealed(t *testing.T) {
	withReplicas(t, 1)
	nodes := startRing(t, 4)
	cut, rest := nodes[3], nodes[:3]
	for _, n := range rest {
		testNet.Cut(cut.Addr(), n.Addr())
	}
	require.Eventually(t, func() bool {
		for _, n := range rest {
			if m := n.currentMeta(); len(m.Servers) != 3 {
				return false
			}
		}
		return !cut.Snapshot().Leased
	}, 10*time.Second, 10*time.Millisecond, "three servers remove the fourth, which loses its lease")
	// Alone it elects itself and its takeover removes the old
	// coordinator, but nobody else: it stays one of three.
	assert.GreaterOrEqual(t, len(cut.currentMeta().Servers), 3, "one of four removes at most the old coordinator")
	for i := range 20 {
		code, msg := do(t, http.MethodPut, fmt.Sprintf("http://%s/kv/k%d", rest[i%3].Addr(), i), []byte(fmt.Sprint("v", i)))
		require.Equal(t, http.StatusNoContent, code, msg)
	}
	code, _ := doOnce(t, http.MethodGet, "http://"+cut.Addr()+"/kv/k0", nil)
	assert.Equal(t, http.StatusServiceUnavailable, code, "a server cut off from the majority serves no key")

	for _, n := range rest {
		testNet.Heal(cut.Addr(), n.Addr())
	}
	require.Eventually(t, func() bool {
		for _, n := range nodes {
			if m := n.currentMeta(); len(m.Servers) != 4 {
				return false
			}
		}
		return cut.settled.Load() && cut.Snapshot().Leased
	}, 15*time.Second, 20*time.Millisecond, "one ring of four again, the healed server settled and leased")
	for i := range 20 {
		code, body := do(t, http.MethodGet, fmt.Sprintf("http://%s/kv/k%d", cut.Addr(), i), nil)
		require.Equal(t, http.StatusOK, code, "k%d", i)
		assert.Equal(t, fmt.Sprint("v", i), body)
	}
}

// A server asks seeds and lost servers for their ring without the cluster
// secret, and acts only on an answer that proves it came from a server
// holding it: a stranger learns nothing and cannot pull a server away.
func TestRingAnswersAreProvedAndAskedWithoutTheSecret(t *testing.T) {
	withReplicas(t, 0)
	n := startNode(t)
	// A real member's answer is proved.
	m, err := n.fetchMeta(t.Context(), n.Addr())
	require.NoError(t, err)
	assert.True(t, m.Has(n.Addr()))

	// A stranger serving a ring of its own, without (or with a forged)
	// proof.
	stranger := newAddr()
	ln, err := testNet.Host(stranger).Listen(stranger)
	require.NoError(t, err)
	var sawSecret atomic.Bool
	var forged atomic.Value
	body := (&membership.Metadata{Version: 99, Round: 99, Servers: []string{stranger}}).Encode()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(HeaderSecret) != "" {
			sawSecret.Store(true)
		}
		if f, _ := forged.Load().(string); f != "" {
			w.Header().Set(HeaderProof, f)
		}
		w.Write(body)
	})}
	go srv.Serve(ln)
	defer srv.Close()
	for _, f := range []string{"", "00", proof("another-ring-secret!", body)} {
		forged.Store(f)
		_, err = n.fetchMeta(t.Context(), stranger)
		assert.ErrorContains(t, err, "no proof", "proof %q", f)
	}
	assert.False(t, sawSecret.Load(), "the question carried the cluster secret")
}

// A key whose value cannot be read when it moves (the disk failed under
// it) is neither sent nor forgotten: the server keeps it and retries the
// move, where it used to forget it unsent.
func TestAnUnreadableKeyIsKeptWhenItMoves(t *testing.T) {
	withReplicas(t, 1)
	nodes := startRing(t, 3)
	for i := range 60 {
		code, msg := doSettled(t, http.MethodPut, "http://"+nodes[0].Addr()+"/kv/k"+fmt.Sprint(i), []byte("value"))
		require.Equal(t, http.StatusNoContent, code, msg)
	}
	// Every value on every disk is gone; the indexes still name them.
	held := map[*node][]string{}
	for _, n := range nodes {
		held[n] = n.store.Keys()
		require.NoError(t, os.Truncate(filepath.Join(n.cfg.Dir, "kv.log"), 0))
	}

	joined := startNode(t, nodes[0].Addr())
	leaving := 0
	for _, n := range nodes {
		require.Eventually(t, func() bool { return n.currentMeta().Has(joined.Addr()) }, 10*time.Second, 10*time.Millisecond)
		meta := n.currentMeta()
		var kept []string
		for _, k := range held[n] {
			if !slices.Contains(meta.Responsible(k), n.Addr()) {
				kept = append(kept, k)
			}
		}
		if len(kept) == 0 {
			continue
		}
		leaving += len(kept)
		require.Eventually(t, func() bool { return counter(n.m.moveRetries) > 0 }, 10*time.Second, 10*time.Millisecond,
			"%s tried to move its keys to the new server", n.Addr())
		assert.Subset(t, n.store.Keys(), kept, "keys %s could not send are kept", n.Addr())
	}
	require.Positive(t, leaving, "some keys moved to the new server")
}

// counter reads a Prometheus counter's value.
func counter(c prometheus.Counter) float64 {
	var m dto.Metric
	c.Write(&m)
	return m.GetCounter().GetValue()
}

// A negative timing is refused at start, naming it, before anything is
// opened: the election's state machine would refuse it only once the
// server held ring metadata, leaving it up with no elector.
func TestNegativeDurationsAreRefused(t *testing.T) {
	for name, set := range map[string]func(*Config){
		"suspect timeout -1s":    func(c *Config) { c.SuspectTimeout = -time.Second },
		"suspect jitter -1ms":    func(c *Config) { c.SuspectJitter = -time.Millisecond },
		"heartbeat interval -1s": func(c *Config) { c.HeartbeatInterval = -time.Second },
		"hop bound -1ns":         func(c *Config) { c.HopBound = -1 },
		"ack timeout -1s":        func(c *Config) { c.AckTimeout = -time.Second },
		"join timeout -1s":       func(c *Config) { c.JoinTimeout = -time.Second },
		"spin read -1µs":         func(c *Config) { c.SpinRead = -time.Microsecond },
	} {
		addr := newAddr()
		cfg := testConfig(addr, t.TempDir(), testNet.Host(addr))
		set(&cfg)
		_, err := New(cfg)
		assert.ErrorContains(t, err, name+": must not be negative")
	}
	addr := newAddr()
	cfg := testConfig(addr, t.TempDir(), testNet.Host(addr))
	cfg.SpinRead = 6 * time.Millisecond
	_, err := New(cfg)
	assert.ErrorContains(t, err, "spin read 6ms: at most 5ms")
}
