package server

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/ringside/ringside/ring"
	"github.com/ringside/ringside/ring/membership"
)

func digits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// An epoch is accepted exactly when it is two decimal numbers in range
// joined by a dot, and reads as what it says.
func FuzzParseEpoch(f *testing.F) {
	for _, s := range []string{"0.1", "3.17", "1.2 and more", "+1.2", "1.-2", "18446744073709551615.18446744073709551615", "18446744073709551616.0", ".", "1..2", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		round, version, err := parseEpoch(s)
		r, v, ok := strings.Cut(s, ".")
		wantOK := ok && digits(r) && digits(v)
		if wantOK {
			_, e1 := strconv.ParseUint(r, 10, 64)
			_, e2 := strconv.ParseUint(v, 10, 64)
			wantOK = e1 == nil && e2 == nil
		}
		if (err == nil) != wantOK {
			t.Fatalf("parseEpoch(%q) = %v; a well-formed epoch: %v", s, err, wantOK)
		}
		if err == nil {
			if a, b, _ := parseEpoch(strconv.FormatUint(round, 10) + "." + strconv.FormatUint(version, 10)); a != round || b != version {
				t.Fatalf("%q read as %d.%d, which reads back as %d.%d", s, round, version, a, b)
			}
		}
	})
}

// A version is accepted exactly when it is a positive decimal number in
// range.
func FuzzParseVersion(f *testing.F) {
	for _, s := range []string{"7", "0", "-1", "+7", "007", "18446744073709551615", "18446744073709551616", "7 ", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseVersion(s)
		n, perr := strconv.ParseUint(s, 10, 64)
		wantOK := digits(s) && perr == nil && n > 0
		if (err == nil) != wantOK {
			t.Fatalf("parseVersion(%q) = %d, %v; a positive version: %v", s, v, err, wantOK)
		}
		if err == nil && strconv.FormatUint(v, 10) != strings.TrimLeft(s, "0") {
			t.Fatalf("%q read as %d", s, v)
		}
	})
}

// A join body is accepted only with an address a ring member may have and
// a registered election (none: Chang–Roberts, from a server that predates
// the field), and only from its first 4 KiB.
func FuzzDecodeJoin(f *testing.F) {
	for _, s := range []string{`{"addr":"10.0.0.1:7000"}`, `{"addr":"localhost:0"}`, `{"addr":""}`, `{"addr":"10.0.0.1:7000"} trailing`, `[]`, `{"addr":"[::1]:99999"}`,
		`{"addr":"10.0.0.1:7000","election":"lelann"}`, `{"addr":"10.0.0.1:7000","election":"raft"}`, `{"addr":"10.0.0.1:7000","election":7}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		req, err := decodeJoin(strings.NewReader(s))
		if err != nil {
			return
		}
		if err := membership.CheckAddr(req.Addr); err != nil {
			t.Fatalf("accepted %q with the address %q: %v", s, req.Addr, err)
		}
		if _, err := ring.Lookup(req.Election); err != nil {
			t.Fatalf("accepted %q with the election %q: %v", s, req.Election, err)
		}
		var whole joinRequest
		err = json.Unmarshal([]byte(s), &whole)
		if whole.Election == "" {
			whole.Election = ring.ChangRoberts
		}
		if len(s) > 4096 || err != nil || whole != req {
			t.Fatalf("accepted %q (%d bytes), which is not one join request of at most 4 KiB", s, len(s))
		}
	})
}

// A join redirect is accepted only naming addresses a ring member may
// have (or none), and says what the peer sent.
func FuzzDecodeRedirect(f *testing.F) {
	for _, s := range []string{`{"coordinator":"10.0.0.1:7000"}`, `{"self":"10.0.0.2:7000"}`, `{"coordinator":""}`, `{"coordinator":"evil/x?y:1"}`,
		`{"coordinator":"10.0.0.1:7000/../../internal"}`, `{"self":"[::1]:0"}`, `{"coordinator":7}`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		red, err := decodeRedirect(b)
		if err != nil {
			return
		}
		for _, a := range []string{red.Coordinator, red.Self} {
			if a != "" && membership.CheckAddr(a) != nil {
				t.Fatalf("accepted %q naming %q", b, a)
			}
		}
		var whole joinRedirect
		if json.Unmarshal(b, &whole) != nil || whole != red {
			t.Fatalf("accepted %q as %+v", b, red)
		}
	})
}

func TestDecodeRedirectRefusesAPathForAnAddress(t *testing.T) {
	_, err := decodeRedirect([]byte(`{"coordinator":"10.0.0.1:7000/../internal/join?x=1"}`))
	if err == nil || !strings.Contains(err.Error(), "coordinator: ") {
		t.Fatalf("want the coordinator refused, got %v", err)
	}
	red, err := decodeRedirect([]byte(`{"coordinator":"10.0.0.1:7000"}`))
	if err != nil || red.Coordinator != "10.0.0.1:7000" {
		t.Fatalf("%+v, %v", red, err)
	}
}
