package envflag

import (
	"flag"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Environment values are user input: whatever a variable holds, a set
// either takes exactly the value its parser reads from it or refuses it
// naming the variable — and a secret's value never shows in the usage.
func FuzzEnvValues(f *testing.F) {
	f.Add("42", "1.5", "700ms", "true", "s3cr3t-value")
	f.Add("", "NaN", "700", "maybe", "")
	f.Add("99999999999999999999", "1e400", "-1h", "T", "--help")
	f.Fuzz(func(t *testing.T, i, fl, d, b, secret string) {
		if strings.ContainsRune(i+fl+d+b+secret, 0) {
			return // an environment value cannot hold NUL
		}
		t.Setenv("F_INT", i)
		t.Setenv("F_FLOAT", fl)
		t.Setenv("F_DUR", d)
		t.Setenv("F_BOOL", b)
		t.Setenv("F_SECRET", secret)
		s, v := fuzzSet()
		err := s.Parse(nil)
		gi, gf, gd, gb, gs := v.i, v.f, v.d, *v.b, v.s

		wi, ei := strconv.Atoi(i)
		wf, ef := strconv.ParseFloat(fl, 64)
		wd, ed := time.ParseDuration(d)
		wb, eb := strconv.ParseBool(b)
		bad := map[string]bool{"F_INT": i != "" && ei != nil, "F_FLOAT": fl != "" && ef != nil, "F_DUR": d != "" && ed != nil, "F_BOOL": b != "" && eb != nil}
		anyBad := bad["F_INT"] || bad["F_FLOAT"] || bad["F_DUR"] || bad["F_BOOL"]
		if anyBad != (err != nil) {
			t.Fatalf("bad values %v, error %v", bad, err)
		}
		if err != nil {
			named := false
			for k, isBad := range bad {
				named = named || (isBad && strings.Contains(err.Error(), "environment "+k+"="))
			}
			if !named {
				t.Fatalf("error %q names no bad variable of %v", err, bad)
			}
			return
		}
		if i != "" && *gi != wi || fl != "" && *gf != wf && !(wf != wf && *gf != *gf) || d != "" && *gd != wd || b != "" && gb != wb {
			t.Fatalf("values %d %v %s %v, want %d %v %s %v", *gi, *gf, *gd, gb, wi, wf, wd, wb)
		}
		if *gs != secret {
			t.Fatalf("secret %q, want %q", *gs, secret)
		}
		with := usageOf(s)
		t.Setenv("F_SECRET", "")
		if without := usageOf(setOf(fuzzSet())); with != without {
			t.Fatalf("the usage changes with the secret's value:\n%s", with)
		}
	})
}

type fuzzValues struct {
	i *int
	f *float64
	d *time.Duration
	b *bool
	s *string
}

// fuzzSet defines the fuzz target's flags on a new set, reading the
// environment as it stands.
func fuzzSet() (*Set, fuzzValues) {
	s := New(flag.NewFlagSet("fuzz", flag.ContinueOnError))
	s.SetOutput(io.Discard)
	v := fuzzValues{b: new(bool)}
	v.i = s.Int("int", "F_INT", 7, "")
	v.f = s.Float("float", "F_FLOAT", 7, "")
	v.d = s.Duration("dur", "F_DUR", 7, "")
	s.BoolVar(v.b, "bool", "F_BOOL", false, "")
	v.s = s.Secret("secret", "F_SECRET", "")
	return s, v
}

// usageOf is what --help prints for s.
func usageOf(s *Set) string {
	var b strings.Builder
	s.SetOutput(&b)
	s.PrintDefaults()
	return b.String()
}

func setOf(s *Set, _ fuzzValues) *Set { return s }
