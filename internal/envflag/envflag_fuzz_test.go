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
		s := New(flag.NewFlagSet("fuzz", flag.ContinueOnError))
		s.SetOutput(io.Discard)
		gi := s.Int("int", "F_INT", 7, "")
		gf := s.Float("float", "F_FLOAT", 7, "")
		gd := s.Duration("dur", "F_DUR", 7, "")
		var gb bool
		s.BoolVar(&gb, "bool", "F_BOOL", false, "")
		gs := s.Secret("secret", "F_SECRET", "")
		err := s.Parse(nil)

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
		if without := usageOf(New(flag.NewFlagSet("fuzz", flag.ContinueOnError))); with != without {
			t.Fatalf("the usage changes with the secret's value:\n%s", with)
		}
	})
}

// usageOf is what --help prints for s, with the fuzz target's flags.
func usageOf(s *Set) string {
	if s.Lookup("secret") == nil {
		s.Int("int", "F_INT", 7, "")
		s.Float("float", "F_FLOAT", 7, "")
		s.Duration("dur", "F_DUR", 7, "")
		var b bool
		s.BoolVar(&b, "bool", "F_BOOL", false, "")
		s.Secret("secret", "F_SECRET", "")
	}
	var b strings.Builder
	s.SetOutput(&b)
	s.PrintDefaults()
	return b.String()
}
