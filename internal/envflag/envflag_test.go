package envflag

import (
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEnvFallbackAndFlagsWin(t *testing.T) {
	t.Setenv("T_ADDR", ":9")
	t.Setenv("T_N", "7")
	t.Setenv("T_D", "3s")
	s := New(flag.NewFlagSet("t", flag.ContinueOnError))
	addr := s.String("addr", "T_ADDR", ":1", "")
	n := s.Int("n", "T_N", 1, "")
	d := s.Duration("d", "T_D", time.Second, "")
	f := s.Float("f", "T_F", 0.5, "")
	var name, other string
	s.StringVar(&name, "name", "T_ADDR", "x", "")
	s.StringVar(&other, "other", "T_UNSET", "default", "")
	require.NoError(t, s.Parse([]string{"-n", "8", "-other", "given"}))
	require.NoError(t, s.Err())
	assert.Equal(t, ":9", *addr)
	assert.Equal(t, 8, *n)
	assert.Equal(t, 3*time.Second, *d)
	assert.Equal(t, 0.5, *f)
	assert.Equal(t, ":9", name)
	assert.Equal(t, "given", other)
}

func TestBadEnvIsAnError(t *testing.T) {
	t.Setenv("T_N", "seven")
	s := New(flag.NewFlagSet("t", flag.ContinueOnError))
	s.Int("n", "T_N", 1, "")
	assert.ErrorContains(t, s.Err(), `environment T_N="seven"`)
}

func TestEveryKindRejectsAMalformedValue(t *testing.T) {
	for _, tc := range []struct {
		value  string
		define func(s *Set)
	}{
		{"700", func(s *Set) { s.Duration("d", "T_V", time.Second, "") }}, // a duration without a unit
		{"700", func(s *Set) { var d time.Duration; s.DurationVar(&d, "d", "T_V", time.Second, "") }},
		{"abc", func(s *Set) { var u uint64; s.Uint64Var(&u, "u", "T_V", 1, "") }},
		{"-1", func(s *Set) { var u uint64; s.Uint64Var(&u, "u", "T_V", 1, "") }},
		{"2.5", func(s *Set) { var n int; s.IntVar(&n, "n", "T_V", 1, "") }},
		{"yes", func(s *Set) { var b bool; s.BoolVar(&b, "b", "T_V", false, "") }},
		{"x", func(s *Set) { s.Float("f", "T_V", 1, "") }},
	} {
		t.Setenv("T_V", tc.value)
		s := New(flag.NewFlagSet("t", flag.ContinueOnError))
		tc.define(s)
		// Parse reports it even when the flag itself is well formed.
		require.ErrorContains(t, s.Parse(nil), `environment T_V="`+tc.value+`"`)
	}
}

func TestTypedVarsTakeTheEnvironment(t *testing.T) {
	t.Setenv("T_U", "42")
	t.Setenv("T_B", "true")
	t.Setenv("T_D", "250ms")
	s := New(flag.NewFlagSet("t", flag.ContinueOnError))
	var u uint64
	var b bool
	var d time.Duration
	var n int
	s.Uint64Var(&u, "u", "T_U", 1, "")
	s.BoolVar(&b, "b", "T_B", false, "")
	s.DurationVar(&d, "d", "T_D", time.Second, "")
	s.IntVar(&n, "n", "T_UNSET", 5, "")
	require.NoError(t, s.Parse(nil))
	assert.Equal(t, uint64(42), u)
	assert.True(t, b)
	assert.Equal(t, 250*time.Millisecond, d)
	assert.Equal(t, 5, n)
}

func TestEnvForDefinedFlags(t *testing.T) {
	t.Setenv("B_EWMA_DECAY", "3s")
	t.Setenv("B_PROBES", "2")
	t.Setenv("B_POOL", "x")
	s := New(flag.NewFlagSet("t", flag.ContinueOnError))
	decay := s.FlagSet.Duration("ewma-decay", time.Second, "decay")
	probes := s.FlagSet.Float64("probes", 1, "")
	s.FlagSet.Int("pool", 16, "")
	s.Env("B", "ewma-decay", "probes")
	require.NoError(t, s.Parse([]string{"-probes", "5"}))
	assert.Equal(t, 3*time.Second, *decay)
	assert.Equal(t, 5.0, *probes, "the command line wins")
	assert.Contains(t, s.Lookup("ewma-decay").Usage, "env B_EWMA_DECAY")

	s.Env("B", "pool")
	assert.ErrorContains(t, s.Err(), `environment B_POOL="x"`)
	assert.Panics(t, func() { s.Env("B", "nope") })
}

// A secret from the environment is used, and never printed: not by
// --help, not in the usage after a bad flag.
func TestSecretNeverShows(t *testing.T) {
	const token = "s3cr3t-from-the-environment"
	t.Setenv("T_TOKEN", token)
	for _, args := range [][]string{{"--help"}, {"--bogus"}, {"--n", "x"}} {
		t.Setenv("T_TOKEN", token)
		var out strings.Builder
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(&out)
		s := New(fs)
		tok := s.Secret("token", "T_TOKEN", "the feed token")
		s.Int("n", "T_N", 1, "")
		require.Error(t, s.Parse(args))
		assert.NotContains(t, out.String(), token, "%v", args)
		assert.Contains(t, out.String(), "the feed token (env T_TOKEN)", "%v", args)
		assert.Equal(t, token, *tok)
		_, inherited := os.LookupEnv("T_TOKEN")
		assert.False(t, inherited, "the secret is gone from the environment a child would inherit")
	}
	t.Setenv("T_TOKEN", token)
	s := New(flag.NewFlagSet("t", flag.ContinueOnError))
	tok := s.Secret("token", "T_TOKEN", "")
	require.NoError(t, s.Parse([]string{"--token", "from-the-flag"}))
	assert.Equal(t, "from-the-flag", *tok, "a flag wins over the environment")
}
