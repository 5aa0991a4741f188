package patterns

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// ValidateField checks a single BSON field name, one that must not be a
// path: it must be non-empty valid UTF-8 without NUL bytes, must not start
// with '$' (it would be read as an operator) and must not contain '.' (it
// would be read as a path). The error wraps [ErrInvalid].
func ValidateField(name string) error {
	if err := validateSegment(name); err != nil {
		return fmt.Errorf("%w: field name %q: %s", ErrInvalid, name, err)
	}
	if strings.Contains(name, ".") {
		return fmt.Errorf("%w: field name %q: contains '.', which makes it a path; a single field is expected", ErrInvalid, name)
	}
	return nil
}

// ValidatePath checks a dotted field path such as "customer.name": every
// dot-separated segment must pass the rules of [ValidateField] (non-empty,
// no leading '$', no NUL, valid UTF-8). So "a..b", ".a", "a." and "a.$b"
// are rejected. The error wraps [ErrInvalid].
func ValidatePath(path string) error {
	if path == "" {
		return fmt.Errorf("%w: field path is empty", ErrInvalid)
	}
	for i, seg := range strings.Split(path, ".") {
		if err := validateSegment(seg); err != nil {
			return fmt.Errorf("%w: field path %q: segment %d: %s", ErrInvalid, path, i+1, err)
		}
	}
	return nil
}

// ValidateCollection checks a collection name: non-empty valid UTF-8
// without NUL bytes or '$', and not in the server's "system." namespace.
// The error wraps [ErrInvalid].
func ValidateCollection(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: collection name is empty", ErrInvalid)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: collection name %q is not valid UTF-8", ErrInvalid, name)
	case strings.ContainsAny(name, "\x00$"):
		return fmt.Errorf("%w: collection name %q contains '$' or a NUL byte", ErrInvalid, name)
	case strings.HasPrefix(name, "system."):
		return fmt.Errorf("%w: collection name %q is in the server's system namespace", ErrInvalid, name)
	}
	return nil
}

func validateSegment(s string) error {
	switch {
	case s == "":
		return errors.New("is empty")
	case !utf8.ValidString(s):
		return errors.New("is not valid UTF-8")
	case strings.IndexByte(s, 0) >= 0:
		return errors.New("contains a NUL byte")
	case s[0] == '$':
		return errors.New("starts with '$', which makes it an operator")
	}
	return nil
}

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
// It costs one small BSON encoding and no round trip.
func ValidateID(id any) error {
	if id == nil {
		return fmt.Errorf("%w: id is nil", ErrInvalid)
	}
	if rv := reflect.ValueOf(id); rv.IsZero() {
		return fmt.Errorf("%w: id is the zero %T", ErrInvalid, id)
	}
	t, data, err := bson.MarshalValue(id)
	if err != nil {
		return fmt.Errorf("%w: id of type %T cannot be encoded: %v", ErrInvalid, id, err)
	}
	switch t {
	case bson.TypeEmbeddedDocument, bson.TypeArray:
		return fmt.Errorf("%w: id of type %T encodes as a BSON %s; ids must be scalar values (a document or array id could carry query operators)", ErrInvalid, id, t)
	case bson.TypeNull, bson.TypeUndefined, bson.TypeMinKey, bson.TypeMaxKey,
		bson.TypeRegex, bson.TypeJavaScript, bson.TypeCodeWithScope, bson.TypeDBPointer:
		return fmt.Errorf("%w: id of type %T encodes as a BSON %s, which cannot identify one document", ErrInvalid, id, t)
	case bson.TypeDouble:
		if f := (bson.RawValue{Type: t, Value: data}).Double(); math.IsNaN(f) {
			return fmt.Errorf("%w: id is NaN", ErrInvalid)
		}
	}
	return nil
}
