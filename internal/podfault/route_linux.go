package podfault

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Routes sets blackhole routes in the agent's network namespace (the
// Pod's) through netlink: no ip(8) in a FROM-scratch image.
type Routes struct{}

// Blackhole adds (on) or removes the host route that drops what is sent
// to ip. Adding a route that is there, or removing one that is not, is
// no error: a heal must never fail half-way.
func (Routes) Blackhole(ip netip.Addr, on bool) error {
	bits := 32
	if ip.Is6() {
		bits = 128
	}
	r := &netlink.Route{Dst: &net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(bits, bits)}, Type: unix.RTN_BLACKHOLE}
	var err error
	if on {
		err = netlink.RouteAdd(r)
		if errors.Is(err, syscall.EEXIST) {
			err = nil
		}
	} else {
		err = netlink.RouteDel(r)
		if errors.Is(err, syscall.ESRCH) {
			err = nil
		}
	}
	if err != nil {
		verb := "del"
		if on {
			verb = "add"
		}
		return fmt.Errorf("route %s blackhole %s: %w", verb, ip, err)
	}
	return nil
}

// Probe adds and removes a blackhole route to a documentation address
// (TEST-NET-1, which nothing uses): whether this process may change the
// namespace's routes at all.
func Probe() error {
	ip := netip.MustParseAddr("192.0.2.1")
	if err := (Routes{}).Blackhole(ip, true); err != nil {
		return err
	}
	return (Routes{}).Blackhole(ip, false)
}
