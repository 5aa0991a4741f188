package extref_test

import (
	"context"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/extref"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// TestSyncRenamesExactlyOneCustomer: 2,000 orders (400 on a slow server)
// referencing 50 customers. Renaming one customer rewrites exactly that
// customer's stale copies (a quarter were already up to date), and nothing
// else.
func TestSyncRenamesExactlyOneCustomer(t *testing.T) {
	db := mongotest.DB(t)
	r := customerRefs(t, db)
	nOrders := mongotest.Scale(2000, 400)
	seedOrders(t, db, r, 50, nOrders)
	orders := db.Collection("orders")

	const who = 7
	holding := int64(nOrders / 50)
	rename(t, db.Collection("customers"), who, "Renamed")
	// The customer's orders in the first quarter already carry the new name.
	res, err := orders.UpdateMany(ctx, bson.D{{Key: "customer.id", Value: who}, {Key: "_id", Value: bson.D{{Key: "$lte", Value: nOrders / 4}}}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "customer.name", Value: "Renamed"}}}})
	require.NoError(t, err)
	require.EqualValues(t, holding/4, res.ModifiedCount)
	before := snapshot(t, orders)

	counts, err := r.Sync(ctx, who)
	require.NoError(t, err)
	stale := holding - res.ModifiedCount
	require.Equal(t, []extref.Count{{Target: extref.Target{Collection: "orders", Path: "customer"}, Matched: stale, Modified: stale}}, counts)

	after := snapshot(t, orders)
	require.Len(t, after, nOrders)
	for id, doc := range after {
		var o Order
		require.NoError(t, bson.Unmarshal(doc, &o))
		if o.Customer.ID != who {
			require.Equal(t, before[id], doc, "order %d of another customer is untouched", id)
			continue
		}
		var was Order
		require.NoError(t, bson.Unmarshal(before[id], &was))
		was.Customer.Name = "Renamed"
		require.Equal(t, was, o, "order %d: only the copied name changed", id)
	}

	counts, err = r.Sync(ctx, who)
	require.NoError(t, err)
	require.Zero(t, counts[0].Modified, "a second Sync finds nothing stale")
}

// TestSyncRenamesExactlyOneProduct: 500 carts (150 on a slow server) of 1
// to 5 items referencing 100 products. Renaming one product rewrites
// exactly the stale copies in the carts that hold it, and the element of
// that product only.
func TestSyncRenamesExactlyOneProduct(t *testing.T) {
	mongotest.RunPlans(t, extref.PlanFor, func(t *testing.T, p extref.Plan) {
		db := mongotest.DB(t)
		r := productRefs(t, db, p)
		nCarts := mongotest.Scale(500, 150)
		seedCarts(t, db, r, 100, nCarts)
		carts := db.Collection("carts")

		const which = 42
		holding, err := carts.CountDocuments(ctx, bson.D{{Key: "items.product.id", Value: which}})
		require.NoError(t, err)
		require.Greater(t, holding, int64(2))
		rename(t, db.Collection("products"), which, "Renamed")
		// One cart already carries the new name.
		var fresh Cart
		require.NoError(t, carts.FindOne(ctx, bson.D{{Key: "items.product.id", Value: which}}).Decode(&fresh))
		at := slices.IndexFunc(fresh.Items, func(it Item) bool { return it.Product.ID == which })
		_, err = carts.UpdateByID(ctx, fresh.ID, bson.D{{Key: "$set", Value: bson.D{{Key: "items." + strconv.Itoa(at) + ".product.name", Value: "Renamed"}}}})
		require.NoError(t, err)
		before := snapshot(t, carts)

		counts, err := r.Sync(ctx, which)
		require.NoError(t, err)
		require.Equal(t, extref.Count{Target: extref.Target{Collection: "carts", Path: "items[].product"}, Matched: holding - 1, Modified: holding - 1}, counts[0])
		require.Equal(t, extref.Count{Target: extref.Target{Collection: "featured", Path: "product"}, Matched: 1, Modified: 1}, counts[1])

		after := snapshot(t, carts)
		require.Len(t, after, nCarts)
		for id, doc := range after {
			var c, was Cart
			require.NoError(t, bson.Unmarshal(doc, &c))
			require.NoError(t, bson.Unmarshal(before[id], &was))
			if !slices.ContainsFunc(c.Items, func(it Item) bool { return it.Product.ID == which }) {
				require.Equal(t, before[id], doc, "cart %d without the product is untouched", id)
				continue
			}
			for i := range was.Items {
				if was.Items[i].Product.ID == which {
					was.Items[i].Product.Name = "Renamed"
				}
			}
			require.Equal(t, was, c, "cart %d: only the product's copied name changed", id)
		}

		counts, err = r.Sync(ctx, which)
		require.NoError(t, err)
		require.Zero(t, counts[0].Modified+counts[1].Modified, "a second Sync finds nothing stale")
	})
}

// TestSyncCommands counts the round trips of one Sync: a find of the
// source, then per target one updateMany (or, for the array target on the
// portable path, a find of the carts holding the product and one update
// command per BatchSize carts, or per cart on a server without batched
// updates), then the find that confirms the source did not change
// meanwhile, which a Sync that rewrote nothing does not need.
func TestSyncCommands(t *testing.T) {
	mongotest.RunPlans(t, extref.PlanFor, func(t *testing.T, p extref.Plan) {
		db, r := withCarts(t, 10, 30, p)
		holding, err := db.Collection("carts").CountDocuments(ctx, bson.D{{Key: "items.product.id", Value: 3}})
		require.NoError(t, err)
		require.Greater(t, holding, int64(1))
		rename(t, db.Collection("products"), 3, "Renamed")
		counter := mongotest.NewCounter(t, db)

		sent := counter.Count(func() {
			_, err := r.Sync(ctx, 3)
			require.NoError(t, err)
		})
		want := []string{"find", "update", "update", "find"}
		switch {
		case has(p, patterns.FeatureArrayFilters):
		case has(p, patterns.FeatureBatchedUpdates):
			want = []string{"find", "find", "update", "update", "find"}
		default:
			want = []string{"find", "find"}
			for range holding {
				want = append(want, "update")
			}
			want = append(want, "update", "find")
		}
		require.Equal(t, want, sent)

		sent = counter.Count(func() {
			_, err := r.Sync(ctx, 3)
			require.NoError(t, err)
		})
		want = []string{"find", "update", "update"}
		if !has(p, patterns.FeatureArrayFilters) {
			want = []string{"find", "find", "update"}
		}
		require.Equal(t, want, sent, "nothing stale: 1 + targets")
	})
}

// TestSyncMissingSource: Sync of a source that does not exist fails with
// ErrNotFound and leaves the copies as they are.
func TestSyncMissingSource(t *testing.T) {
	db, r := withOrders(t, 3, 9)
	_, err := db.Collection("customers").DeleteOne(ctx, bson.D{{Key: "_id", Value: 2}})
	require.NoError(t, err)
	before := snapshot(t, db.Collection("orders"))

	counts, err := r.Sync(ctx, 2)
	require.ErrorIs(t, err, patterns.ErrNotFound)
	require.EqualError(t, err, "extref: Sync: source 2: not in customers: not found")
	require.Nil(t, counts)
	require.Equal(t, before, snapshot(t, db.Collection("orders")))
}

func TestSyncRejectsBadIDs(t *testing.T) {
	r := customerRefs(t, mongotest.DB(t))
	for _, id := range []any{nil, 0, "", bson.D{{Key: "$ne", Value: nil}}, bson.M{"$gt": 0}, []int{1}} {
		_, err := r.Sync(ctx, id)
		require.ErrorIs(t, err, patterns.ErrInvalid, "%#v", id)
		_, err = r.Of(ctx, id)
		require.ErrorIs(t, err, patterns.ErrInvalid, "%#v", id)
		_, err = r.Update(ctx, id, bson.D{{Key: "$set", Value: bson.D{{Key: "name", Value: "x"}}}})
		require.ErrorIs(t, err, patterns.ErrInvalid, "%#v", id)
	}
}

func TestOf(t *testing.T) {
	db := mongotest.DB(t)
	r := customerRefs(t, db)
	_, err := db.Collection("customers").InsertOne(ctx, Customer{ID: 1, Name: "Ann", Email: "ann@example.com", Notes: "not copied"})
	require.NoError(t, err)
	counter := mongotest.NewCounter(t, db)
	var got CustomerRef
	sent := counter.Count(func() {
		got, err = r.Of(ctx, 1)
		require.NoError(t, err)
	})
	require.Equal(t, CustomerRef{ID: 1, Name: "Ann", Email: "ann@example.com"}, got)
	require.Equal(t, []string{"find"}, sent)

	_, err = r.Of(ctx, 2)
	require.ErrorIs(t, err, patterns.ErrNotFound)
}

// TestOfRejectsAnIDTypeThatLosesTheSource: a copy type whose id field
// cannot hold the source's _id exactly would make copies that no query by
// the source's id finds: Of refuses with ErrInvalid. (Types the driver
// cannot decode at all, such as an ObjectID into a string, fail in the
// driver.) Numbers of another width are fine: they compare equal.
func TestOfRejectsAnIDTypeThatLosesTheSource(t *testing.T) {
	db := mongotest.DB(t)
	type lossy struct {
		ID   float64 `bson:"id"`
		Name string  `bson:"name"`
	}
	type wide struct {
		ID   int64  `bson:"id"`
		Name string `bson:"name"`
	}
	cfg := extref.Config{Source: "customers", Targets: []extref.Target{{Collection: "orders", Path: "customer"}}}
	_, err := db.Collection("customers").InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: int64(1<<53 + 1)}, {Key: "name", Value: "Ann"}},
		bson.D{{Key: "_id", Value: int32(5)}, {Key: "name", Value: "Bo"}},
	})
	require.NoError(t, err)

	l, err := extref.New[lossy](db, cfg)
	require.NoError(t, err)
	_, err = l.Of(ctx, int64(1<<53+1))
	require.ErrorIs(t, err, patterns.ErrInvalid)
	require.Contains(t, err.Error(), `give field "id" the _id's type`)

	w, err := extref.New[wide](db, cfg)
	require.NoError(t, err)
	got, err := w.Of(ctx, 5)
	require.NoError(t, err)
	require.Equal(t, wide{ID: 5, Name: "Bo"}, got)
}

// TestSyncManyStaleCopiesInArrays: 150 carts hold a copy of one product in
// their items, and the product is renamed. Sync rewrites all 150 within a
// deadline: on a server without batched updates (FerretDB 1.x stalls on an
// update command of about a hundred statements or more) the portable path
// sends one statement per command.
func TestSyncManyStaleCopiesInArrays(t *testing.T) {
	mongotest.RunPlans(t, extref.PlanFor, func(t *testing.T, p extref.Plan) {
		db := mongotest.DB(t)
		r := cartRefs(t, db, p)
		_, err := db.Collection("products").InsertOne(ctx, Product{ID: 1, Name: "Old", Price: 1})
		require.NoError(t, err)
		ref, err := r.Of(ctx, 1)
		require.NoError(t, err)
		const n = 150
		carts := make([]Cart, n)
		for i := range carts {
			carts[i] = Cart{ID: i + 1, Items: []Item{{Product: ProductRef{ID: 99, Name: "Other"}, Qty: 1}, {Product: ref, Qty: 2}}}
		}
		insertAll(t, db.Collection("carts"), carts)
		rename(t, db.Collection("products"), 1, "New")

		dctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		counts, err := r.Sync(dctx, 1)
		require.NoError(t, err)
		require.Equal(t, extref.Count{Target: extref.Target{Collection: "carts", Path: "items[].product"}, Matched: n, Modified: n}, counts[0])
		renamed, err := db.Collection("carts").CountDocuments(ctx, bson.D{{Key: "items.product.name", Value: "New"}})
		require.NoError(t, err)
		require.EqualValues(t, n, renamed)
	})
}

// TestOfRejectsAnIDFieldThatCannotHoldTheSourceID: a copy type whose id
// field cannot decode the source's _id at all (an int for an ObjectID) is
// ErrInvalid, as one that would change it is, and says what to change.
func TestOfRejectsAnIDFieldThatCannotHoldTheSourceID(t *testing.T) {
	db := mongotest.DB(t)
	r, err := extref.New[CustomerRef](db, extref.Config{Source: "customers", Targets: []extref.Target{{Collection: "orders", Path: "customer"}}})
	require.NoError(t, err)
	id := bson.NewObjectID()
	_, err = db.Collection("customers").InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "name", Value: "Ann"}})
	require.NoError(t, err)

	_, err = r.Of(ctx, id)
	require.ErrorIs(t, err, patterns.ErrInvalid)
	require.Contains(t, err.Error(), `give field "id" the _id's type`)
	_, err = r.Sync(ctx, id)
	require.ErrorIs(t, err, patterns.ErrInvalid)
}

// TestSyncSeveralCopiesInOneArray: a cart holds three copies of one
// product, one of them already fresh, and one of another product. Sync
// rewrites the stale copies, leaves the other product's, and counts the
// cart once; a cart whose copies are all fresh is not counted.
func TestSyncSeveralCopiesInOneArray(t *testing.T) {
	mongotest.RunPlans(t, extref.PlanFor, func(t *testing.T, p extref.Plan) {
		r, db, _ := cartsOf(t, p, []int{1, 2, 1, 1}, []int{1})
		rename(t, db.Collection("products"), 1, "New")
		_, err := db.Collection("carts").UpdateByID(ctx, 1, bson.D{{Key: "$set", Value: bson.D{{Key: "items.2.product.name", Value: "New"}}}})
		require.NoError(t, err)
		_, err = db.Collection("carts").UpdateByID(ctx, 2, bson.D{{Key: "$set", Value: bson.D{{Key: "items.0.product.name", Value: "New"}}}})
		require.NoError(t, err)

		counts, err := r.Sync(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, extref.Count{Target: extref.Target{Collection: "carts", Path: "items[].product"}, Matched: 1, Modified: 1}, counts[0])
		var c Cart
		require.NoError(t, db.Collection("carts").FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&c))
		got := make([]string, len(c.Items))
		for i, it := range c.Items {
			got[i] = it.Product.Name
		}
		require.Equal(t, []string{"New", "Old", "New", "New"}, got)
	})
}

// TaggedRef copies a field that holds a scalar or an array.
type TaggedRef struct {
	ID  int `bson:"id"`
	Tag any `bson:"tag"`
}

// TestCopiesFollowAnArrayThatBecomesItsOwnElement: a source's tag goes
// from ["a", "b"] to "a", one of its own elements, then to ["a"], then
// back to "a". MongoDB's equality matches an array that holds the value, so a
// filter {tag: {$ne: "a"}} never selects the copy ["a", "b"]: Verify must
// still count each such copy stale, Repair, Sync and Update rewrite it,
// in a single embedded copy and in copies inside arrays, on every plan.
func TestCopiesFollowAnArrayThatBecomesItsOwnElement(t *testing.T) {
	mongotest.RunPlans(t, extref.PlanFor, func(t *testing.T, p extref.Plan) {
		db := mongotest.DB(t)
		r := refs[TaggedRef](t, db, "tags", []extref.Target{{Collection: "notes", Path: "ref"}, {Collection: "boards", Path: "cards[].ref"}}, []extref.Plan{p})
		sources := db.Collection("tags")
		_, err := sources.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "tag", Value: bson.A{"a", "b"}}})
		require.NoError(t, err)
		ref, err := r.Of(ctx, 1)
		require.NoError(t, err)
		_, err = db.Collection("notes").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "ref", Value: ref}})
		require.NoError(t, err)
		_, err = db.Collection("boards").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "cards", Value: bson.A{
			bson.D{{Key: "ref", Value: ref}}, bson.D{{Key: "ref", Value: TaggedRef{ID: 2, Tag: "a"}}},
		}}})
		require.NoError(t, err)
		retag := func(tag any) {
			t.Helper()
			_, err := sources.UpdateByID(ctx, 1, bson.D{{Key: "$set", Value: bson.D{{Key: "tag", Value: tag}}}})
			require.NoError(t, err)
		}
		// held returns the tag of source 1's copy in the note and in the
		// board, as stored.
		held := func() [2]bson.RawValue {
			t.Helper()
			var note, board bson.Raw
			require.NoError(t, db.Collection("notes").FindOne(ctx, bson.D{}).Decode(&note))
			require.NoError(t, db.Collection("boards").FindOne(ctx, bson.D{}).Decode(&board))
			return [2]bson.RawValue{note.Lookup("ref", "tag"), board.Lookup("cards", "0", "ref", "tag")}
		}
		requireHeld := func(tag any) {
			t.Helper()
			typ, data, err := bson.MarshalValue(tag)
			require.NoError(t, err)
			want := bson.RawValue{Type: typ, Value: data}
			for i, got := range held() {
				require.Equal(t, want.String(), got.String(), "target %d", i)
			}
		}
		one := []extref.Count{
			{Target: extref.Target{Collection: "notes", Path: "ref"}, Matched: 1, Modified: 1},
			{Target: extref.Target{Collection: "boards", Path: "cards[].ref"}, Matched: 1, Modified: 1},
		}

		retag("a")
		reports, err := r.Verify(ctx)
		require.NoError(t, err)
		require.Equal(t, []int64{1, 1}, []int64{reports[0].Stale, reports[1].Stale}, "Verify sees the array copies stale")
		counts, err := r.Sync(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, one, counts, "Sync rewrites them")
		requireHeld("a")
		require.Equal(t, []int64{0, 0}, verifyStale(t, r))

		counts, err = r.Update(ctx, 1, bson.D{{Key: "$set", Value: bson.D{{Key: "tag", Value: bson.A{"a"}}}}})
		require.NoError(t, err)
		require.Equal(t, one, counts, "Update rewrites them")
		requireHeld(bson.A{"a"})

		retag("a")
		reports, err = r.Repair(ctx)
		require.NoError(t, err)
		require.Equal(t, []int64{1, 0}, []int64{reports[0].Stale, reports[1].Stale}, "the notes' repair synced the boards too")
		require.Equal(t, []int64{1, 1}, []int64{reports[0].Repaired, reports[1].Repaired})
		requireHeld("a")
		require.Equal(t, []int64{0, 0}, verifyStale(t, r))

		counts, err = r.Sync(ctx, 1)
		require.NoError(t, err)
		require.Zero(t, counts[0].Matched+counts[1].Matched, "nothing stale: nothing matched")
	})
}

// TestOfMany (issue 23 item 4): the copies of many sources in the order
// of the ids, one find per BatchSize distinct ids, numbers of any type
// finding their source, and the missing ids named in an ErrNotFound that
// comes with the copies of the others.
func TestOfMany(t *testing.T) {
	db := mongotest.DB(t)
	seedOrders(t, db, customerRefs(t, db), 7, 0)
	r, err := extref.New[CustomerRef](db, extref.Config{Source: "customers", Targets: []extref.Target{{Collection: "orders", Path: "customer"}}, BatchSize: 3})
	require.NoError(t, err)
	want := func(id int) CustomerRef {
		return CustomerRef{ID: id, Name: "Customer " + strconv.Itoa(id), Email: "c" + strconv.Itoa(id) + "@example.com"}
	}
	counter := mongotest.NewCounter(t, db)

	got, err := r.OfMany(ctx, []any{5, int64(1), 5.0, 2, 3, 4})
	require.NoError(t, err)
	require.Equal(t, []CustomerRef{want(5), want(1), want(5), want(2), want(3), want(4)}, got)
	require.Equal(t, []string{"find", "find"}, counter.Commands(), "5 distinct ids in batches of 3")

	counter.Reset()
	got, err = r.OfMany(ctx, []any{2, 99, 7, 98})
	require.ErrorIs(t, err, patterns.ErrNotFound)
	require.Equal(t, "extref: OfMany: sources 99, 98 not in customers: not found", err.Error())
	require.Equal(t, []CustomerRef{want(2), {}, want(7), {}}, got)

	counter.Reset()
	_, err = r.OfMany(ctx, []any{1, bson.D{{Key: "$ne", Value: nil}}})
	require.ErrorIs(t, err, patterns.ErrInvalid)
	require.Empty(t, counter.Commands(), "a bad id: nothing sent")
	got, err = r.OfMany(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, got)
}

// TestSharedSyncSurvivesTheFailureOfItsRunner (issue 19 item 6): two
// Syncs of one source through one Ref share one sync at a time. The first
// runs a sync, and its ctx ends inside it, while the second waits for it:
// the failure reaches only the first, and the second runs the next sync,
// which writes the copies.
func TestSharedSyncSurvivesTheFailureOfItsRunner(t *testing.T) {
	db, r := withOrders(t, 2, 6)
	rename(t, db.Collection("customers"), 1, "Renamed")
	first, cancel := context.WithCancel(ctx)
	defer cancel()
	second := make(chan error, 1)
	var once atomic.Bool
	mongotest.OnCommand(t, db, "update", func(context.Context) {
		if once.Swap(true) {
			return
		}
		go func() {
			_, err := r.Sync(ctx, 1)
			second <- err
		}()
		time.Sleep(200 * time.Millisecond) // the second Sync waits for this one
		cancel()
	})
	_, err := r.Sync(first, 1)
	require.ErrorIs(t, err, context.Canceled)
	require.NoError(t, <-second, "the failure of the sync that served it is not the second Sync's")
	require.Equal(t, []int64{0}, verifyStale(t, r))
}
