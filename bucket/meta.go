package bucket

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
	"github.com/mongopatterns/mongopatterns/internal/errs"
)

// metaValue encodes a series key for a filter and for storage, in its
// canonical form: the keys of every embedded document sorted, at every
// depth, so that a map (whose iteration order Go randomises), a bson.D and
// a struct with the same fields give the same bytes. Equality on an
// embedded document compares field order too, so without this one series
// would scatter over several bucket keys.
//
// It rejects, wrapping [patterns.ErrInvalid], what would not be an
// equality match on one series: nil and null; a document with a key that
// starts with '$' at any depth (decoded from a request, {"$ne": null}
// would match every series: operator injection); an array (an equality on
// an array also matches arrays that contain it); regular expressions and
// JavaScript (a filter evaluates them); MinKey, MaxKey, undefined,
// DBPointer; NaN, a double's or a decimal's.
func metaValue(m any) (bson.RawValue, error) {
	// The common series keys, encoded without the encoder's machinery:
	// exactly what it gives for them.
	switch v := m.(type) {
	case string:
		return bson.RawValue{Type: bson.TypeString, Value: bsoncore.AppendString(nil, v)}, nil
	case bson.ObjectID:
		return bson.RawValue{Type: bson.TypeObjectID, Value: v[:]}, nil
	}
	t, data, err := bson.MarshalValue(m)
	if err != nil {
		return bson.RawValue{}, errs.Invalid("meta of type %T cannot be encoded: %v", m, err)
	}
	rv := bson.RawValue{Type: t, Value: data}
	switch t {
	case bson.TypeArray:
		return bson.RawValue{}, errs.Invalid("meta of type %T is an array; an equality on an array also matches arrays that contain it", m)
	case bson.TypeDouble, bson.TypeDecimal128:
		if bsonid.IsNaN(rv) {
			return bson.RawValue{}, errs.Invalid("meta is NaN")
		}
	}
	if err := checkMetaType(t); err != nil {
		return bson.RawValue{}, errs.Invalid("meta of type %T: %s", m, err)
	}
	canon, err := canonical(rv)
	if err != nil {
		return bson.RawValue{}, errs.Invalid("meta of type %T: %s", m, err)
	}
	return canon, nil
}

func checkMetaType(t bson.Type) error {
	switch t {
	case bson.TypeNull, bson.TypeUndefined, bson.TypeMinKey, bson.TypeMaxKey,
		bson.TypeRegex, bson.TypeJavaScript, bson.TypeCodeWithScope, bson.TypeDBPointer:
		return fmt.Errorf("encodes as a BSON %s, which a filter would not compare by equality", t)
	}
	return nil
}

// canonical returns v with the keys of its embedded documents sorted at
// every depth, and checks them.
func canonical(v bson.RawValue) (bson.RawValue, error) {
	switch v.Type {
	case bson.TypeEmbeddedDocument:
		elems, err := v.Document().Elements()
		if err != nil {
			return bson.RawValue{}, err
		}
		d := make(bson.D, len(elems))
		for i, e := range elems {
			key := e.Key()
			if strings.HasPrefix(key, "$") {
				return bson.RawValue{}, fmt.Errorf("key %q starts with '$', which makes it a query operator", key)
			}
			val, err := canonical(e.Value())
			if err != nil {
				return bson.RawValue{}, fmt.Errorf("%s: %w", key, err)
			}
			d[i] = bson.E{Key: key, Value: val}
		}
		slices.SortFunc(d, func(a, b bson.E) int { return cmp.Compare(a.Key, b.Key) })
		return marshalRaw(d)
	case bson.TypeArray:
		vals, err := v.Array().Values()
		if err != nil {
			return bson.RawValue{}, err
		}
		a := make(bson.A, len(vals))
		for i, x := range vals {
			if a[i], err = canonical(x); err != nil {
				return bson.RawValue{}, fmt.Errorf("%d: %w", i, err)
			}
		}
		return marshalRaw(a)
	}
	return v, nil
}

func marshalRaw(v any) (bson.RawValue, error) {
	t, data, err := bson.MarshalValue(v)
	return bson.RawValue{Type: t, Value: data}, err
}
