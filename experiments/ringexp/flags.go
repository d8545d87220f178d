package ringexp

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// intList is a comma-separated list of positive integers flag.
type intList []int

func (l *intList) String() string {
	parts := make([]string, len(*l))
	for i, v := range *l {
		parts[i] = strconv.Itoa(v)
	}
	return strings.Join(parts, ",")
}

func (l *intList) Set(s string) error {
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

// choiceList is a comma-separated subset of allowed words.
type choiceList struct {
	vals    []string
	allowed []string
}

func (l *choiceList) String() string { return strings.Join(l.vals, ",") }

func (l *choiceList) Set(s string) error {
	var out []string
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if !slices.Contains(l.allowed, p) {
			return fmt.Errorf("%q: want one of %s", p, strings.Join(l.allowed, ", "))
		}
		out = append(out, p)
	}
	l.vals = out
	return nil
}
