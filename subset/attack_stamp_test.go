package subset_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/subset"
)

// Attacks on commit a340ef6's stamp (recompute.go, stamp): a
// recomputation stamps only a parent whose revision field is absent.

// TestAttackStampSkipsAParentCreatedWithARevision: doc.go:35-36 "The
// application creates its parents as it likes (with the subset field
// absent or an empty array)", and doc.go:88-95 "A parent that has none
// (as the application created it, or one only pushed into) is first
// stamped with a random multiple of 2^32 ... So the revision names the
// parent's incarnation, and a compare-and-set never matches a parent
// deleted and created again since it was read (a filter on the
// revision's absence would, and write into the new parent the items of
// the deleted one)".
//
// An application whose parent type maps the revision field without
// omitempty (the natural `Rev int64 bson:"topRev"`, or a Go int, which
// the driver encodes as an int32) creates every parent with topRev: 0.
// The stamp's filter ({topRev: {$exists: false}}) does not match it, so
// no parent is ever stamped, and the compare-and-set {_id, topRev: 0}
// matches a parent deleted and created again meanwhile, as the filter on
// the absence did: Rebuild (change.go:168-178, "to fill it for parents
// whose items were loaded without the repository") writes the deleted
// parent's item into the new one, which holds no item. doc.go:31-33 (at
// rest the subset is exactly the first N items of All) fails: the
// subset holds x, All yields nothing. The same holds for Add, Remove and
// Update (every recomputation).
func TestAttackStampSkipsAParentCreatedWithARevision(t *testing.T) {
	rows := []struct {
		name string
		rev  any
	}{
		{"int64 0 (Rev int64 without omitempty)", int64(0)},
		{"int32 0 (Rev int without omitempty)", int32(0)},
	}
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		for _, row := range rows {
			t.Run(row.name, func(t *testing.T) {
				ctx := context.Background()
				db := mongotest.DB(t)
				r := newRepo[parent, item](t, db, config(3), p)
				odb := mongotest.NewClient(t).Database(db.Name())
				other, err := subset.New[parent, item](odb, config(3))
				require.NoError(t, err)
				subset.ForcePlan(other, p)
				newParent := bson.D{{Key: "_id", Value: "p"}, {Key: "topRev", Value: row.rev}}
				_, err = db.Collection("parents").InsertOne(ctx, newParent)
				require.NoError(t, err)
				_, err = db.Collection("items").InsertOne(ctx, item{ID: 1, Parent: "p", Score: 3})
				require.NoError(t, err)
				// Before the Rebuild's compare-and-set: the parent is
				// deleted (with its items) and the application creates it
				// again, as it creates every parent.
				ran := onNth(t, db, "update", 1, func(ctx context.Context) {
					require.NoError(t, other.Delete(ctx, "p"), "Delete")
					_, err := odb.Collection("parents").InsertOne(ctx, newParent)
					require.NoError(t, err)
				})
				err = r.Rebuild(ctx, "p")
				require.True(t, ran(), "the Delete and the creation ran before the compare-and-set")
				t.Logf("Rebuild: %v", err)
				atRest(t, r, "p", 3)
			})
		}
	})
}

// TestAttackStampRebuildAllRoundTrips: change.go:209-218 (RebuildAll)
// "... and sends three commands per parent"; change.go:168-172 says a
// Rebuild of a parent without a revision sends four (the stamp). Parents
// "whose items were loaded without the repository", RebuildAll's use,
// have no revision: a RebuildAll of two of them sends the page of ids
// and 2 x 4 commands, not 2 x 3.
func TestAttackStampRebuildAllRoundTrips(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		r := newRepo[parent, item](t, db, config(3), p)
		insertParents(t, db, "a", "b")
		_, err := db.Collection("items").InsertMany(ctx, []any{item{ID: 1, Parent: "a", Score: 1}, item{ID: 2, Parent: "b", Score: 1}})
		require.NoError(t, err)
		c := mongotest.NewCounter(t, db)
		got := c.Count(func() {
			n, err := r.RebuildAll(ctx, nil)
			require.NoError(t, err)
			require.Equal(t, 2, n)
		})
		require.Len(t, got, 1+2*3, "RebuildAll: one page of ids, three commands per parent: %v", got)
	})
}
