package validation_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/validation"
)

// Bounded has one bounded double and a version field for Only.
type Bounded struct {
	ID int     `bson:"_id"`
	F  float64 `bson:"f"`
	V  any     `bson:"v"`
}

// edgeCase is a document and whether the server's validator accepts it,
// as MongoDB decides (a comparison with NaN is false; a guard field
// compares as $in compares, element by element in an array).
type edgeCase struct {
	name  string
	v     *validation.Validator
	f     any
	ver   any
	valid bool
}

func edgeCases(t *testing.T) []edgeCase {
	lo, err := validation.For[Bounded](validation.Field("f", validation.Minimum(0)))
	require.NoError(t, err)
	hi, err := validation.For[Bounded](validation.Field("f", validation.Maximum(10)))
	require.NoError(t, err)
	at2 := only(t, hi, "v", 2)
	atNil := only(t, hi, "v", nil)
	return []edgeCase{
		{"NaN under a minimum", lo, math.NaN(), 1, false},
		{"NaN under a maximum", hi, math.NaN(), 1, false},
		{"-Inf under a maximum", hi, math.Inf(-1), 1, true},
		{"+Inf under a minimum", lo, math.Inf(1), 1, true},
		{"guard 2, version 2", at2, 20.0, 2, false},
		{"guard 2, version [2]", at2, 20.0, bson.A{int32(2)}, false},
		{"guard 2, version [3 2.0]", at2, 20.0, bson.A{int32(3), 2.0}, false},
		{"guard 2, version [3]", at2, 20.0, bson.A{int32(3)}, true},
		{"guard 2, version [[2]]", at2, 20.0, bson.A{bson.A{int32(2)}}, true},
		{"guard nil, version [null]", atNil, 20.0, bson.A{nil}, false},
		{"guard nil, version []", atNil, 20.0, bson.A{}, true},
		{"guard nil, version [1]", atNil, 20.0, bson.A{int32(1)}, true},
		{"guard v.n 2, version {n: 2}", only(t, hi, "v.n", 2), 20.0, bson.D{{Key: "n", Value: int32(2)}}, false},
		{"guard v.n 2, version {n: 3}", only(t, hi, "v.n", 2), 20.0, bson.D{{Key: "n", Value: int32(3)}}, true},
	}
}

// TestValidateAgreesOnEdgeValues: Validate gives the server's verdict on
// NaN under a bound, on a guard field holding an array and on a guard
// given as a dotted path (a path, as the server reads it); where the
// server enforces validators, each document is inserted into a
// collection under Apply's validator and the server's verdict must be
// Validate's.
func TestValidateAgreesOnEdgeValues(t *testing.T) {
	cases := edgeCases(t)
	raw := func(c edgeCase, id int) bson.Raw {
		b, err := bson.Marshal(bson.D{{Key: "_id", Value: id}, {Key: "f", Value: c.f}, {Key: "v", Value: c.ver}})
		require.NoError(t, err)
		return b
	}
	var vs []verdict
	for i, c := range cases {
		vs = append(vs, verdict{c.name, c.v, raw(c, i), c.valid})
	}
	requireVerdicts(t, vs)
}

// Dotted has a field whose name holds a dot, which the driver stores as
// one field and a query path reads as two.
type Dotted struct {
	ID string `bson:"_id"`
	AB string `bson:"a.b"`
}

// TestPortableRefusesDottedNames: the portable form reads a required
// field "a.b" as the path a → b and would reject every document the
// driver encodes from the type; it is refused with ErrUnsupported, and
// Apply sends nothing (before, FerretDB 2 created the collection, then
// refused the collMod, leaving a collection without a validator).
func TestPortableRefusesDottedNames(t *testing.T) {
	v, err := validation.For[Dotted]()
	require.NoError(t, err)
	doc, err := bson.Marshal(Dotted{ID: "1", AB: "x"})
	require.NoError(t, err)
	require.Nil(t, v.Validate(doc), "the driver's document is valid")
	_, err = v.Portable()
	require.ErrorIs(t, err, patterns.ErrUnsupported)
	require.ErrorContains(t, err, `"a.b"`)
	mongotest.Require(t, patterns.FeatureValidators)
	p := validation.PlanFor(mongotest.Server())
	if p.FullSchema {
		t.Skip("skipped: the server takes the whole $jsonSchema, which names the field as stored")
	}
	db := mongotest.DB(t)
	err = validation.ApplyPlan(context.Background(), db, "dotted", v, "", "", p)
	require.ErrorIs(t, err, patterns.ErrUnsupported)
	names, err := db.ListCollectionNames(context.Background(), bson.D{})
	require.NoError(t, err)
	require.Empty(t, names, "nothing created")
}

// Long and Dec hold one bounded number each.
type (
	Long struct {
		ID int   `bson:"_id"`
		N  int64 `bson:"n"`
	}
	Dec struct {
		ID int             `bson:"_id"`
		N  bson.Decimal128 `bson:"n"`
	}
)

func mustDec(t *testing.T, s string) bson.Decimal128 {
	d, err := bson.ParseDecimal128(s)
	require.NoError(t, err)
	return d
}

// TestNumbersCompareExactly: bounds and enums keep an int64 beyond 2^53
// exactly (no float64 on the way), and Validate compares int32, int64,
// double and Decimal128 by their exact values, as the server does
// (compareDecimalToDouble and its siblings); where the server enforces
// validators, each document is inserted under Apply's validator and the
// server's verdict must be Validate's.
func TestNumbersCompareExactly(t *testing.T) {
	const big = int64(1) << 53
	forLong := func(cs ...validation.Constraint) *validation.Validator {
		v, err := validation.For[Long](validation.Field("n", cs...))
		require.NoError(t, err)
		return v
	}
	forDec := func(cs ...validation.Constraint) *validation.Validator {
		v, err := validation.For[Dec](validation.Field("n", cs...))
		require.NoError(t, err)
		return v
	}
	enum := forLong(validation.Enum(big + 1))
	require.Contains(t, bson.Raw(mustMarshal(t, enum.Schema())).String(), `"enum": [{"$numberLong":"9007199254740993"}]`)
	hi := forLong(validation.Maximum(big))
	require.Contains(t, bson.Raw(mustMarshal(t, hi.Schema())).String(), `"maximum": {"$numberLong":"9007199254740992"}`)
	dec10, dec0 := forDec(validation.Maximum(10)), forDec(validation.Minimum(0))
	cases := []struct {
		name  string
		v     *validation.Validator
		n     any
		valid bool
	}{
		{"2^53+1 in enum [2^53+1]", enum, big + 1, true},
		{"2^53 in enum [2^53+1]", enum, big, false},
		{"2^53+1 under maximum 2^53", hi, big + 1, false},
		{"2^53 under maximum 2^53", hi, big, true},
		{"1E+400 under maximum 10", dec10, mustDec(t, "1E+400"), false},
		{"-1E+400 under minimum 0", dec0, mustDec(t, "-1E+400"), false},
		{"-1E+400 under maximum 10", dec10, mustDec(t, "-1E+400"), true},
		{"10.0000000000000000000000000001 under maximum 10", dec10, mustDec(t, "10.0000000000000000000000000001"), false},
		{"10.000000000000000000000000000 under maximum 10", dec10, mustDec(t, "10.000000000000000000000000000"), true},
		{"9.9999999999999999999999999999 under maximum 10", dec10, mustDec(t, "9.9999999999999999999999999999"), true},
		{"-0.0000000000000000000000000001 under minimum 0", dec0, mustDec(t, "-0.0000000000000000000000000001"), false},
		{"Infinity under maximum 10", dec10, mustDec(t, "Infinity"), false},
		{"NaN under minimum 0", dec0, mustDec(t, "NaN"), false},
	}
	raw := func(i int, n any) bson.Raw {
		return mustMarshal(t, bson.D{{Key: "_id", Value: i}, {Key: "n", Value: n}})
	}
	var vs []verdict
	for i, c := range cases {
		vs = append(vs, verdict{c.name, c.v, raw(i, c.n), c.valid})
	}
	requireVerdicts(t, vs)
}

// Small has an int32 field.
type Small struct {
	ID int   `bson:"_id"`
	N  int32 `bson:"n"`
}

// TestEnumKeepsTheType: an enum compares numbers by value (MongoDB's enum
// takes 1.0 and NumberLong(1) for 1), so both forms keep the field's
// bsonType beside it and mean the same: only an int32 1 passes.
func TestEnumKeepsTheType(t *testing.T) {
	v, err := validation.For[Small](validation.Field("n", validation.Enum(1)))
	require.NoError(t, err)
	require.Contains(t, bson.Raw(mustMarshal(t, v.Document())).String(), `"n": {"bsonType": "int","enum": [{"$numberInt":"1"}]}`)
	cases := []struct {
		n     any
		valid bool
	}{{int32(1), true}, {1.0, false}, {int64(1), false}, {int32(2), false}}
	raw := func(i int, n any) bson.Raw {
		return mustMarshal(t, bson.D{{Key: "_id", Value: i}, {Key: "n", Value: n}})
	}
	var vs []verdict
	for i, c := range cases {
		vs = append(vs, verdict{fmt.Sprintf("%T %v", c.n, c.n), v, raw(i, c.n), c.valid})
	}
	requireVerdicts(t, vs)
}

func only(t *testing.T, v *validation.Validator, field string, values ...any) *validation.Validator {
	t.Helper()
	g, err := v.Only(field, values...)
	require.NoError(t, err)
	return g
}

// Keys holds the driver's MinKey and MaxKey.
type Keys struct {
	ID  int         `bson:"_id"`
	Min bson.MinKey `bson:"min"`
	Max bson.MaxKey `bson:"max"`
}

// TestPortableRefusesMinAndMaxKey: FerretDB 2's $jsonSchema never matches
// bsonType minKey or maxKey, so the portable form would refuse what the
// driver writes: it is refused with ErrUnsupported, and where the server
// takes the whole $jsonSchema the driver's document is accepted.
func TestPortableRefusesMinAndMaxKey(t *testing.T) {
	v, err := validation.For[Keys]()
	require.NoError(t, err)
	doc := mustMarshal(t, Keys{ID: 1})
	require.Nil(t, v.Validate(doc))
	_, err = v.Portable()
	require.ErrorIs(t, err, patterns.ErrUnsupported)
	require.ErrorContains(t, err, "minKey")
	mongotest.Require(t, patterns.FeatureValidators)
	ctx := context.Background()
	db := mongotest.DB(t)
	p := validation.PlanFor(mongotest.Server())
	err = validation.ApplyPlan(ctx, db, "keys", v, "", "", p)
	if !p.FullSchema {
		require.ErrorIs(t, err, patterns.ErrUnsupported)
		return
	}
	require.NoError(t, err)
	_, err = db.Collection("keys").InsertOne(ctx, doc)
	require.NoError(t, err)
}

// Text holds one string.
type Text struct {
	ID int    `bson:"_id"`
	S  string `bson:"s"`
}

// TestPatternsMeanWhatPCREMeans: Validate gives the server's (PCRE's)
// verdict on the syntax Go's regexp reads differently: $ before a final
// newline, \s and \S on the vertical tab, \v (vertical whitespace); \z
// refuses a final newline in both. A $ with more of the pattern after it
// is refused.
func TestPatternsMeanWhatPCREMeans(t *testing.T) {
	email := `^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}`
	cases := []struct {
		pattern, s string
		valid      bool
	}{
		{email + `$`, "ada@example.com", true},
		{email + `$`, "ada@example.com\n", true},
		{email + `$`, "ada@example.com\n\n", false},
		{email + `\z`, "ada@example.com\n", false},
		{email + `\z`, "ada@example.com", true},
		{`^(a|b$)`, "b\n", true},
		{`^a\sb$`, "a\vb", true},
		{`^a\Sb$`, "a\vb", false},
		{`^a[\s]b$`, "a\vb", true},
		{`^a[^\s]b$`, "a\vb", false},
		{`^a\vb$`, "a\u2028b", true},
		{`^a\vb$`, "a\nb", true},
		{`^a\vb$`, "a b", false},
		{`^[\v]$`, "\r", true},
		{`^\Q$\E$`, "$", true},
	}
	var vs []verdict
	for i, c := range cases {
		v, err := validation.For[Text](validation.Field("s", validation.Pattern(c.pattern)))
		require.NoError(t, err, c.pattern)
		vs = append(vs, verdict{fmt.Sprintf("%s on %q", c.pattern, c.s), v, mustMarshal(t, Text{ID: i, S: c.s}), c.valid})
	}
	_, err := validation.For[Text](validation.Field("s", validation.Pattern(`a$b`)))
	require.ErrorIs(t, err, patterns.ErrInvalid)
	requireVerdicts(t, vs)
}

// Nick has an omitempty pointer: the driver leaves a nil one out, never
// writes null.
type Nick struct {
	ID   int     `bson:"_id"`
	Nick *string `bson:"nick,omitempty"`
}

// An enum on an omitempty pointer does not admit null, which the driver
// never writes there; a pointer without omitempty would.
func TestEnumOnAnOmitemptyPointer(t *testing.T) {
	v, err := validation.For[Nick](validation.Field("nick", validation.Enum("a", "b")))
	require.NoError(t, err)
	require.Contains(t, bson.Raw(mustMarshal(t, v.Schema())).String(), `"nick": {"bsonType": "string","enum": ["a","b"]}`)
	require.NotNil(t, v.Validate(mustMarshal(t, bson.D{{Key: "_id", Value: 1}, {Key: "nick", Value: nil}})))
	require.Nil(t, v.Validate(mustMarshal(t, Nick{ID: 1})))
}

// verdict is a document and whether v accepts it, as the server decides.
type verdict struct {
	name  string
	v     *validation.Validator
	doc   bson.Raw
	valid bool
}

// requireVerdicts requires Validate to give each verdict; where the
// server enforces validators, each document is inserted into a
// collection of its own under Apply's validator, and the server must
// give it too.
func requireVerdicts(t *testing.T, vs []verdict) {
	t.Helper()
	for _, c := range vs {
		require.Equal(t, c.valid, c.v.Validate(c.doc) == nil, "%s: Validate says %v", c.name, c.v.Validate(c.doc))
	}
	mongotest.Require(t, patterns.FeatureValidators)
	ctx := context.Background()
	db := mongotest.DB(t)
	p := validation.PlanFor(mongotest.Server())
	for i, c := range vs {
		name := fmt.Sprintf("c%d", i)
		require.NoError(t, validation.ApplyPlan(ctx, db, name, c.v, "", "", p))
		_, err := db.Collection(name).InsertOne(ctx, c.doc)
		require.Equal(t, c.valid, err == nil, "%s: the server says %v", c.name, err)
	}
}
