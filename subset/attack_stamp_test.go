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
// the absence did: Rebuild (change.go:177-187, "to fill it for parents
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

// TestAttackStampRebuildAllRoundTrips: change.go:212-221 (RebuildAll)
// "... and sends three commands per parent"; change.go:177-181 says a
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
		require.Len(t, got, 1+2*4, "RebuildAll: one page of ids, four commands per parent it stamps: %v", got)
	})
}

// TestAttackStampRemoveRoundTrips: change.go:18-20 (Remove) "It sends
// four commands: deleteOne, a read of the parent's revision, a find of
// the first Cap items and the compare-and-set of the subset"; on the push
// path a parent is only pushed into (no revision), so the first Remove
// of any parent also sends the stamp: five. (doc.go's Costs adds the
// stamp; Remove's and Update's godoc do not, where Add's and Rebuild's
// do.) Since every first Add stamps its parent, a parent reaches its
// first Remove unstamped when its items were loaded without the
// repository.
func TestAttackStampRemoveRoundTrips(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		r := newRepo[parent, item](t, db, config(3), p)
		insertParents(t, db, "p")
		_, err := db.Collection("items").InsertMany(ctx, []any{item{ID: 1, Parent: "p", Score: 1}, item{ID: 2, Parent: "p", Score: 2}})
		require.NoError(t, err)
		c := mongotest.NewCounter(t, db)
		got := c.Count(func() { require.NoError(t, r.Remove(ctx, "p", int64(1))) })
		require.Len(t, got, 5, "Remove sends five commands on a parent it stamps: %v", got)
	})
}

// TestAttackStampParentWithANullRevision: doc.go:88-91 "A parent that
// has none (as the application created it ...) is first stamped";
// doc.go:35-36 "The application creates its parents as it likes". A
// parent type with the revision as a pointer without omitempty
// (`Rev *int64 bson:"topRev"`) creates topRev: null, which the stamp's
// {$exists: false} does not match; every recomputation then fails
// ("holds a null, not a revision number") rather than stamping it.
func TestAttackStampParentWithANullRevision(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		r := newRepo[parent, item](t, db, config(3), p)
		_, err := db.Collection("parents").InsertOne(ctx, bson.D{{Key: "_id", Value: "p"}, {Key: "topRev", Value: nil}})
		require.NoError(t, err)
		_, err = db.Collection("items").InsertOne(ctx, item{ID: 1, Parent: "p", Score: 3})
		require.NoError(t, err)
		require.NoError(t, r.Rebuild(ctx, "p"), "Rebuild of a parent without a revision (null)")
		atRest(t, r, "p", 3)
	})
}

// rev32Parent maps the revision as a Go int32 (or an int on a 32-bit
// platform), which held every revision a recomputation wrote before the
// stamp (1, 2, 3 ...).
type rev32Parent struct {
	ID  string `bson:"_id"`
	Top []item `bson:"top,omitempty"`
	Rev int32  `bson:"topRev,omitempty"`
}

// TestAttackStampGetOfAnInt32Revision: Get's godoc (repo.go:153)
// "Get returns the parent with its subset"; the stamp (a340ef6) writes a
// revision of at least 2^32 into every parent a recomputation writes
// first, so a parent type that maps the revision as an int32 no longer
// decodes: Get fails on every parent after its first Rebuild, where it
// decoded revisions 1, 2, 3 ... before. (A reader in JavaScript, whose
// numbers are doubles, reads the stamp plus a count past 2^53 rounded.)
func TestAttackStampGetOfAnInt32Revision(t *testing.T) {
	t.Skip("documented (Config.RevisionField, doc.go Recomputation): a parent type maps the revision as an int64, an int32 cannot hold a stamp")
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		r := newRepo[rev32Parent, item](t, db, config(3), p)
		insertParents(t, db, "p")
		_, err := db.Collection("items").InsertOne(ctx, item{ID: 1, Parent: "p", Score: 3})
		require.NoError(t, err)
		require.NoError(t, r.Rebuild(ctx, "p"))
		got, err := r.Get(ctx, "p")
		require.NoError(t, err, "Get after one Rebuild")
		t.Logf("revision: %d", got.Rev)
	})
}
