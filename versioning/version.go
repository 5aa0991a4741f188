package versioning

import (
	"fmt"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
)

// parseVersion reads a stored schema version. Any BSON number (int32,
// int64, double or decimal) with an integral value in the int32 range is
// accepted, so documents stamped by other tools (the shell writes doubles,
// other drivers int64, some tools decimals) read the same as the int32
// this package writes, as the server's {$eq: int32(n)} matches them. An
// error wraps [ErrMigration].
func parseVersion(field string, v bson.RawValue) (int, error) {
	digits, ok := bsonid.Number(v)
	if !ok {
		return 0, fmt.Errorf("field %q is a BSON %s, not an integer version: %w", field, v.Type, ErrMigration)
	}
	n, err := strconv.ParseInt(digits, 10, 32) // an integral value's digits; a fraction, NaN or an infinity fail
	if err != nil {
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
