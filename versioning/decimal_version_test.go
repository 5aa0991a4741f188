package versioning_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
)

// TestDecimalVersion: parseVersion's comment (versioning/version.go:10):
// "Any BSON number with an integral value in the int32 range is accepted,
// so documents stamped by other tools ... read the same as the int32 this
// package writes". Decimal128 is one of MongoDB's four numeric BSON types
// (manual, Comparison/Sort Order: "Numbers (ints, longs, doubles,
// decimals)"; $type "number"); the repository's own filter {schemaVersion:
// {$eq: int32(3)}} matches the decimal 3. Issue 31's method names counts
// and "numbers of all four types" at every door. A document at version 3,
// stamped as NumberDecimal("3") by another tool, must read as version 3.
func TestDecimalVersion(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	r := newUsers(t, db, serverPlan())
	three, err := bson.ParseDecimal128("3")
	require.NoError(t, err)
	_, err = db.Collection("users").InsertOne(ctx, bson.D{{Key: "_id", Value: "ada"}, {Key: "schemaVersion", Value: three},
		{Key: "first", Value: "Ada"}, {Key: "last", Value: "Lovelace"}, {Key: "email", Value: "ada@example.com"}, {Key: "locale", Value: "en"}})
	if err != nil {
		t.Skipf("the server does not store a decimal: %v", err)
	}
	u, err := r.Get(ctx, "ada")
	require.NoError(t, err, "the decimal 3 is version 3")
	require.Equal(t, "Ada", u.First)
}
