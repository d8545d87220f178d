package ring

import (
	"strings"
	"testing"
)

// ParseUID accepts exactly the 32-hex-digit form: what it accepts prints
// back as the same digits, and every UID's printed form parses back to it.
func FuzzParseUID(f *testing.F) {
	f.Add("00000000000000000000000000000000", []byte("0123456789abcdef"))
	f.Add("FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF", []byte{})
	f.Add("zz", []byte{1})
	f.Fuzz(func(t *testing.T, s string, raw []byte) {
		u, err := ParseUID(s)
		if err == nil && !strings.EqualFold(u.String(), s) {
			t.Fatalf("ParseUID(%q) = %s", s, u)
		}
		var b [16]byte
		copy(b[:], raw)
		v := UIDFromBytes(b)
		w, err := ParseUID(v.String())
		if err != nil || w != v {
			t.Fatalf("%s does not round-trip: %v, %v", v, w, err)
		}
	})
}
