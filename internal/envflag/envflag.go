// Package envflag defines flags whose defaults come from environment
// variables (DESIGN §4: flags with environment fallbacks), so a container
// is configured by its environment and a shell user by flags.
package envflag

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"
)

// Set wraps a FlagSet; the first malformed environment value is kept and
// reported by Err, so a typo in compose fails loudly instead of falling
// back to a default.
type Set struct {
	*flag.FlagSet
	err error
}

// New returns a Set over fs.
func New(fs *flag.FlagSet) *Set { return &Set{FlagSet: fs} }

// Err returns the first bad environment value.
func (s *Set) Err() error { return s.err }

// Parse parses args and then reports a bad environment value, so a
// command cannot forget to check it.
func (s *Set) Parse(args []string) error {
	if err := s.FlagSet.Parse(args); err != nil {
		return err
	}
	return s.err
}

func (s *Set) env(key string, parse func(string) error) {
	v, ok := os.LookupEnv(key)
	if !ok || v == "" {
		return
	}
	if err := parse(v); err != nil && s.err == nil {
		s.err = fmt.Errorf("environment %s=%q: %w", key, v, err)
	}
}

func help(usage, key string) string { return usage + " (env " + key + ")" }

// String defines a string flag whose default is $key when set.
func (s *Set) String(name, key, def, usage string) *string {
	s.env(key, func(v string) error { def = v; return nil })
	return s.FlagSet.String(name, def, help(usage, key))
}

// StringVar is String into p.
func (s *Set) StringVar(p *string, name, key, def, usage string) {
	s.env(key, func(v string) error { def = v; return nil })
	s.FlagSet.StringVar(p, name, def, help(usage, key))
}

// Secret defines a string flag for a secret, $key when set. Its value
// never shows: not as the default in usage (--help, or after a flag
// error), where an environment value would otherwise appear. Read from
// the environment, it is removed from it, so no process the command
// starts (a worker, a shell) inherits it.
func (s *Set) Secret(name, key, usage string) *string {
	p := new(string)
	s.SecretVar(p, name, key, usage)
	return p
}

// SecretVar is Secret into p.
func (s *Set) SecretVar(p *string, name, key, usage string) {
	s.env(key, func(v string) error { *p = v; return nil })
	os.Unsetenv(key)
	s.FlagSet.Var(secret{p}, name, help(usage, key))
}

// secret is a flag value whose String is always empty: flag's usage
// prints a default only when it differs from the zero value's.
type secret struct{ p *string }

func (secret) String() string       { return "" }
func (s secret) Set(v string) error { *s.p = v; return nil }

// Int defines an int flag whose default is $key when set.
func (s *Set) Int(name, key string, def int, usage string) *int {
	s.env(key, func(v string) (err error) { def, err = strconv.Atoi(v); return })
	return s.FlagSet.Int(name, def, help(usage, key))
}

// Float defines a float64 flag whose default is $key when set.
func (s *Set) Float(name, key string, def float64, usage string) *float64 {
	s.env(key, func(v string) (err error) { def, err = strconv.ParseFloat(v, 64); return })
	return s.FlagSet.Float64(name, def, help(usage, key))
}

// Duration defines a duration flag ("700ms"; a bare number is an error,
// not a default) whose default is $key when set.
func (s *Set) Duration(name, key string, def time.Duration, usage string) *time.Duration {
	s.env(key, func(v string) (err error) { def, err = time.ParseDuration(v); return })
	return s.FlagSet.Duration(name, def, help(usage, key))
}

// Float64Var is Float into p.
func (s *Set) Float64Var(p *float64, name, key string, def float64, usage string) {
	s.env(key, func(v string) (err error) { def, err = strconv.ParseFloat(v, 64); return })
	s.FlagSet.Float64Var(p, name, def, help(usage, key))
}

// IntVar is Int into p.
func (s *Set) IntVar(p *int, name, key string, def int, usage string) {
	s.env(key, func(v string) (err error) { def, err = strconv.Atoi(v); return })
	s.FlagSet.IntVar(p, name, def, help(usage, key))
}

// Uint64Var defines a uint64 flag into p whose default is $key when set.
func (s *Set) Uint64Var(p *uint64, name, key string, def uint64, usage string) {
	s.env(key, func(v string) (err error) { def, err = strconv.ParseUint(v, 10, 64); return })
	s.FlagSet.Uint64Var(p, name, def, help(usage, key))
}

// DurationVar is Duration into p.
func (s *Set) DurationVar(p *time.Duration, name, key string, def time.Duration, usage string) {
	s.env(key, func(v string) (err error) { def, err = time.ParseDuration(v); return })
	s.FlagSet.DurationVar(p, name, def, help(usage, key))
}

// BoolVar defines a bool flag into p whose default is $key when set
// (1, t, true, 0, f, false, as strconv.ParseBool reads them).
func (s *Set) BoolVar(p *bool, name, key string, def bool, usage string) {
	s.env(key, func(v string) (err error) { def, err = strconv.ParseBool(v); return })
	s.FlagSet.BoolVar(p, name, def, help(usage, key))
}

// Env gives flags already defined on the set (by a package's own Define,
// say) an environment fallback each: PREFIX_NAME, the flag's name upper-
// cased with dashes as underscores. Call it before Parse, so a flag given
// on the command line still wins.
func (s *Set) Env(prefix string, names ...string) {
	for _, name := range names {
		f := s.Lookup(name)
		if f == nil {
			panic("envflag: no flag " + name) // a programming error, caught by any test
		}
		key := prefix + "_" + envName(name)
		s.env(key, func(v string) error { return f.Value.Set(v) })
		f.Usage = help(f.Usage, key)
	}
}

func envName(flag string) string {
	b := []byte(flag)
	for i, c := range b {
		switch {
		case c == '-':
			b[i] = '_'
		case 'a' <= c && c <= 'z':
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}
