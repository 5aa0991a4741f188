package patterns

import (
	"fmt"
	"math"
	"reflect"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// ValidateID checks a document id given at the API (a parent id, a source
// id, an item id). It accepts the scalar values that MongoDB allows as _id
// (ObjectID, string, numbers, binary, dates, ...) and rejects, wrapping
// [ErrInvalid]:
//   - nil and zero values (an empty string, 0, a zero ObjectID);
//   - documents (maps, bson.M, bson.D, bson.Raw, structs) and arrays: an id
//     decoded from a request such as {"$ne": null} would otherwise match
//     every document (operator injection);
//   - regular expressions and JavaScript, which a filter would evaluate
//     rather than compare; NaN;
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
	case bson.TypeDouble:
		if f := (bson.RawValue{Type: t, Value: data}).Double(); math.IsNaN(f) {
			return fmt.Errorf("id is NaN: %w", ErrInvalid)
		}
	}
	return nil
}
