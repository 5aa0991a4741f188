package subset_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/subset"
)

// TestAttack59ParentCreatedWithThePushFieldTrue: Costs: "[Repo.Add] 4
// on either path ... the first Add or recomputation of a parent without
// a revision adds its stamp, 1"; Config.PushedField: the field "holds an
// ObjectID or true, so a parent type leaves it unmapped, or maps it as
// any". A parent type that maps it as any and copies a parent read while
// a recomputation was announced (a duplicated product, a restored
// export) creates the new parent with the field true: no recomputation
// of that parent ever announced itself, yet its first Add's push matches
// nothing and Add recomputes (7 commands, not 5). Before f5735a1 the
// stamp moved the revision away from the copied announcement (an
// int64), and the push landed.
func TestAttack59ParentCreatedWithThePushFieldTrue(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		if p == portable {
			t.Skip("the push plan's announcements")
		}
		ctx := context.Background()
		db := mongotest.DB(t)
		r := newRepo[parent, item](t, db, config(3), p)
		_, err := db.Collection("parents").InsertOne(ctx, bson.D{{Key: "_id", Value: "b"}, {Key: "topPushed", Value: true}})
		require.NoError(t, err)
		c := mongotest.NewCounter(t, db)
		first := c.Count(func() { require.NoError(t, r.Add(ctx, "b", item{ID: 1, Score: 10})) })
		requireState(t, r, "b", []item{{ID: 1, Score: 10}}, 3)
		require.Equal(t, []string{"find", "findAndModify", "insert", "update", "aggregate"}, first,
			"the first Add of a new parent: its read, its stamp, and the push path's insert, push and count")
	})
}

// TestAttack59AddsAnnouncementLandsOnTheParentCreatedAgain: Add's
// godoc: "Its writes to the parent are bound to the incarnation it read
// ... a parent deleted and created again after the read is not the one
// Add found, and Add never writes into it what it stored for the deleted
// one"; Costs: the first Add of a parent without a revision costs 4 and
// its stamp. An Add of an item the subset holds recomputes (bound to the
// incarnation it read); another client's push sorts an item out of the
// full subset before its compare-and-set, so it reads again and
// announces; before the announcing findAndModify the parent is deleted
// and created again (without a revision). The announcement ({$set:
// {topPushed: true}}, filtered on _id alone) lands on the new parent;
// the Add then finds another incarnation and returns nil (its items went
// with the deleted parent). The new parent, which no recomputation of
// its own ever announced, holds pushes off: its first Add recomputes
// (7 commands, not 5). Before f5735a1 the announcement copied a missing
// revision (nothing) and the stamp moved it on.
func TestAttack59AddsAnnouncementLandsOnTheParentCreatedAgain(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		if p == portable {
			t.Skip("the push plan's announcements")
		}
		ctx := context.Background()
		db := mongotest.DB(t)
		r := newRepo[parent, item](t, db, config(3), p)
		insertParents(t, db, "a")
		require.NoError(t, r.Add(ctx, "a", five...))
		other := otherRepo(t, db, p)
		odb := mongotest.NewClient(t).Database(db.Name())
		y := item{ID: 6, Score: 45} // sorts 3 (30) out of {5, 4, 3}
		var mu sync.Mutex
		armed, fired := false, false
		var addErr, delErr error
		mongotest.OnCommand(t, db, "findAndModify", func(ctx context.Context) {
			mu.Lock()
			go_ := armed && !fired
			if go_ {
				fired = true
			}
			mu.Unlock()
			if go_ {
				delErr = other.Delete(ctx, "a")
				insertParents(t, odb, "a")
			}
		})
		beforeUpdates(t, db, map[int]func(context.Context){
			// 1 is Add's push, which matches nothing (the subset holds 5)
			2: func(ctx context.Context) {
				addErr = other.Add(ctx, "a", y)
				mu.Lock()
				armed = true
				mu.Unlock()
			},
		})
		err := r.Add(ctx, "a", item{ID: 5, Score: 50})
		require.NoError(t, addErr)
		require.NoError(t, delErr)
		require.True(t, fired, "the announcing findAndModify")
		require.NoError(t, err)
		raw, err := db.Collection("parents").FindOne(ctx, bson.D{{Key: "_id", Value: "a"}}).Raw()
		require.NoError(t, err)
		t.Logf("the new parent: %v", raw)
		c := mongotest.NewCounter(t, db)
		z := item{ID: 7, Score: 70}
		first := c.Count(func() { require.NoError(t, r.Add(ctx, "a", z)) })
		requireState(t, r, "a", []item{z}, 3)
		require.Equal(t, []string{"find", "findAndModify", "insert", "update", "aggregate"}, first,
			"the first Add of the new parent: its read, its stamp, and the push path's insert, push and count")
	})
}
