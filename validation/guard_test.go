package validation_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/validation"
)

// Guarded is checked only where its kind (or meta.v) is selected.
type Guarded struct {
	ID   int     `bson:"_id"`
	F    float64 `bson:"f"`
	Kind any     `bson:"kind"`
	Meta any     `bson:"meta"`
}

// Promise (eval.go, guard.selects): "reports whether doc's field (a dotted
// path, as the server reads it) equals one of g's values, as $in decides:
// the field or, in an array, one of its elements"; Validate evaluates "as
// the server evaluates [Validator.Document]".
//
// References: MongoDB's query path semantics (manual, "Query an Array of
// Embedded Documents": {"meta.v": 2} matches meta: [{v: 2}]), so the
// guard {meta.v: {$nin: [2]}} does not exempt it; and BSON comparison
// (manual, "Comparison/Sort Order": "MongoDB treats some types as
// equivalent for comparison purposes"; src/mongo/bson/bsonelement.cpp
// canonicalizeBSONType puts String and Symbol in one class and
// compareElementValues compares their strings), so {kind: {$nin: ["a"]}}
// does not exempt kind: Symbol("a"). Validate exempts both, and passes
// documents whose f breaks maximum 10.
func TestGuardPathsAndEquivalentTypes(t *testing.T) {
	hi, err := validation.For[Guarded](validation.Field("f", validation.Maximum(10)))
	require.NoError(t, err)
	byMeta, err := hi.Only("meta.v", 2)
	require.NoError(t, err)
	byKind, err := hi.Only("kind", "a")
	require.NoError(t, err)
	byNull, err := hi.Only("kind", bson.Null{})
	require.NoError(t, err)
	vs := []verdict{
		// Only: "a nil value: field missing or null"; bson.Null{} is encoded
		// as null too, and {kind: {$nin: [null]}} is false for a missing kind
		// (manual, "Query for Null or Missing Fields"), so the document is
		// checked; Validate's guard counts only a Go nil as "missing".
		{"guard kind bson.Null{}, kind missing, f 20", byNull, mustMarshal(t, bson.D{{Key: "_id", Value: 3}, {Key: "f", Value: 20.0}, {Key: "meta", Value: nil}}), false},
		{"guard meta.v 2, meta [{v: 2}], f 20", byMeta, mustMarshal(t, Guarded{ID: 1, F: 20, Meta: bson.A{bson.D{{Key: "v", Value: int32(2)}}}}), false},
		{"guard kind \"a\", kind Symbol(\"a\"), f 20", byKind, mustMarshal(t, Guarded{ID: 2, F: 20, Kind: bson.Symbol("a")}), false},
	}
	for _, c := range vs {
		assert.Equal(t, c.valid, c.v.Validate(c.doc) == nil, "%s: Validate says %v", c.name, c.v.Validate(c.doc))
	}
	serverSays(t, vs)
}
