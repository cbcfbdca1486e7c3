package uverbs_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/purerdma/rdma/uverbs"
)

// TestNilReceivers calls every exported method of the package's pointer
// types on a nil receiver, with zero arguments (nil pointers, nil
// contexts): none may panic, and each that returns an error returns one
// matching EINVAL that says what was nil. Methods are found by
// reflection, so a method added later is covered too.
func TestNilReceivers(t *testing.T) {
	for _, recv := range []any{
		(*uverbs.Context)(nil), (*uverbs.PD)(nil), (*uverbs.CQ)(nil), (*uverbs.CompChannel)(nil),
		(*uverbs.QP)(nil), (*uverbs.SRQ)(nil), (*uverbs.MR)(nil), (*uverbs.MW)(nil), (*uverbs.AH)(nil),
		(*uverbs.TD)(nil), (*uverbs.Buffer)(nil), (*uverbs.DeviceAttr)(nil), (*uverbs.PostError)(nil),
	} {
		v := reflect.ValueOf(recv)
		typ := v.Type()
		if typ.NumMethod() == 0 {
			t.Fatalf("%v has no exported methods", typ)
		}
		for i := range typ.NumMethod() {
			m := typ.Method(i)
			t.Run(fmt.Sprintf("%v.%s", typ.Elem().Name(), m.Name), func(t *testing.T) {
				args := []reflect.Value{v}
				for j := 1; j < m.Type.NumIn(); j++ {
					args = append(args, reflect.Zero(m.Type.In(j)))
				}
				var out []reflect.Value
				func() {
					defer func() {
						if r := recover(); r != nil {
							t.Fatalf("panics: %v", r)
						}
					}()
					out = m.Func.Call(args)
				}()
				errType := reflect.TypeFor[error]()
				for _, o := range out {
					if o.Type() != errType || m.Name == "Unwrap" { // a nil PostError wraps nothing
						continue
					}
					err, _ := o.Interface().(error)
					if !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), "nil") {
						t.Errorf("error %v, want EINVAL saying what was nil", err)
					}
				}
			})
		}
	}
}

// TestNilFunctionArguments: package functions given nil pointers.
func TestNilFunctionArguments(t *testing.T) {
	if _, err := uverbs.MapFile(nil, 4096); !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), "nil file") {
		t.Errorf("MapFile(nil) = %v, want EINVAL naming the nil file", err)
	}
	if _, err := uverbs.ParseGRH(nil); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("ParseGRH(nil) = %v, want EINVAL", err)
	}
}
