package podfault

import (
	"net"
	"net/netip"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Routes in a network namespace of the test's own (root, as the test
// suite runs, may make one): a cut's route drops what is sent to the
// address, twice set or twice removed is no error, and healed it is gone.
func TestRoutesBlackholeAndHeal(t *testing.T) {
	runtime.LockOSThread() // the namespace is the thread's; the thread dies with the test
	orig, err := netns.Get()
	require.NoError(t, err)
	ns, err := netns.New()
	require.NoError(t, err, "a network namespace of the test's own (the suite runs as root)")
	defer func() {
		netns.Set(orig)
		ns.Close()
	}()
	require.NoError(t, Probe(), "root may change its own namespace's routes")
	ip := netip.MustParseAddr("10.9.8.7")
	require.NoError(t, Routes{}.Blackhole(ip, true))
	require.NoError(t, Routes{}.Blackhole(ip, true), "set twice")
	assert.Equal(t, []int{unix.RTN_BLACKHOLE}, routeTypes(t, netlink.Handle{}, ip))
	host, err := netlink.NewHandleAt(orig)
	require.NoError(t, err)
	defer host.Close()
	assert.Empty(t, routeTypes(t, *host, ip), "the route is in the namespace, not the machine's")
	// The kernel refuses to route to a blackhole: "invalid argument".
	_, err = netlink.RouteGet(net.IP(ip.AsSlice()))
	assert.ErrorIs(t, err, unix.EINVAL)
	require.NoError(t, Routes{}.Blackhole(ip, false))
	require.NoError(t, Routes{}.Blackhole(ip, false), "removed twice")
	assert.Empty(t, routeTypes(t, netlink.Handle{}, ip), "healed")
}

// routeTypes lists the types of the main table's routes to ip/32.
func routeTypes(t *testing.T, h netlink.Handle, ip netip.Addr) []int {
	dst := &net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(32, 32)}
	routes, err := h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Dst: dst, Table: unix.RT_TABLE_MAIN},
		netlink.RT_FILTER_DST|netlink.RT_FILTER_TABLE)
	require.NoError(t, err)
	var out []int
	for _, r := range routes {
		out = append(out, r.Type)
	}
	return out
}
