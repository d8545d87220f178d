package ring

import (
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
)

// UID identifies a ring member: MD5 of "ip:port", compared as a 128-bit
// unsigned big-endian integer. Two words instead of a byte array keep the
// comparison — the innermost operation of every election step — to two
// integer compares.
type UID struct{ Hi, Lo uint64 }

// UIDOf returns the UID of a member listening on addr ("ip:port").
func UIDOf(addr string) UID { return UIDFromBytes(md5.Sum([]byte(addr))) }

// UIDFromBytes reads a big-endian 128-bit value.
func UIDFromBytes(b [16]byte) UID {
	return UID{Hi: binary.BigEndian.Uint64(b[:8]), Lo: binary.BigEndian.Uint64(b[8:])}
}

// Bytes returns the big-endian encoding of u.
func (u UID) Bytes() [16]byte {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], u.Hi)
	binary.BigEndian.PutUint64(b[8:], u.Lo)
	return b
}

// Cmp returns -1, 0 or +1 as u is less than, equal to or greater than v.
func (u UID) Cmp(v UID) int {
	switch {
	case u.Hi < v.Hi:
		return -1
	case u.Hi > v.Hi:
		return 1
	case u.Lo < v.Lo:
		return -1
	case u.Lo > v.Lo:
		return 1
	}
	return 0
}

// Less reports whether u < v.
func (u UID) Less(v UID) bool { return u.Cmp(v) < 0 }

// IsZero reports whether u is the zero UID, which no real member has in practice
// and which the state machine uses for "unknown".
func (u UID) IsZero() bool { return u == UID{} }

// String is the 32-digit hex form, as MD5 sums are usually printed.
func (u UID) String() string {
	b := u.Bytes()
	return hex.EncodeToString(b[:])
}

// Short is the first 8 hex digits, for logs and tables.
func (u UID) Short() string { return u.String()[:8] }

// ParseUID parses the 32-digit hex form.
func ParseUID(s string) (UID, error) {
	var b [16]byte
	if len(s) != 32 {
		return UID{}, fmt.Errorf("uid %q: want 32 hex digits, got %d characters", s, len(s))
	}
	if _, err := hex.Decode(b[:], []byte(s)); err != nil {
		return UID{}, fmt.Errorf("uid %q: %w", s, err)
	}
	return UIDFromBytes(b), nil
}

// SortedRing returns uids in consistent-hash ring order (ascending), so that
// each member's successor is the next larger UID, wrapping around.
func SortedRing(uids []UID) []UID {
	out := slices.Clone(uids)
	slices.SortFunc(out, UID.Cmp)
	return out
}

// MaxUID returns the largest UID in uids; ok is false when uids is empty.
func MaxUID(uids []UID) (max UID, ok bool) {
	for i, u := range uids {
		if i == 0 || max.Less(u) {
			max = u
		}
	}
	return max, len(uids) > 0
}
