package versioning

import (
	"fmt"
	"math"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// parseVersion reads a stored schema version. Any BSON number with an
// integral value in the int32 range is accepted, so documents stamped by
// other tools (the shell writes doubles, other drivers int64) read the same
// as the int32 this package writes. An error wraps [ErrMigration].
func parseVersion(field string, v bson.RawValue) (int, error) {
	var n float64
	switch v.Type {
	case bson.TypeInt32:
		return int(v.Int32()), nil
	case bson.TypeInt64:
		n = float64(v.Int64())
	case bson.TypeDouble:
		n = v.Double()
	default:
		return 0, fmt.Errorf("field %q is a BSON %s, not an integer version: %w", field, v.Type, ErrMigration)
	}
	if n != math.Trunc(n) || n < math.MinInt32 || n > math.MaxInt32 {
		return 0, fmt.Errorf("field %q is %v, not an integer version: %w", field, v, ErrMigration)
	}
	return int(n), nil
}

// versionOf returns the schema version of a stored document: its version
// field, or the implicit version when the field is absent or null.
func (s schema) versionOf(raw bson.Raw) (int, error) {
	v, err := raw.LookupErr(s.field)
	if err != nil || v.Type == bson.TypeNull {
		return s.implicit, nil
	}
	return parseVersion(s.field, v)
}

// idOf returns a stored document's _id as a Go value, for errors and
// reports.
func idOf(raw bson.Raw) any {
	var id any
	if err := raw.Lookup("_id").Unmarshal(&id); err != nil {
		return raw.Lookup("_id").String()
	}
	return id
}
