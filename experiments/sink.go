package experiments

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Sink writes rows of one row type (see rows.go) as CSV.
type Sink struct {
	w      *csv.Writer
	layout *rowLayout
	rows   int
	record []string
}

// NewSink writes the header of proto's row type to w and returns a sink for
// rows of that type.
func NewSink(w io.Writer, proto any) (*Sink, error) {
	l, err := layoutOf(reflect.TypeOf(proto))
	if err != nil {
		return nil, err
	}
	s := &Sink{w: csv.NewWriter(w), layout: l}
	if err := s.w.Write(l.header); err != nil {
		return nil, fmt.Errorf("write csv header: %w", err)
	}
	return s, nil
}

// Write appends one row; it must be of the sink's row type (or a pointer
// to one), so its values line up with the header by construction.
func (s *Sink) Write(row any) error {
	rec, l, err := rowValues(row, s.record)
	if err != nil {
		return fmt.Errorf("csv row %d: %w", s.rows+1, err)
	}
	if l != s.layout {
		return fmt.Errorf("csv row %d: got a row of type %T, but the file's header is %s", s.rows+1, row, strings.Join(s.layout.header, ","))
	}
	s.record = rec
	s.rows++
	return s.w.Write(rec)
}

// Rows is the number of rows written.
func (s *Sink) Rows() int { return s.rows }

// Flush flushes buffered rows.
func (s *Sink) Flush() error {
	s.w.Flush()
	return s.w.Error()
}

// Format renders a value the way every CSV of ringside does: shortest
// round-tripping floats, durations in milliseconds, booleans as true/false.
func Format(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case uint64:
		return strconv.FormatUint(x, 10)
	case float64:
		if math.IsNaN(x) {
			return "NaN"
		}
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	case time.Duration:
		return strconv.FormatFloat(float64(x)/float64(time.Millisecond), 'f', -1, 64)
	case fmt.Stringer:
		return x.String()
	}
	return fmt.Sprint(v)
}

// WriteFile writes data to path as the results folder's every file is
// written: under a temporary name beside it, then renamed into place. A
// failed write never replaces the last good file, and a symlink planted at
// path is replaced, never followed (a rename does not follow it).
func WriteFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// atomicCSV is a CSV written under a temporary name in its directory and
// renamed into place by commit, so a failed run never replaces the last
// good file.
type atomicCSV struct {
	*Sink
	tmp  *os.File
	path string
}

func createCSV(dir, name string, proto any) (*atomicCSV, error) {
	tmp, err := os.CreateTemp(dir, "."+name+".csv.*")
	if err != nil {
		return nil, fmt.Errorf("create %s.csv: %w", name, err)
	}
	s, err := NewSink(tmp, proto)
	if err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, err
	}
	return &atomicCSV{Sink: s, tmp: tmp, path: filepath.Join(dir, name+".csv")}, nil
}

// close flushes and closes the temporary file; commit (ok) installs it,
// otherwise it is removed.
func (f *atomicCSV) close(ok bool) error {
	err := f.Flush()
	if err == nil {
		err = f.tmp.Chmod(0o644)
	}
	if cerr := f.tmp.Close(); err == nil {
		err = cerr
	}
	if ok && err == nil {
		if err = os.Rename(f.tmp.Name(), f.path); err != nil {
			err = fmt.Errorf("install %s: %w", f.path, err)
		}
	}
	if !ok || err != nil {
		os.Remove(f.tmp.Name())
	}
	return err
}
