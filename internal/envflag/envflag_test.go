package envflag

import (
	"flag"
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
