package validation_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/validation"
)

// User is the users collection of the design documents' "Schema
// Validation" section, in ten lines.
type User struct {
	ID        bson.ObjectID `bson:"_id,omitempty"`
	Email     string        `bson:"email"`
	Name      string        `bson:"name"`
	CreatedAt time.Time     `bson:"created_at"`
	Role      string        `bson:"role,omitempty"`
	Age       int32         `bson:"age,omitempty"`
}

// userRules are the constraints of the users validator.
var userRules = []validation.Option{
	validation.Field("email", validation.Pattern(`^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}$`)),
	validation.Field("role", validation.Enum("user", "admin", "moderator")),
	validation.Field("age", validation.Minimum(0), validation.Maximum(150)),
}

func users(t testing.TB, opts ...validation.Option) *validation.Validator {
	t.Helper()
	v, err := validation.For[User](append(opts, userRules...)...)
	require.NoError(t, err)
	return v
}

// The validator, keyword for keyword (the pattern's final $
// restored, role's bsonType kept beside its enum), as a document: what
// createCollection sends.
func TestForUsersReproducesTheDesignDocument(t *testing.T) {
	want := bson.D{{Key: "$jsonSchema", Value: bson.D{
		{Key: "bsonType", Value: "object"},
		{Key: "required", Value: bson.A{"email", "name", "created_at"}},
		{Key: "properties", Value: bson.D{
			{Key: "email", Value: bson.D{{Key: "bsonType", Value: "string"}, {Key: "pattern", Value: `^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}$`}}},
			{Key: "role", Value: bson.D{{Key: "bsonType", Value: "string"}, {Key: "enum", Value: bson.A{"user", "admin", "moderator"}}}},
			{Key: "age", Value: bson.D{{Key: "bsonType", Value: "int"}, {Key: "minimum", Value: int32(0)}, {Key: "maximum", Value: int32(150)}}},
		}},
	}}}
	requireSameBSON(t, want, users(t, validation.OnlyConstrained()).Document())
}

// Without OnlyConstrained every field's type is checked.
func TestForUsersChecksEveryField(t *testing.T) {
	want := bson.D{
		{Key: "bsonType", Value: "object"},
		{Key: "required", Value: bson.A{"email", "name", "created_at"}},
		{Key: "properties", Value: bson.D{
			{Key: "_id", Value: bson.D{{Key: "bsonType", Value: "objectId"}}},
			{Key: "email", Value: bson.D{{Key: "bsonType", Value: "string"}, {Key: "pattern", Value: `^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}$`}}},
			{Key: "name", Value: bson.D{{Key: "bsonType", Value: "string"}}},
			{Key: "created_at", Value: bson.D{{Key: "bsonType", Value: "date"}}},
			{Key: "role", Value: bson.D{{Key: "bsonType", Value: "string"}, {Key: "enum", Value: bson.A{"user", "admin", "moderator"}}}},
			{Key: "age", Value: bson.D{{Key: "bsonType", Value: "int"}, {Key: "minimum", Value: int32(0)}, {Key: "maximum", Value: int32(150)}}},
		}},
	}
	requireSameBSON(t, want, users(t).Schema())
}

// The portable form of the users validator: the core $jsonSchema and a
// filter per way to break required and enum.
func TestPortableUsers(t *testing.T) {
	got, err := users(t, validation.OnlyConstrained()).Portable()
	require.NoError(t, err)
	want := bson.D{{Key: "$and", Value: bson.A{
		bson.D{{Key: "$jsonSchema", Value: bson.D{
			{Key: "bsonType", Value: "object"},
			{Key: "properties", Value: bson.D{
				{Key: "email", Value: bson.D{{Key: "bsonType", Value: "string"}, {Key: "pattern", Value: `^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}$`}}},
				{Key: "role", Value: bson.D{{Key: "bsonType", Value: "string"}}},
				{Key: "age", Value: bson.D{{Key: "bsonType", Value: "int"}, {Key: "minimum", Value: int32(0)}, {Key: "maximum", Value: int32(150)}}},
			}},
		}}},
		bson.D{{Key: "$nor", Value: bson.A{
			bson.D{{Key: "email", Value: bson.D{{Key: "$exists", Value: false}}}},
			bson.D{{Key: "name", Value: bson.D{{Key: "$exists", Value: false}}}},
			bson.D{{Key: "created_at", Value: bson.D{{Key: "$exists", Value: false}}}},
			bson.D{{Key: "role", Value: bson.D{{Key: "$exists", Value: true}, {Key: "$nin", Value: bson.A{"user", "admin", "moderator"}}}}},
		}}},
	}}}
	requireSameBSON(t, want, got)
}

func requireSameBSON(t *testing.T, want, got any) {
	t.Helper()
	w, err := bson.MarshalExtJSON(want, true, false)
	require.NoError(t, err)
	g, err := bson.MarshalExtJSON(got, true, false)
	require.NoError(t, err)
	require.JSONEq(t, string(w), string(g))
	require.Equal(t, string(w), string(g), "same keys in the same order")
}

// Blob is a named []byte: the driver's slice codec writes it, so the
// nil-slice setting applies, not the nil-[]byte one.
type Blob []byte

// Named []byte types, bson.D and arrays of bytes or elements are
// mapped as the driver writes them, nil included.
func TestForMapsSlicesAsTheDriver(t *testing.T) {
	type doc struct {
		Bytes []byte
		Blob  Blob
		D     bson.D
		A     [2]byte
		E     [1]bson.E
		N     []int
	}
	types := func(opts ...validation.Option) map[string]any {
		v, err := validation.For[doc](opts...)
		require.NoError(t, err)
		out := map[string]any{}
		for _, p := range v.Schema()[2].Value.(bson.D) {
			out[p.Key] = p.Value.(bson.D)[0].Value
		}
		return out
	}
	require.Equal(t, map[string]any{
		"bytes": bson.A{"binData", "null"}, "blob": bson.A{"binData", "null"}, "d": bson.A{"object", "null"},
		"a": "binData", "e": "object", "n": bson.A{"array", "null"},
	}, types())
	require.Equal(t, map[string]any{
		"bytes": bson.A{"binData", "null"}, "blob": "binData", "d": "object",
		"a": "binData", "e": "object", "n": "array",
	}, types(validation.NilSliceAsEmpty()))
	require.Equal(t, "binData", types(validation.NilByteSliceAsEmpty())["bytes"])

	// And each of them as the driver encodes it passes.
	v, err := validation.For[doc]()
	require.NoError(t, err)
	for _, d := range []doc{{}, {Bytes: []byte{1}, Blob: Blob{2}, D: bson.D{{Key: "k", Value: 1}}, N: []int{1 << 40}}} {
		raw, err := bson.Marshal(d)
		require.NoError(t, err)
		require.Nil(t, v.Validate(raw), "%s", bson.Raw(raw))
	}
}

// Only wraps the validator in {$or: [{field: {$nin: values}}, ...]}:
// documents at another version pass as they are; Validate agrees.
func TestOnly(t *testing.T) {
	v := only(t, users(t, validation.OnlyConstrained()), "schemaVersion", int32(3), nil)
	requireSameBSON(t, bson.D{{Key: "$or", Value: bson.A{
		bson.D{{Key: "schemaVersion", Value: bson.D{{Key: "$nin", Value: bson.A{int32(3), nil}}}}},
		users(t, validation.OnlyConstrained()).Document(),
	}}}, v.Document())
	bad := func(version any) bson.Raw {
		d := bson.D{{Key: "email", Value: "nope"}}
		if version != nil {
			d = append(d, bson.E{Key: "schemaVersion", Value: version})
		}
		return mustMarshal(t, d)
	}
	require.NotNil(t, v.Validate(bad(int32(3))), "current: checked")
	require.NotNil(t, v.Validate(bad(3.0)), "3.0 is 3, as $nin sees it")
	require.NotNil(t, v.Validate(bad(nil)), "missing is the implicit current version")
	require.Nil(t, v.Validate(bad(int32(2))), "older: as it is")
	require.Nil(t, v.Validate(bad("x")), "not a version this validator knows")
}

// For refuses, with ErrInvalid, what it cannot give a meaning.
func TestForRefuses(t *testing.T) {
	type node struct {
		Next *node `bson:"next"`
	}
	type withChan struct{ C chan int }
	type badInline struct {
		S string `bson:",inline"`
	}
	for name, err := range map[string]error{
		"no such field": func() error {
			_, err := validation.For[User](validation.Field("mail", validation.MinLength(1)))
			return err
		}(),
		"pattern on int": func() error {
			_, err := validation.For[User](validation.Field("age", validation.Pattern("x")))
			return err
		}(),
		"minimum on text": func() error {
			_, err := validation.For[User](validation.Field("name", validation.Minimum(1)))
			return err
		}(),
		"enum of ints": func() error { _, err := validation.For[User](validation.Field("role", validation.Enum(1))); return err }(),
		"empty enum":   func() error { _, err := validation.For[User](validation.Field("role", validation.Enum())); return err }(),
		"bad pattern": func() error {
			_, err := validation.For[User](validation.Field("email", validation.Pattern("(")))
			return err
		}(),
		"field twice": func() error {
			_, err := validation.For[User](validation.Field("age"), validation.Field("age"))
			return err
		}(),
		"keyword twice": func() error {
			_, err := validation.For[User](validation.Field("age", validation.Minimum(1), validation.Minimum(2)))
			return err
		}(),
		"recursive type": func() error { _, err := validation.For[node](); return err }(),
		"channel":        func() error { _, err := validation.For[withChan](); return err }(),
		"inlined string": func() error { _, err := validation.For[badInline](); return err }(),
		"not a struct":   func() error { _, err := validation.For[int](); return err }(),
		"items on a string": func() error {
			_, err := validation.For[User](validation.Field("email", validation.Items()))
			return err
		}(),
	} {
		require.ErrorIs(t, err, patterns.ErrInvalid, name)
		require.ErrorContains(t, err, "validation: For: ", name)
	}
}

// Only and the zero Validator refuse, with ErrInvalid, what would break
// every write or panic: a guard without values ({$nin: null}, which the
// server refuses at each insert), a field that is an operator or no
// path, a value $in does not compare by equality; a Validator not made
// by For.
func TestOnlyAndZeroRefuse(t *testing.T) {
	v := users(t)
	for name, err := range map[string]error{
		"no values":  func() error { _, err := v.Only("schemaVersion"); return err }(),
		"$where":     func() error { _, err := v.Only("$where", 1); return err }(),
		"empty path": func() error { _, err := v.Only("a..b", 1); return err }(),
		"a document": func() error { _, err := v.Only("v", bson.D{{Key: "$gt", Value: 1}}); return err }(),
		"an array":   func() error { _, err := v.Only("v", bson.A{1}); return err }(),
		"a regex":    func() error { _, err := v.Only("v", bson.Regex{Pattern: "."}); return err }(),
		"a channel":  func() error { _, err := v.Only("v", make(chan int)); return err }(),
		"zero Only":  func() error { _, err := (&validation.Validator{}).Only("v", 1); return err }(),
		"zero Check": func() error {
			_, err := validation.Check(context.Background(), mongotest.DB(t).Collection("c"), &validation.Validator{})
			return err
		}(),
		"zero Apply": func() error {
			return validation.Apply(context.Background(), mongotest.DB(t), "c", &validation.Validator{}, "", "")
		}(),
		"zero Portable": func() error { _, err := (&validation.Validator{}).Portable(); return err }(),
	} {
		require.ErrorIs(t, err, patterns.ErrInvalid, name)
	}
	zero := &validation.Validator{}
	require.NotNil(t, zero.Validate(mustMarshal(t, bson.D{})))
	requireSameBSON(t, bson.D{{Key: "$jsonSchema", Value: bson.D{}}}, zero.Document())
}

// %v of a Validator prints its document, not pointers; a zero one says
// it is invalid.
func TestValidatorString(t *testing.T) {
	type T struct {
		Name string `bson:"name"`
	}
	v, err := validation.For[T]()
	require.NoError(t, err)
	require.Equal(t, `{"$jsonSchema":{"bsonType":"object","required":["name"],"properties":{"name":{"bsonType":"string"}}}}`, fmt.Sprintf("%v", v))
	require.Equal(t, "<invalid validator>", (&validation.Validator{}).String())
	var none *validation.Validator
	require.Equal(t, "<invalid validator>", none.String())
}
