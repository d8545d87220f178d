package experiments

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Points is a list flag's load points in profile: the user's when set,
// else the profile's. The quick profile cuts points, not repetitions, so
// that every point it runs has a spread to draw and to judge by.
func Points[L ~[]E, E any](set L, profile string, quick, paper L) L {
	switch {
	case len(set) > 0:
		return set
	case profile == ProfilePaper:
		return paper
	}
	return quick
}

// IntList is a flag holding comma-separated positive integers.
type IntList []int

func (l *IntList) String() string {
	parts := make([]string, len(*l))
	for i, v := range *l {
		parts[i] = strconv.Itoa(v)
	}
	return strings.Join(parts, ",")
}

func (l *IntList) Set(s string) error {
	var out []int
	for _, p := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || v < 1 {
			return fmt.Errorf("%q is not a positive integer", p)
		}
		out = append(out, v)
	}
	*l = out
	return nil
}

// ChoiceList is a comma-separated subset of allowed words; "all" is every
// one.
type ChoiceList struct {
	Vals    []string
	Allowed []string
}

func (l *ChoiceList) String() string { return strings.Join(l.Vals, ",") }

func (l *ChoiceList) Set(s string) error {
	if strings.TrimSpace(s) == "all" && !slices.Contains(l.Allowed, "all") {
		l.Vals = slices.Clone(l.Allowed)
		return nil
	}
	var out []string
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if !slices.Contains(l.Allowed, p) {
			return fmt.Errorf("%q: want one of %s", p, strings.Join(l.Allowed, ", "))
		}
		out = append(out, p)
	}
	l.Vals = out
	return nil
}

// FloatList is a flag holding comma-separated positive finite numbers.
type FloatList []float64

func (l *FloatList) String() string {
	parts := make([]string, len(*l))
	for i, v := range *l {
		parts[i] = strconv.FormatFloat(v, 'g', -1, 64)
	}
	return strings.Join(parts, ",")
}

func (l *FloatList) Set(s string) error {
	var out []float64
	for _, p := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || !(v > 0) || math.IsInf(v, 0) {
			return fmt.Errorf("%q is not a positive number", p)
		}
		out = append(out, v)
	}
	*l = out
	return nil
}
