package cle

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/ringside/ringside/bld"
)

// A Pod's election label and lease-duration annotation are anyone's who
// may create Pods: what podElection accepts is a Lease name the API
// server takes and a duration within the bounds a candidate accepts, and
// it says which one it refused otherwise, in an error of bounded length.
func FuzzPodElection(f *testing.F) {
	for _, s := range [][2]string{{"app", "10s"}, {"a.b", "1s"}, {"app", "10m"}, {"app", "10m1s"}, {"App", "10s"}, {"app", "999ms"},
		{"app", "-5s"}, {"app", ""}, {"", "10s"}, {"app", "1e3s"}, {"../x", "2s"}, {"app", "9223372036854775807ns"}} {
		f.Add(s[0], s[1])
	}
	f.Add("app", strings.Repeat("9", 1000)+"s")
	f.Fuzz(func(t *testing.T, election, lease string) {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{bld.ElectionLabel: election},
			Annotations: map[string]string{bld.LeaseDurationAnnotation: lease}}}
		name, d, err := podElection(p)
		if err != nil {
			if len(err.Error()) > 400 { // it is logged; the value is anyone's
				t.Fatalf("a %d-byte error for a %d-byte value", len(err.Error()), len(lease))
			}
			if name != "" || d != 0 {
				t.Fatalf("refused (%v) but returned %q, %s", err, name, d)
			}
			return
		}
		if name != election || len(validation.IsDNS1123Subdomain(name)) > 0 {
			t.Fatalf("accepted election %q as %q", election, name)
		}
		if want, perr := time.ParseDuration(lease); perr != nil || d != want || d < time.Second || d > bld.MaxLease {
			t.Fatalf("accepted lease %q as %s", lease, d)
		}
	})
}
