package extref_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/extref"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// portableCarts stores products 1..3 and carts whose items hold the given
// product ids, in order, and returns the repository forced onto the
// portable path.
func portableCarts(t *testing.T, carts ...[]int) (*extref.Ref[ProductRef], *mongo.Database) {
	t.Helper()
	db := mongotest.DB(t)
	r := productRefs(t, db, true)
	var refs []ProductRef
	for id := 1; id <= 3; id++ {
		_, err := db.Collection("products").InsertOne(ctx, Product{ID: id, Name: "Old", Price: 1})
		require.NoError(t, err)
		ref, err := r.Of(ctx, id)
		require.NoError(t, err)
		refs = append(refs, ref)
	}
	for i, ids := range carts {
		c := Cart{ID: i + 1}
		for _, id := range ids {
			c.Items = append(c.Items, Item{Product: refs[id-1], Qty: id})
		}
		_, err := db.Collection("carts").InsertOne(ctx, c)
		require.NoError(t, err)
	}
	return r, db
}

func names(t *testing.T, db *mongo.Database, cart int) map[int]string {
	t.Helper()
	var c Cart
	require.NoError(t, db.Collection("carts").FindOne(ctx, bson.D{{Key: "_id", Value: cart}}).Decode(&c))
	out := map[int]string{}
	for _, it := range c.Items {
		out[it.Product.ID] = it.Product.Name
	}
	return out
}

// TestPortableRereadsMovedElements: between the portable path's read and
// its write, another writer removes the first item of carts 1 and 2, so
// the copies of product 1 move to another index. Their guarded updates
// match nothing; the next round reads them again and writes them where
// they now are. No other element is touched, and the counts say each cart
// was written once.
func TestPortableRereadsMovedElements(t *testing.T) {
	r, db := portableCarts(t, []int{2, 1}, []int{3, 2, 1}, []int{1})
	rename(t, db.Collection("products"), 1, "New")
	rounds := 0
	extref.SetAfterScan(r, func(context.Context) {
		rounds++
		if rounds == 1 {
			_, err := db.Collection("carts").UpdateMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{1, 2}}}}},
				bson.D{{Key: "$pop", Value: bson.D{{Key: "items", Value: -1}}}})
			require.NoError(t, err)
		}
	})

	counts, err := r.Sync(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, 2, rounds, "one round lost two carts, the next wrote them")
	require.Equal(t, extref.Count{Target: extref.Target{Collection: "carts", Path: "items[].product"}, Matched: 3, Modified: 3}, counts[0])
	require.Equal(t, map[int]string{1: "New"}, names(t, db, 1))
	require.Equal(t, map[int]string{2: "Old", 1: "New"}, names(t, db, 2))
	require.Equal(t, map[int]string{1: "New"}, names(t, db, 3))
}

// TestPortableGivesUpWithConflict: a writer that reorders a cart's items
// between every read and write makes the portable path give up after its
// rounds with ErrConflict. The cart was never half-written, and a later
// Sync, undisturbed, completes.
func TestPortableGivesUpWithConflict(t *testing.T) {
	r, db := portableCarts(t, []int{2, 1})
	rename(t, db.Collection("products"), 1, "New")
	carts := db.Collection("carts")
	extref.SetAfterScan(r, func(context.Context) {
		var c bson.Raw
		require.NoError(t, carts.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&c))
		items, err := c.Lookup("items").Array().Values()
		require.NoError(t, err)
		rotated := bson.A{items[1], items[0]}
		_, err = carts.UpdateByID(ctx, 1, bson.D{{Key: "$set", Value: bson.D{{Key: "items", Value: rotated}}}})
		require.NoError(t, err)
	})

	_, err := r.Sync(ctx, 1)
	require.ErrorIs(t, err, patterns.ErrConflict)
	require.Contains(t, err.Error(), "carts.items[].product")
	require.Equal(t, map[int]string{1: "Old", 2: "Old"}, names(t, db, 1))

	extref.SetAfterScan(r, nil)
	counts, err := r.Sync(ctx, 1)
	require.NoError(t, err)
	require.EqualValues(t, 1, counts[0].Modified)
	require.Equal(t, map[int]string{1: "New", 2: "Old"}, names(t, db, 1))
}

// TestSyncGivesUpOnASourceThatKeepsChanging: when the source changes during
// every round of writing its copies, Sync stops after 8 rounds with
// ErrConflict instead of chasing it forever; a later Sync completes.
func TestSyncGivesUpOnASourceThatKeepsChanging(t *testing.T) {
	r, db := portableCarts(t, []int{1})
	rename(t, db.Collection("products"), 1, "New")
	changes := 0
	extref.SetAfterScan(r, func(context.Context) {
		changes++
		rename(t, db.Collection("products"), 1, fmt.Sprintf("Change %d", changes))
	})

	_, err := r.Sync(ctx, 1)
	require.ErrorIs(t, err, patterns.ErrConflict)
	require.Contains(t, err.Error(), "changed during each of 8 rounds")
	require.Equal(t, 8, changes)

	extref.SetAfterScan(r, nil)
	_, err = r.Sync(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, map[int]string{1: "Change 8"}, names(t, db, 1))
}
