package extref_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/extref"
	"github.com/mongopatterns/mongopatterns/internal/faults"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// cartsOf stores products 1..3 and carts whose items hold the given
// product ids, in order, and returns the repository of the carts' copies
// on plan p, the database, and the database as a second client sees it
// (to write from an OnCommand hook while the repository's client holds
// its connection).
func cartsOf(t *testing.T, p extref.Plan, carts ...[]int) (r *extref.Ref[ProductRef], db, other *mongo.Database) {
	t.Helper()
	db = mongotest.DB(t)
	r = cartRefs(t, db, p)
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
	return r, db, mongotest.NewClient(t).Database(db.Name())
}

// beforeFirstUpdate runs fn before the first update command sent to db
// (by the repository, in the window after its read), and returns whether
// it ran.
func beforeFirstUpdate(t *testing.T, db *mongo.Database, fn func(ctx context.Context)) *bool {
	t.Helper()
	fired := new(bool)
	mongotest.OnCommand(t, db, "update", func(ctx context.Context) {
		if !*fired {
			*fired = true
			fn(ctx)
		}
	})
	return fired
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
// its first write, another writer removes the first item of carts 1 and
// 2, so the copies of product 1 move to another index. Their guarded
// updates match nothing; the next round reads them again and writes them
// where they now are. No other element is touched, and the counts say
// each cart was written once.
func TestPortableRereadsMovedElements(t *testing.T) {
	r, db, other := cartsOf(t, portable(), []int{2, 1}, []int{3, 2, 1}, []int{1})
	rename(t, db.Collection("products"), 1, "New")
	beforeFirstUpdate(t, db, func(ctx context.Context) {
		_, err := other.Collection("carts").UpdateMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{1, 2}}}}},
			bson.D{{Key: "$pop", Value: bson.D{{Key: "items", Value: -1}}}})
		assert.NoError(t, err)
	})
	counter := mongotest.NewCounter(t, db)

	var counts []extref.Count
	sent := counter.Count(func() {
		var err error
		counts, err = r.Sync(ctx, 1)
		require.NoError(t, err)
	})
	require.Equal(t, 2, countOf(sent, "find")-2, "one round lost two carts, the next wrote them")
	require.Equal(t, extref.Count{Target: extref.Target{Collection: "carts", Path: "items[].product"}, Matched: 3, Modified: 3}, counts[0])
	require.Equal(t, map[int]string{1: "New"}, names(t, db, 1))
	require.Equal(t, map[int]string{2: "Old", 1: "New"}, names(t, db, 2))
	require.Equal(t, map[int]string{1: "New"}, names(t, db, 3))
}

// countOf counts name in commands.
func countOf(commands []string, name string) int {
	n := 0
	for _, c := range commands {
		if c == name {
			n++
		}
	}
	return n
}

// TestPortableGivesUpWithConflict: a writer that reorders a cart's items
// between every read and write makes the portable path give up after its
// rounds with ErrConflict. The cart was never half-written, and a later
// Sync, undisturbed, completes.
func TestPortableGivesUpWithConflict(t *testing.T) {
	r, db, other := cartsOf(t, portable(), []int{2, 1})
	rename(t, db.Collection("products"), 1, "New")
	carts := other.Collection("carts")
	disturb := true
	mongotest.OnCommand(t, db, "update", func(ctx context.Context) {
		if !disturb {
			return
		}
		var c bson.Raw
		if !assert.NoError(t, carts.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&c)) {
			return
		}
		items, err := c.Lookup("items").Array().Values()
		assert.NoError(t, err)
		rotated := bson.A{items[1], items[0]}
		_, err = carts.UpdateByID(ctx, 1, bson.D{{Key: "$set", Value: bson.D{{Key: "items", Value: rotated}}}})
		assert.NoError(t, err)
	})

	_, err := r.Sync(ctx, 1)
	require.ErrorIs(t, err, patterns.ErrConflict)
	require.Contains(t, err.Error(), "carts.items[].product")
	require.Equal(t, map[int]string{1: "Old", 2: "Old"}, names(t, db, 1))

	disturb = false
	counts, err := r.Sync(ctx, 1)
	require.NoError(t, err)
	require.EqualValues(t, 1, counts[0].Modified)
	require.Equal(t, map[int]string{1: "New", 2: "Old"}, names(t, db, 1))
}

// TestSyncGivesUpOnASourceThatKeepsChanging: when the source changes during
// every round of writing its copies, Sync stops after 8 rounds with
// ErrConflict instead of chasing it forever; a later Sync completes.
func TestSyncGivesUpOnASourceThatKeepsChanging(t *testing.T) {
	mongotest.RunPlans(t, extref.PlanFor, func(t *testing.T, p extref.Plan) {
		r, db, other := cartsOf(t, p, []int{1})
		rename(t, db.Collection("products"), 1, "New")
		changes := 0
		mongotest.OnCommand(t, db, "update", func(ctx context.Context) {
			if changes < 0 {
				return
			}
			changes++
			_, err := other.Collection("products").UpdateByID(ctx, 1, bson.D{{Key: "$set", Value: bson.D{{Key: "name", Value: fmt.Sprintf("Change %d", changes)}}}})
			assert.NoError(t, err)
		})

		_, err := r.Sync(ctx, 1)
		require.ErrorIs(t, err, patterns.ErrConflict)
		require.Contains(t, err.Error(), "changed during each of 8 rounds")
		require.Equal(t, 8, changes)

		changes = -1
		_, err = r.Sync(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, map[int]string{1: "Change 8"}, names(t, db, 1))
	})
}

// TestPortableBatches: on a server with batched updates but without
// arrayFilters (MongoDB 3.4), the portable path rewrites BatchSize carts
// per update command. Such a server cannot be started, so the plan is
// forced on a server that has batched updates.
func TestPortableBatches(t *testing.T) {
	mongotest.Require(t, patterns.FeatureBatchedUpdates)
	p := batchedPortable(t)

	db := mongotest.DB(t)
	r, err := extref.New[ProductRef](db, extref.Config{Source: "products", Targets: []extref.Target{{Collection: "carts", Path: "items[].product"}}, BatchSize: 2})
	require.NoError(t, err)
	extref.ForcePlan(r, p)
	_, err = db.Collection("products").InsertOne(ctx, Product{ID: 1, Name: "Old", Price: 1})
	require.NoError(t, err)
	ref, err := r.Of(ctx, 1)
	require.NoError(t, err)
	insertAll(t, db.Collection("carts"), []Cart{
		{ID: 1, Items: []Item{{Product: ref}}}, {ID: 2, Items: []Item{{Product: ref}}},
		{ID: 3, Items: []Item{{Product: ref}}}, {ID: 4, Items: []Item{{Product: ProductRef{ID: 2}}}}, {ID: 5, Items: []Item{{Product: ref}}},
	})
	rename(t, db.Collection("products"), 1, "New")
	counter := mongotest.NewCounter(t, db)

	var counts []extref.Count
	sent := counter.Count(func() {
		counts, err = r.Sync(ctx, 1)
		require.NoError(t, err)
	})
	require.Equal(t, 2, countOf(sent, "update"), "4 carts in 2 update commands: %v", sent)
	require.Equal(t, []string{"find", "find", "update"}, sent[:3], "the first 2 carts are written before the next are read")
	require.EqualValues(t, 4, counts[0].Modified)
}

// batchedPortable is the plan of MongoDB 3.4: batched updates, no
// arrayFilters, so that array targets take the portable path and send
// BatchSize updates per command.
func batchedPortable(t *testing.T) extref.Plan {
	t.Helper()
	hello, err := bson.Marshal(bson.D{{Key: "logicalSessionTimeoutMinutes", Value: int32(30)}})
	require.NoError(t, err)
	buildInfo, err := bson.Marshal(bson.D{{Key: "version", Value: "3.4.24"}, {Key: "gitVersion", Value: "865b4f6a96d0f5425e39a18337105f33e8db504d"}, {Key: "storageEngines", Value: bson.A{"wiredTiger"}}})
	require.NoError(t, err)
	mongo34, err := patterns.NewServer(hello, buildInfo)
	require.NoError(t, err)
	p := extref.PlanFor(mongo34)
	require.NotEqual(t, portable(), p)
	return p
}

// TestPortableSyncAfterAPartialDeadlock: FerretDB 2.x fails one statement
// of an unordered bulk write with a deadlock and applies the others
// (forged: faults.TransientProxy.ArmPartial). Sync's portable path, three
// stale carts in one bulk write, sends again the failed update alone:
// sent again whole, the two updates that had applied matched nothing
// (their guards hold the copies as read, stale), so Sync counted one cart
// rewritten of three, took the two for guards another writer moved and
// read the carts once more, and its operation reported two conflicts that
// were not. MongoDB 3.4's plan is forced on every server: the proxy
// forges the failure, and the server runs an update of two statements,
// then one (FerretDB 1.x's batched updates go wrong only on a failing
// statement or past about a hundred).
func TestPortableSyncAfterAPartialDeadlock(t *testing.T) {
	db := mongotest.DB(t)
	_, err := db.Collection("products").InsertOne(ctx, Product{ID: 1, Name: "Old", Price: 1})
	require.NoError(t, err)
	px := faults.NewTransient(t)
	rec := mongotest.NewRecorder(t)
	r, err := extref.New[ProductRef](px.Client().Database(db.Name()), extref.Config{Source: "products", Hook: rec, BatchSize: 3, Targets: []extref.Target{cartsTarget}})
	require.NoError(t, err)
	extref.ForcePlan(r, batchedPortable(t))
	ref, err := r.Of(ctx, 1)
	require.NoError(t, err)
	insertAll(t, db.Collection("carts"), []Cart{
		{ID: 1, Items: []Item{{Product: ref, Qty: 1}}},
		{ID: 2, Items: []Item{{Product: ProductRef{ID: 2}, Qty: 1}, {Product: ref, Qty: 2}}},
		{ID: 3, Items: []Item{{Product: ref, Qty: 3}}},
	})
	rename(t, db.Collection("products"), 1, "New")
	counter := mongotest.NewCounter(t, db)

	px.ArmPartial()
	var counts []extref.Count
	op := rec.RequireReports(t, "extref", "Sync", false, func() (err error) {
		counts, err = r.Sync(ctx, 1)
		return err
	})
	_, forged := px.Counts()
	px.Arm(0)
	require.Equal(t, 1, forged, "the bulk write's last update failed with a deadlock")
	require.NoError(t, op.Err)
	var updates []int
	for _, cmd := range counter.Sent() {
		if arr, ok := cmd.Lookup("updates").ArrayOK(); ok {
			vals, err := arr.Values()
			require.NoError(t, err)
			updates = append(updates, len(vals))
		}
	}
	assert.Equal(t, []extref.Count{{Target: cartsTarget, Matched: 3, Modified: 3}}, counts, "every cart rewritten, counted once")
	assert.Zero(t, op.Conflicts(), "no guard lost")
	assert.Equal(t, []int{3, 1}, updates, "the failed update sent again alone")
	assert.Equal(t, 3, countOf(counter.Commands(), "find"), "the source, the carts once, the source again: %v", counter.Commands())
	require.False(t, t.Failed())
	require.Equal(t, 1, op.Retries())
	events := rec.Events(op)
	require.Len(t, events, 1)
	require.Equal(t, patterns.EventRetry, events[0].Kind)
	n, _ := op.Documents()
	require.EqualValues(t, 3, n)
	fresh := ProductRef{ID: 1, Name: "New", Price: 1}
	for id := 1; id <= 3; id++ {
		var c Cart
		require.NoError(t, db.Collection("carts").FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&c))
		for _, it := range c.Items {
			if it.Product.ID == 1 {
				require.Equal(t, fresh, it.Product, "cart %d", id)
			}
		}
	}
	require.Equal(t, []int64{0}, verifyStale(t, r))
}

// TestSyncRewritesACopyThatSwappedPlaces: a cart holds two copies of
// product 1, the first stale and the second fresh; between Sync's read and
// its write, another writer swaps them. On the portable path, a guard on
// the stale element's index and copy id alone matched the fresh copy now
// at that index, modified nothing, and Sync returned nil with the stale
// copy left (issue 34). The guard holds the copy's whole value as read, so
// the moved element is read and written again; on the native path the
// array filter finds it wherever it is.
func TestSyncRewritesACopyThatSwappedPlaces(t *testing.T) {
	mongotest.RunPlans(t, extref.PlanFor, func(t *testing.T, p extref.Plan) {
		r, db, other := cartsOf(t, p)
		stale := ProductRef{ID: 1, Name: "Old", Price: 1}
		fresh := ProductRef{ID: 1, Name: "New", Price: 1}
		_, err := db.Collection("carts").InsertOne(ctx, Cart{ID: 1, Items: []Item{{Product: stale, Qty: 1}, {Product: fresh, Qty: 2}}})
		require.NoError(t, err)
		rename(t, db.Collection("products"), 1, "New")
		fired := beforeFirstUpdate(t, db, func(ctx context.Context) {
			swapped := bson.A{Item{Product: fresh, Qty: 2}, Item{Product: stale, Qty: 1}}
			_, err := other.Collection("carts").UpdateByID(ctx, 1, bson.D{{Key: "$set", Value: bson.D{{Key: "items", Value: swapped}}}})
			assert.NoError(t, err)
		})

		counts, err := r.Sync(ctx, 1)
		require.NoError(t, err)
		require.True(t, *fired)
		var c Cart
		require.NoError(t, db.Collection("carts").FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&c))
		require.Equal(t, []Item{{Product: fresh, Qty: 2}, {Product: fresh, Qty: 1}}, c.Items, "no stale copy left")
		require.EqualValues(t, 1, counts[0].Modified)
		require.Equal(t, []int64{0}, verifyStale(t, r))
	})
}
