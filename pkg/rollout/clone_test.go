package rollout_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// fill sets every field reachable from v, slices two elements long and
// pointers to filled values, so that a field added later is covered.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			fill(v.Index(i))
		}
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k)
		fill(e)
		v.SetMapIndex(k, e)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	}
}

// shared lists the paths at which a and b hold the same memory (a slice's
// array, a pointer's target, a map).
func shared(path string, a, b reflect.Value) []string {
	var out []string
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			return nil
		}
		if a.Pointer() == b.Pointer() {
			out = append(out, path)
		}
		return append(out, shared(path, a.Elem(), b.Elem())...)
	case reflect.Slice:
		if a.Len() > 0 && b.Len() > 0 && a.Pointer() == b.Pointer() {
			out = append(out, path)
		}
		for i := range min(a.Len(), b.Len()) {
			out = append(out, shared(path+"[i]", a.Index(i), b.Index(i))...)
		}
	case reflect.Map:
		if !a.IsNil() && a.Pointer() == b.Pointer() {
			out = append(out, path)
		}
	case reflect.Struct:
		for i := range a.NumField() {
			if a.Type().Field(i).IsExported() {
				out = append(out, shared(path+"."+a.Type().Field(i).Name, a.Field(i), b.Field(i))...)
			}
		}
	}
	return out
}

func TestCloneSharesNothing(t *testing.T) {
	var ro rollout.Rollout
	fill(reflect.ValueOf(&ro).Elem())
	c := ro.Clone()
	if diff := cmp.Diff(ro, c); diff != "" {
		t.Errorf("the clone differs (-rollout +clone):\n%s", diff)
	}
	if got := shared("Rollout", reflect.ValueOf(ro), reflect.ValueOf(c)); len(got) > 0 {
		t.Errorf("the clone shares memory with the rollout at %v: copy them in Clone", got)
	}
	var zero rollout.Rollout
	if diff := cmp.Diff(zero, zero.Clone()); diff != "" {
		t.Errorf("the clone of a zero rollout differs:\n%s", diff)
	}
}
