package subset_test

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/subset"
)

// TestAttackRevTypesRebuildOfANumericRevision: doc.go:88-93 "A parent
// that has none (as the application created it ...), or holds null or a
// number below 2^32 there ..., is first stamped with a random multiple
// of 2^32"; doc.go:35-36 the application creates its parents as it likes.
//
// Reference: BSON has four numeric types (bsonspec.org: double, int32,
// int64, decimal128); a JS client (mongosh) writes every number as a
// double. The driver's bsoncore.Value.AsInt64OK (x/bsonx/bsoncore/
// value.go:159-186, v2.10.0) returns !ok for a decimal128 and truncates a
// double (int64(NaN), int64(+Inf) are undefined in Go); MongoDB's matcher
// (src/mongo/db/matcher/expression_leaf.cpp, ComparisonMatchExpression
// compare) never matches NaN with $lt, and +Inf is not $lt 2^32.
//
// Rows: decimal128 0 is "a number below 2^32" (decodeParent refuses it
// before the stamp); NaN and +Inf read as unstamped (int64 conversion)
// while the stamp's filter cannot match them; 4294967296.5 reads as the
// stamped revision 2^32 whose compare-and-set {rev: int64(2^32)} never
// matches it. Every recomputation of such a parent fails.
func TestAttackRevTypesRebuildOfANumericRevision(t *testing.T) {
	dec0, err := bson.ParseDecimal128("0")
	require.NoError(t, err)
	rows := []struct {
		name string
		rev  any
	}{
		{"decimal128 0", dec0},
		{"double NaN", math.NaN()},
		{"double +Inf", math.Inf(1)},
		{"double 2^32+0.5 (JS client)", 4294967296.5},
		{"double 0.5", 0.5},
		{"int64 2^32-1", int64(1<<32 - 1)},
		{"int64 -1", int64(-1)},
	}
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		for _, row := range rows {
			t.Run(row.name, func(t *testing.T) {
				ctx := context.Background()
				db := mongotest.DB(t)
				r := newRepo[parent, item](t, db, config(3), p)
				if _, err := db.Collection("parents").InsertOne(ctx, bson.D{{Key: "_id", Value: "p"}, {Key: "topRev", Value: row.rev}}); err != nil {
					t.Skipf("the server refuses the parent: %v", err)
				}
				_, err = db.Collection("items").InsertOne(ctx, item{ID: 1, Parent: "p", Score: 3})
				require.NoError(t, err)
				require.NoError(t, r.Rebuild(ctx, "p"), "Rebuild of a parent whose revision is %s", row.name)
				atRest(t, r, "p", 3)
			})
		}
	})
}

// TestAttackRevTypesAddOfAJSRevision: add.go:26-29 "Add stores items
// under the parent: first in the items collection, then in the parent's
// subset"; add.go:114-115 "A parent deleted and created again under each
// of 10 such runs gives [patterns.ErrConflict]: Add again"; doc.go:31-33
// (at rest the subset is the first N items). A parent whose revision a
// JS client wrote as the double 4294967296.5 (mongosh writes every
// number as a double): Add stores the item, then every compare-and-set
// {rev: int64(2^32)} misses (decodeParent truncates the double,
// bsoncore AsInt64OK), so Add returns ErrConflict with the item left in
// the items collection and out of the subset; Add again cannot fix it.
func TestAttackRevTypesAddOfAJSRevision(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		r := newRepo[parent, item](t, db, config(3), p)
		_, err := db.Collection("parents").InsertOne(ctx, bson.D{{Key: "_id", Value: "p"}, {Key: "topRev", Value: 4294967296.5}})
		require.NoError(t, err)
		err = r.Add(ctx, "p", item{ID: 1, Parent: "p", Score: 3})
		t.Logf("Add: %v", err)
		n, cerr := db.Collection("items").CountDocuments(ctx, bson.D{})
		require.NoError(t, cerr)
		raw, rerr := db.Collection("parents").FindOne(ctx, bson.D{{Key: "_id", Value: "p"}}).Raw()
		require.NoError(t, rerr)
		t.Logf("items stored: %d; parent: %s", n, raw)
		require.NoError(t, err, "Add")
	})
}
