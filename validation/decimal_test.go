package validation_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/validation"
)

// DecField has a bounded Decimal128.
type DecField struct {
	ID int             `bson:"_id"`
	D  bson.Decimal128 `bson:"d"`
}

// Promise (doc.go): "Numbers are kept exactly ... and compared exactly,
// as the server compares int32, int64, double and Decimal128"; eval.go
// numberOf: "the exact value of an int32, int64, double or Decimal128, as
// the server compares them".
//
// Reference: IEEE 754-2008 decimal128 (BID), which MongoDB implements
// with Intel's library (src/third_party/IntelRDFPMathLib): a significand
// above 10^34-1 is non-canonical and its value is zero. The driver writes
// any bits bson.NewDecimal128 is given, and its Decimal128.BigInt
// (decimal.go) returns the oversized significand as is, so Validate reads
// 2^113-1 (about 1.04e34) where the server reads 0: under maximum 10 it
// refuses a document the server accepts. Written with the exponent bias
// 6176 (value = significand x 10^0).
func TestNonCanonicalDecimalIsZero(t *testing.T) {
	v, err := validation.For[DecField](validation.Field("d", validation.Maximum(10)))
	require.NoError(t, err)
	high := uint64(6176)<<49 | (uint64(1)<<49 - 1)
	nonCanonical := bson.NewDecimal128(high, ^uint64(0))
	vs := []verdict{{"non-canonical decimal (zero) under maximum 10", v, mustMarshal(t, DecField{ID: 1, D: nonCanonical}), true}}
	for _, c := range vs {
		assert.Equal(t, c.valid, c.v.Validate(c.doc) == nil, "%s: Validate says %v", c.name, c.v.Validate(c.doc))
	}
	serverSays(t, vs)
}
