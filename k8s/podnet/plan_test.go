package podnet

import (
	"encoding/json"
	"net/netip"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestComputeRoutesEveryOtherNodesRange(t *testing.T) {
	nodes := []Node{
		{Name: "w2", InternalIP: "172.18.0.4", PodCIDRs: []string{"10.244.2.0/24"}},
		{Name: "cp", InternalIP: "172.18.0.2", PodCIDRs: []string{"10.244.0.0/24", "fd00:10:244::/64"}},
		{Name: "w1", InternalIP: "172.18.0.3", PodCIDRs: []string{"10.244.1.0/24"}},
	}
	p, errs := Compute("w1", nodes)
	assert.Empty(t, errs)
	assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")}, p.Subnets)
	assert.Equal(t, []Route{
		{Dst: netip.MustParsePrefix("10.244.0.0/24"), Via: netip.MustParseAddr("172.18.0.2")},
		{Dst: netip.MustParsePrefix("10.244.2.0/24"), Via: netip.MustParseAddr("172.18.0.4")},
	}, p.Routes)

	conf, err := Conflist(p)
	require.NoError(t, err)
	var c struct {
		Plugins []struct {
			Type string
			IPAM struct{ Ranges [][]struct{ Subnet string } }
		}
	}
	require.NoError(t, json.Unmarshal(conf, &c))
	require.Len(t, c.Plugins, 2)
	assert.Equal(t, "bridge", c.Plugins[0].Type)
	assert.Equal(t, "10.244.1.0/24", c.Plugins[0].IPAM.Ranges[0][0].Subnet)
	assert.Equal(t, "portmap", c.Plugins[1].Type)
}

// A node a peer registered badly (or has not been given a range yet) is
// left out with an error naming it; the others are still routed.
func TestComputeLeavesOutUnusableNodes(t *testing.T) {
	nodes := []Node{
		{Name: "self", InternalIP: "172.18.0.2", PodCIDRs: []string{"10.244.0.0/24"}},
		{Name: "new", InternalIP: "172.18.0.3"},
		{Name: "garbage", InternalIP: "172.18.0.4", PodCIDRs: []string{"10.244.2.0/33"}},
		{Name: "noaddr", InternalIP: "", PodCIDRs: []string{"10.244.3.0/24"}},
		{Name: "v6addr", InternalIP: "fd00::5", PodCIDRs: []string{"10.244.4.0/24"}},
		{Name: "thief", InternalIP: "172.18.0.6", PodCIDRs: []string{"10.244.0.0/16"}},
		{Name: "ok", InternalIP: "172.18.0.7", PodCIDRs: []string{"10.244.7.9/24"}},
	}
	p, errs := Compute("self", nodes)
	assert.Equal(t, []Route{{Dst: netip.MustParsePrefix("10.244.7.0/24"), Via: netip.MustParseAddr("172.18.0.7")}}, p.Routes)
	require.Len(t, errs, 5)
	for i, name := range []string{"new", "garbage", "noaddr", "v6addr", "10.244.0.0/16"} {
		assert.Contains(t, errs[i].Error(), name)
	}
}

func TestConflistNeedsARange(t *testing.T) {
	_, errs := Compute("self", []Node{{Name: "self"}})
	require.Len(t, errs, 1)
	_, err := Conflist(Plan{})
	assert.ErrorContains(t, err, "no pod range")
}

func TestParseRoutes(t *testing.T) {
	out := `[{"dst":"10.244.1.0/24","gateway":"172.18.0.3","dev":"eth0","protocol":"90","flags":[]},
	         {"dst":"10.244.9.9","gateway":"172.18.0.9","dev":"eth0","flags":[]}]`
	rs, err := ParseRoutes([]byte(out))
	require.NoError(t, err)
	assert.Equal(t, []Route{
		{Dst: netip.MustParsePrefix("10.244.1.0/24"), Via: netip.MustParseAddr("172.18.0.3")},
		{Dst: netip.MustParsePrefix("10.244.9.9/32"), Via: netip.MustParseAddr("172.18.0.9")},
	}, rs)
	for _, bad := range []string{"", "{}", `[{"dst":"x","gateway":"1.2.3.4"}]`, `[{"dst":"10.0.0.0/8","gateway":""}]`, `[{"dst":"10.0.0.0/8"`} {
		_, err := ParseRoutes([]byte(bad))
		assert.Error(t, err, bad)
	}
}

func TestDiff(t *testing.T) {
	r := func(dst, via string) Route {
		return Route{Dst: netip.MustParsePrefix(dst), Via: netip.MustParseAddr(via)}
	}
	have := []Route{r("10.244.1.0/24", "172.18.0.3"), r("10.244.2.0/24", "172.18.0.4"), r("10.244.3.0/24", "172.18.0.5")}
	want := []Route{r("10.244.1.0/24", "172.18.0.3"), r("10.244.2.0/24", "172.18.0.9"), r("10.244.4.0/24", "172.18.0.6")}
	replace, remove := Diff(have, want)
	assert.Equal(t, []Route{r("10.244.2.0/24", "172.18.0.9"), r("10.244.4.0/24", "172.18.0.6")}, replace)
	assert.Equal(t, []Route{r("10.244.3.0/24", "172.18.0.5")}, remove)
}

// Whatever ip prints, ParseRoutes either refuses it or returns routes that
// print back to the same routes: what is deleted is what was listed.
func FuzzParseRoutes(f *testing.F) {
	f.Add([]byte(`[{"dst":"10.244.1.0/24","gateway":"172.18.0.3"}]`))
	f.Add([]byte(`[{"dst":"10.244.9.9","gateway":"172.18.0.9"}]`))
	f.Add([]byte(`[{"dst":"default","gateway":"172.18.0.1"}]`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		rs, err := ParseRoutes(b)
		if err != nil {
			return
		}
		type raw struct {
			Dst     string `json:"dst"`
			Gateway string `json:"gateway"`
		}
		again := make([]raw, 0, len(rs))
		for _, r := range rs {
			require.True(t, r.Dst.IsValid() && r.Via.IsValid(), "invalid route %v from %q", r, b)
			again = append(again, raw{r.Dst.String(), r.Via.String()})
		}
		j, err := json.Marshal(again)
		require.NoError(t, err)
		rs2, err := ParseRoutes(j)
		require.NoError(t, err)
		assert.Equal(t, rs, rs2)
	})
}

// Node objects are peer input: whatever their fields hold, Compute routes
// only to valid IPv4 addresses of other nodes, never over this node's own
// ranges, in a sorted plan — and a bad node costs only its own routes.
func FuzzCompute(f *testing.F) {
	f.Add("10.0.0.2", "10.244.1.0/24", "10.0.0.3", "10.244.2.0/24", "10.244.0.0/24")
	f.Add("nope", "10.244.1.0/24", "10.0.0.3", "300.1.1.1/8", "10.244.0.0/16")
	f.Add("::1", "fd00::/64", "10.0.0.3", "10.244.0.0/16", "10.244.0.0/24")
	f.Fuzz(func(t *testing.T, ipA, cidrA, ipB, cidrB, cidrSelf string) {
		nodes := []Node{
			{Name: "self", InternalIP: "10.0.0.1", PodCIDRs: []string{cidrSelf}},
			{Name: "a", InternalIP: ipA, PodCIDRs: []string{cidrA}},
			{Name: "b", InternalIP: ipB, PodCIDRs: []string{cidrB}},
		}
		p, _ := Compute("self", nodes)
		for i, r := range p.Routes {
			if !r.Via.Is4() || (r.Via.String() != ipA && r.Via.String() != ipB) {
				t.Fatalf("route %s: via is not a peer's IPv4 address", r)
			}
			if !r.Dst.Addr().Is4() || r.Dst != r.Dst.Masked() {
				t.Fatalf("route %s: destination is not a masked IPv4 range", r)
			}
			for _, s := range p.Subnets {
				if s.Overlaps(r.Dst) {
					t.Fatalf("route %s overlaps this node's range %s", r, s)
				}
			}
			if i > 0 && p.Routes[i-1].Dst.Addr().Compare(r.Dst.Addr()) > 0 {
				t.Fatalf("routes not sorted: %v", p.Routes)
			}
		}
		// A node's routes do not depend on the other peer's fields.
		alone, _ := Compute("self", nodes[:2])
		for _, r := range alone.Routes {
			if !slices.Contains(p.Routes, r) {
				t.Fatalf("node a's route %s is lost beside node b (%q, %q)", r, ipB, cidrB)
			}
		}
	})
}
