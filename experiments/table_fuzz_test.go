package experiments

import (
	"strings"
	"testing"
)

// A results CSV is a file anyone may have edited: ReadTable either refuses
// it or gives rows as wide as the header, each column readable by name;
// a name it lacks reads as "" and Err names it.
func FuzzReadTable(f *testing.F) {
	f.Add("rep,n,latency_ms\n0,4,1.5\n1,8,2\n")
	f.Add("a,a\n1,2\n")
	f.Add("\"x\ny\",z\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, in string) {
		tb, err := ReadTable(strings.NewReader(in))
		if err != nil {
			return
		}
		for i, row := range tb.Rows {
			if len(row) != len(tb.Header) {
				t.Fatalf("row %d has %d fields, the header %d", i, len(row), len(tb.Header))
			}
			for _, h := range tb.Header {
				last := lastIndex(tb.Header, h) // a repeated name reads its last column
				if got := tb.Str(i, h); got != row[last] {
					t.Fatalf("row %d column %q = %q, want %q", i, h, got, row[last])
				}
			}
		}
		if err := tb.Err(); err != nil {
			t.Fatalf("every column read exists, yet %v", err)
		}
		missing := "\x00no such column"
		if len(tb.Rows) > 0 && tb.Str(0, missing) != "" {
			t.Fatal("a missing column read as a value")
		}
		if !tb.Has(missing) && len(tb.Rows) > 0 && tb.Err() == nil {
			t.Fatal("a missing column was read and Err is nil")
		}
	})
}

func lastIndex(xs []string, x string) int {
	for i := len(xs) - 1; i >= 0; i-- {
		if xs[i] == x {
			return i
		}
	}
	return -1
}
