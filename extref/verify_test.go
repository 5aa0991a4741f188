package extref_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/extref"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
)

func set(path string, v any) bson.D {
	return bson.D{{Key: "$set", Value: bson.D{{Key: path, Value: v}}}}
}

func corrupt(t *testing.T, coll *mongo.Collection, id int, update bson.D) {
	t.Helper()
	res, err := coll.UpdateByID(ctx, id, update)
	require.NoError(t, err)
	require.EqualValues(t, 1, res.ModifiedCount, "corrupt %s %d", coll.Name(), id)
}

// TestVerifyRepair corrupts copies on purpose in every kind of target;
// Verify finds each of them (and not the harmless changes), Repair fixes
// them, and a second Verify finds none.
func TestVerifyRepair(t *testing.T) {
	mongotest.RunPlans(t, extref.PlanFor, func(t *testing.T, p extref.Plan) {
		db, customers := withOrders(t, 10, 100, p)
		products := productRefs(t, db, p)
		seedCarts(t, db, products, 10, 50)
		orders, carts, featured := db.Collection("orders"), db.Collection("carts"), db.Collection("featured")

		// orders: 5 wrong names (customers 1..5), one missing email
		// (customer 7): 6 stale; one order pointing at a customer that does
		// not exist: an orphan.
		for id := 1; id <= 5; id++ {
			corrupt(t, orders, id, set("customer.name", "Mallory"))
		}
		corrupt(t, orders, 7, bson.D{{Key: "$unset", Value: bson.D{{Key: "customer.email", Value: ""}}}})
		corrupt(t, orders, 9, set("customer.id", 999))
		// Harmless: a field that is not copied, an extra field in the copy,
		// the id stored as another numeric type.
		corrupt(t, orders, 10, set("total", -1))
		corrupt(t, orders, 11, set("customer.note", "extra"))
		corrupt(t, orders, 12, set("customer.id", int64(2)))

		// carts: the first item's price in carts 1..3; featured: two names,
		// of products that are not in those first items (so that Repair's
		// syncs for the carts do not fix them before their scan).
		inFirst := map[int]bool{}
		for id := 1; id <= 3; id++ {
			var c Cart
			require.NoError(t, carts.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&c))
			inFirst[c.Items[0].Product.ID] = true
			corrupt(t, carts, id, set("items.0.product.price", -1.0))
		}
		var featuredCorrupt []int
		for p := 1; len(featuredCorrupt) < 2; p++ {
			if !inFirst[p] {
				corrupt(t, featured, p, set("product.name", "Mallory"))
				featuredCorrupt = append(featuredCorrupt, p)
			}
		}

		vo, err := customers.Verify(ctx)
		require.NoError(t, err)
		require.Equal(t, []extref.Report{{Target: extref.Target{Collection: "orders", Path: "customer"}, Documents: 100, Copies: 100, Stale: 6, Orphans: 1}}, vo)
		vp, err := products.Verify(ctx)
		require.NoError(t, err)
		require.Len(t, vp, 2)
		require.Equal(t, int64(3), vp[0].Stale)
		require.Zero(t, vp[0].Orphans)
		require.Equal(t, int64(50), vp[0].Documents)
		require.Equal(t, extref.Report{Target: extref.Target{Collection: "featured", Path: "product"}, Documents: 10, Copies: 10, Stale: 2}, vp[1])

		ro, err := customers.Repair(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(6), ro[0].Stale)
		require.Equal(t, int64(6), ro[0].Repaired)
		rp, err := products.Repair(ctx)
		require.NoError(t, err)
		require.Equal(t, [2]int64{3, 2}, [2]int64{rp[0].Stale, rp[1].Stale})
		require.Equal(t, [2]int64{3, 2}, [2]int64{rp[0].Repaired, rp[1].Repaired})

		vo, err = customers.Verify(ctx)
		require.NoError(t, err)
		require.Zero(t, vo[0].Stale)
		require.Equal(t, int64(1), vo[0].Orphans, "orphans are reported, not repaired")
		vp, err = products.Verify(ctx)
		require.NoError(t, err)
		require.Zero(t, vp[0].Stale+vp[1].Stale)

		var o Order
		require.NoError(t, orders.FindOne(ctx, bson.D{{Key: "_id", Value: 7}}).Decode(&o))
		require.Equal(t, "c7@example.com", o.Customer.Email)
	})
}

// TestVerifyBatches: Verify reads a target in pages of BatchSize
// documents, each page one find after the last _id (and the _ids of the
// types sorted after it), with one find of their sources per page: 40,
// 40, then a short page of 20 that ends the scan.
func TestVerifyBatches(t *testing.T) {
	db := mongotest.DB(t)
	seedOrders(t, db, customerRefs(t, db), 10, 100)
	r, err := extref.New[CustomerRef](db, extref.Config{
		Source:    "customers",
		Targets:   []extref.Target{{Collection: "orders", Path: "customer"}},
		BatchSize: 40,
	})
	require.NoError(t, err)
	counter := mongotest.NewCounter(t, db)
	sent := counter.Count(func() {
		reports, err := r.Verify(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 100, reports[0].Copies)
	})
	require.Equal(t, []string{"find", "find", "find", "find", "find", "find"}, sent)
}

// TestVerifyCountsCopiesWithoutAnID: a copy that has no id is an orphan,
// whether or not another copy of its document has one.
func TestVerifyCountsCopiesWithoutAnID(t *testing.T) {
	db, customers := withOrders(t, 1, 1)
	products := cartRefs(t, db)
	_, err := db.Collection("products").InsertOne(ctx, Product{ID: 1, Name: "Mug", Price: 3})
	require.NoError(t, err)
	mug, err := products.Of(ctx, 1)
	require.NoError(t, err)

	_, err = db.Collection("orders").InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 2}, {Key: "customer", Value: bson.D{{Key: "name", Value: "Nobody"}}}},
		bson.D{{Key: "_id", Value: 3}, {Key: "customer", Value: bson.D{{Key: "id", Value: nil}, {Key: "name", Value: "Null"}}}},
		bson.D{{Key: "_id", Value: 4}, {Key: "total", Value: 5}}, // no copy at all
	})
	require.NoError(t, err)
	noID := bson.D{{Key: "product", Value: bson.D{{Key: "name", Value: "Nameless"}}}}
	_, err = db.Collection("carts").InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "items", Value: bson.A{noID}}},
		bson.D{{Key: "_id", Value: 2}, {Key: "items", Value: bson.A{noID, Item{Product: mug}}}},
		bson.D{{Key: "_id", Value: 3}, {Key: "items", Value: bson.A{}}},
	})
	require.NoError(t, err)

	reports, err := customers.Verify(ctx)
	require.NoError(t, err)
	require.Equal(t, extref.Report{Target: extref.Target{Collection: "orders", Path: "customer"}, Documents: 3, Copies: 3, Orphans: 2}, reports[0])
	reports, err = products.Verify(ctx)
	require.NoError(t, err)
	require.Equal(t, extref.Report{Target: extref.Target{Collection: "carts", Path: "items[].product"}, Documents: 2, Copies: 3, Orphans: 2}, reports[0])
	reports, err = products.Repair(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 2, reports[0].Orphans, "orphans are reported, not repaired")
}
