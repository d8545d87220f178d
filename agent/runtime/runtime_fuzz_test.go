package runtime

import (
	"strconv"
	"strings"
	"testing"
)

// What ParseSpecs accepts is one worker per non-blank item, each with a
// CPU limit in (0, 64] as written, and the list printed back reads the
// same.
func FuzzParseSpecs(f *testing.F) {
	for _, s := range []string{"0.5:default,1,0.25", "1", " 2 , ,3:default", "0", "NaN", "65", "1:fast", ",", "1e-300", "0x1p-2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		specs, err := ParseSpecs(s)
		if err != nil {
			return
		}
		var items, printed []string
		for _, it := range strings.Split(s, ",") {
			if it = strings.TrimSpace(it); it != "" {
				items = append(items, it)
			}
		}
		if len(specs) != len(items) {
			t.Fatalf("%d items, %d workers", len(items), len(specs))
		}
		for i, sp := range specs {
			if !(sp.CPULimit > 0) || sp.CPULimit > 64 {
				t.Fatalf("item %q: CPU limit %v", items[i], sp.CPULimit)
			}
			p := strconv.FormatFloat(sp.CPULimit, 'g', -1, 64)
			if sp.Default {
				p += ":default"
			}
			printed = append(printed, p)
		}
		again, err := ParseSpecs(strings.Join(printed, ","))
		if err != nil || len(again) != len(specs) {
			t.Fatalf("printed back %q: %v", printed, err)
		}
		for i := range again {
			if again[i] != specs[i] {
				t.Fatalf("printed back %q: %+v, was %+v", printed[i], again[i], specs[i])
			}
		}
	})
}
