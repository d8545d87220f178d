package experiments

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"
)

// A row type is a struct whose exported fields tagged `csv:"name"` are the
// CSV's columns, in field order; untagged fields are not written. The header
// and the values written both come from the struct, so they cannot disagree
// and two values of the same type cannot be swapped by position. A
// time.Duration is written in milliseconds, so its column must end in
// "_ms": the unit is in the name. An embedded struct without a tag lends
// its columns in place (columns several row types share).
type rowLayout struct {
	header []string
	fields [][]int // field index path of each column
}

var layouts sync.Map // reflect.Type → *rowLayout or error

func layoutOf(t reflect.Type) (*rowLayout, error) {
	if v, ok := layouts.Load(t); ok {
		if err, bad := v.(error); bad {
			return nil, err
		}
		return v.(*rowLayout), nil
	}
	l, err := newLayout(t)
	if err != nil {
		layouts.Store(t, err)
		return nil, err
	}
	layouts.Store(t, l)
	return l, nil
}

var durationType = reflect.TypeFor[time.Duration]()

func newLayout(t reflect.Type) (*rowLayout, error) {
	if t == nil || t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("row type %v: want a struct with csv-tagged fields", t)
	}
	l := &rowLayout{}
	if err := l.add(t, nil, map[string]bool{}); err != nil {
		return nil, err
	}
	if len(l.header) == 0 {
		return nil, fmt.Errorf("row type %v: no csv-tagged fields", t)
	}
	return l, nil
}

func (l *rowLayout) add(t reflect.Type, path []int, seen map[string]bool) error {
	for i := range t.NumField() {
		f := t.Field(i)
		name, ok := f.Tag.Lookup("csv")
		at := append(slices.Clone(path), i)
		if !ok {
			if f.Anonymous && f.Type.Kind() == reflect.Struct {
				if err := l.add(f.Type, at, seen); err != nil {
					return err
				}
			}
			continue
		}
		switch {
		case !f.IsExported():
			return fmt.Errorf("row type %v: field %s has a csv tag but is not exported", t, f.Name)
		case name == "" || strings.ContainsAny(name, ",\"\n\r"):
			return fmt.Errorf("row type %v: field %s: column name %q", t, f.Name, name)
		case seen[name]:
			return fmt.Errorf("row type %v: column %q twice", t, name)
		case f.Type == durationType && !strings.HasSuffix(name, "_ms"):
			return fmt.Errorf("row type %v: field %s is a duration, written in milliseconds: its column %q must end in _ms", t, f.Name, name)
		}
		seen[name] = true
		l.header = append(l.header, name)
		l.fields = append(l.fields, at)
	}
	return nil
}

// Header is the CSV header of row's type. It panics on a type that is not
// a row type: a programming error, which the catalogue's tests catch.
func Header(row any) []string {
	l, err := layoutOf(reflect.TypeOf(row))
	if err != nil {
		panic("experiments: " + err.Error())
	}
	return l.header
}

// Columns is the header of e's CSV, from its Spec's row type.
func Columns(e Experiment) []string { return Header(e.Spec().Row) }

// rowValues formats row's columns.
func rowValues(row any, into []string) ([]string, *rowLayout, error) {
	v := reflect.ValueOf(row)
	if v.Kind() == reflect.Pointer && !v.IsNil() {
		v = v.Elem()
	}
	if !v.IsValid() {
		return nil, nil, fmt.Errorf("no row (nil)")
	}
	l, err := layoutOf(v.Type())
	if err != nil {
		return nil, nil, err
	}
	into = into[:0]
	for _, i := range l.fields {
		into = append(into, Format(v.FieldByIndex(i).Interface()))
	}
	return into, l, nil
}
