package podfault

import (
	"strings"
	"testing"
)

// Whatever a request's query holds: an accepted address list has at most
// maxList entries, only unicast addresses of other hosts, and reads back
// the same from its own printing; an accepted join list likewise, with a
// port on every entry.
func FuzzAddressLists(f *testing.F) {
	for _, s := range []string{"10.0.0.1", "10.0.0.1,10.0.0.2", "127.0.0.1", "::1", "fe80::1%eth0", "::ffff:10.0.0.1", "", ",", "10.0.0.1:7000", "[fd00::1]:7000,10.0.0.2:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if ips, err := addrs(s); err == nil {
			if len(ips) == 0 || len(ips) > maxList {
				t.Fatalf("%q: %d addresses accepted", s, len(ips))
			}
			printed := make([]string, len(ips))
			for i, ip := range ips {
				if ip.IsLoopback() || ip.IsUnspecified() || ip.IsMulticast() || ip.Zone() != "" || ip.Is4In6() {
					t.Fatalf("%q: accepted %v", s, ip)
				}
				printed[i] = ip.String()
			}
			again, err := addrs(strings.Join(printed, ","))
			if err != nil || len(again) != len(ips) {
				t.Fatalf("%q: printed %v reads back as %v, %v", s, printed, again, err)
			}
			for i := range ips {
				if again[i] != ips[i] {
					t.Fatalf("%q: %v reads back as %v", s, ips[i], again[i])
				}
			}
		}
		if join, err := addrPorts(s); err == nil {
			if len(join) > maxList {
				t.Fatalf("%q: %d seeds accepted", s, len(join))
			}
			for _, j := range join {
				if j.Port() == 0 || !j.Addr().IsValid() {
					t.Fatalf("%q: accepted %v", s, j)
				}
			}
		}
	})
}
