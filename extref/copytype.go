package extref

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/check"
	"github.com/mongopatterns/mongopatterns/internal/errs"
)

// copyType describes the copy struct S: the BSON name of its id field and of
// the fields copied from the source.
type copyType struct {
	name   string   // S's Go name, for errors
	id     string   // the id field's BSON name
	fields []string // the copied fields' BSON names, in declaration order
}

// describe reads S's BSON field names from its struct tags, with the
// driver's rules (a `bson:"name"` tag, else the lowercased Go name; "-"
// skips; exported ",inline" structs are flattened), checks them against an
// actual encoding of S (which catches what it does not read, such as the
// driver's legacy bare tags), and splits off the id field. Errors wrap
// [patterns.ErrInvalid].
func describe[S any](idField string) (copyType, error) {
	t := reflect.TypeFor[S]()
	ct := copyType{name: t.String(), id: idField}
	if t.Kind() != reflect.Struct {
		return ct, errs.Invalid("copy type %s is a %s, not a struct", t, t.Kind())
	}
	for _, m := range []reflect.Type{reflect.TypeFor[bson.Marshaler](), reflect.TypeFor[bson.ValueMarshaler]()} {
		if t.Implements(m) || reflect.PointerTo(t).Implements(m) {
			return ct, errs.Invalid("copy type %s implements %s: its fields cannot be read from its struct tags", t, m)
		}
	}
	names, err := structFields(t)
	if err != nil {
		return ct, err
	}
	zero, err := bson.Marshal(reflect.New(t).Elem().Interface())
	if err != nil {
		return ct, errs.Invalid("copy type %s cannot be encoded: %v", t, err)
	}
	elems, err := bson.Raw(zero).Elements()
	if err != nil {
		return ct, errs.Invalid("copy type %s: %v", t, err)
	}
	for _, e := range elems {
		if !slices.Contains(names, e.Key()) {
			return ct, errs.Invalid("copy type %s encodes a field %q that its struct tags do not declare", t, e.Key())
		}
	}
	if !slices.Contains(names, idField) {
		return ct, errs.Invalid("copy type %s has no field %q for the source's id (fields: %s)", t, idField, strings.Join(names, ", "))
	}
	for _, n := range names {
		if err := check.Field(n); err != nil {
			return ct, fmt.Errorf("copy type %s: %w", t, err)
		}
		if n != idField {
			ct.fields = append(ct.fields, n)
		}
	}
	if len(ct.fields) == 0 {
		return ct, errs.Invalid("copy type %s has no copied fields besides its id %q", t, idField)
	}
	return ct, nil
}

// structFields returns the BSON names of t's fields, flattening inline
// structs, and rejects what would make the copied fields unknowable or
// ambiguous: inline maps and duplicate names.
func structFields(t reflect.Type) ([]string, error) {
	var names []string
	for sf := range t.Fields() {
		if !sf.IsExported() {
			continue
		}
		tag := sf.Tag.Get("bson")
		if tag == "-" {
			continue
		}
		name, flags, _ := strings.Cut(tag, ",")
		if name == "" {
			name = strings.ToLower(sf.Name)
		}
		if slices.Contains(strings.Split(flags, ","), "inline") {
			ft := sf.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() != reflect.Struct {
				return nil, errs.Invalid("copy type %s: inline field %s is a %s; only inline structs are allowed (an inline map's fields are not known in advance)", t, sf.Name, ft.Kind())
			}
			inner, err := structFields(ft)
			if err != nil {
				return nil, err
			}
			for _, n := range inner {
				if slices.Contains(names, n) {
					return nil, errs.Invalid("copy type %s: field %q appears twice", t, n)
				}
			}
			names = append(names, inner...)
			continue
		}
		if slices.Contains(names, name) {
			return nil, errs.Invalid("copy type %s: field %q appears twice", t, name)
		}
		names = append(names, name)
	}
	return names, nil
}

// copyValue is the copy of one source document as S encodes it: what Of
// returns, marshalled. Every write and comparison uses these bytes, so a
// copy embedded from Of and a copy written by Sync are the same.
type copyValue struct {
	raw bson.Raw      // bson.Marshal of the S decoded from the source
	id  bson.RawValue // raw's id field
}

// want returns the value the copy's field f must hold; Type 0 when S omits
// it (an omitempty field at its zero value), in which case the field must
// be absent.
func (c copyValue) want(f string) bson.RawValue {
	v, _ := c.raw.LookupErr(f)
	return v
}
