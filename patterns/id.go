package patterns

import (
	"fmt"
	"reflect"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
)

// ValidateID checks a document id given at the API (a parent id, a source
// id, an item id), as a Go value or encoded (a bson.RawValue). It accepts
// the scalar values that MongoDB allows as _id and a filter compares by
// equality (ObjectIDs, strings and symbols, numbers, infinities included,
// binary data, booleans, dates, timestamps) and rejects, wrapping
// [ErrInvalid]:
//   - nil and zero values: an empty string, a number equal to 0 (-0 and
//     the decimal 0.00 included), false, a zero ObjectID, the zero value
//     of any Go type;
//   - documents (maps, bson.M, bson.D, bson.Raw, structs) and arrays: an id
//     decoded from a request such as {"$ne": null} would otherwise match
//     every document (operator injection);
//   - regular expressions and JavaScript (with or without scope), which a
//     filter would evaluate rather than compare;
//   - NaN, a double's or a decimal's, which sorts before every number and
//     which no range in a keyset page reaches;
//   - null, undefined, MinKey, MaxKey and DBPointers, which cannot
//     identify one document;
//   - values the BSON encoder cannot encode.
//
// Every repository checks its ids with it; an application may check ids
// taken from a request the same way. It sends nothing; the common ids (a
// non-empty string, a non-zero ObjectID or integer) are accepted without
// an allocation, others cost one small BSON encoding.
func ValidateID(id any) error {
	switch v := id.(type) {
	case string:
		if v != "" {
			return nil
		}
	case bson.ObjectID:
		if !v.IsZero() {
			return nil
		}
	case int:
		if v != 0 {
			return nil
		}
	case int32:
		if v != 0 {
			return nil
		}
	case int64:
		if v != 0 {
			return nil
		}
	}
	if id == nil {
		return fmt.Errorf("id is nil: %w", ErrInvalid)
	}
	if rv := reflect.ValueOf(id); rv.IsZero() {
		return fmt.Errorf("id is the zero %T: %w", id, ErrInvalid)
	}
	t, data, err := bson.MarshalValue(id)
	if err != nil {
		return fmt.Errorf("id of type %T cannot be encoded (%v): %w", id, err, ErrInvalid)
	}
	switch t {
	case bson.TypeEmbeddedDocument, bson.TypeArray:
		return fmt.Errorf("id of type %T encodes as a BSON %s; ids must be scalar values (a document or array id could carry query operators): %w", id, t, ErrInvalid)
	case bson.TypeNull, bson.TypeUndefined, bson.TypeMinKey, bson.TypeMaxKey,
		bson.TypeRegex, bson.TypeJavaScript, bson.TypeCodeWithScope, bson.TypeDBPointer:
		return fmt.Errorf("id of type %T encodes as a BSON %s, which cannot identify one document: %w", id, t, ErrInvalid)
	case bson.TypeDouble, bson.TypeDecimal128, bson.TypeInt32, bson.TypeInt64:
		rv := bson.RawValue{Type: t, Value: data}
		if bsonid.IsNaN(rv) {
			return fmt.Errorf("id is NaN: %w", ErrInvalid)
		}
		if n, _ := bsonid.Number(rv); n == "0" {
			return fmt.Errorf("id is %s, a number equal to 0: %w", rv, ErrInvalid)
		}
	case bson.TypeString, bson.TypeSymbol:
		if len(data) <= 5 { // an int32 length of 1 and the NUL: ""
			return fmt.Errorf("id is an empty %s: %w", t, ErrInvalid)
		}
	case bson.TypeBoolean:
		if !(bson.RawValue{Type: t, Value: data}).Boolean() {
			return fmt.Errorf("id is false: %w", ErrInvalid)
		}
	case bson.TypeObjectID:
		if (bson.RawValue{Type: t, Value: data}).ObjectID().IsZero() {
			return fmt.Errorf("id is the zero ObjectID: %w", ErrInvalid)
		}
	}
	return nil
}
