package extref_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/extref"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
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

		// Order i holds customer i (i <= 10); the orphan's copy names 999.
		staleOrders := []extref.CopyID{named(1, 1), named(2, 2), named(3, 3), named(4, 4), named(5, 5), named(7, 7)}
		orphanOrders := []extref.CopyID{named(9, 999)}
		var staleCarts []extref.CopyID
		for id := 1; id <= 3; id++ {
			var c Cart
			require.NoError(t, carts.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&c))
			staleCarts = append(staleCarts, named(id, c.Items[0].Product.ID))
		}
		staleFeatured := []extref.CopyID{named(featuredCorrupt[0], featuredCorrupt[0]), named(featuredCorrupt[1], featuredCorrupt[1])}

		vo, err := customers.Verify(ctx)
		require.NoError(t, err)
		require.Equal(t, []extref.Report{{Target: extref.Target{Collection: "orders", Path: "customer"}, Documents: 100, Copies: 100, Stale: 6, Orphans: 1,
			StaleCopies: staleOrders, OrphanCopies: orphanOrders}}, vo)
		vp, err := products.Verify(ctx)
		require.NoError(t, err)
		require.Len(t, vp, 2)
		require.Equal(t, int64(3), vp[0].Stale)
		require.Equal(t, staleCarts, vp[0].StaleCopies)
		require.Zero(t, vp[0].Orphans)
		require.Empty(t, vp[0].OrphanCopies)
		require.Equal(t, int64(50), vp[0].Documents)
		require.Equal(t, extref.Report{Target: extref.Target{Collection: "featured", Path: "product"}, Documents: 10, Copies: 10, Stale: 2, StaleCopies: staleFeatured}, vp[1])

		// Repair's reports name the documents it found stale and repaired.
		ro, err := customers.Repair(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(6), ro[0].Stale)
		require.Equal(t, int64(6), ro[0].Repaired)
		require.Equal(t, staleOrders, ro[0].StaleCopies)
		require.Equal(t, orphanOrders, ro[0].OrphanCopies)
		rp, err := products.Repair(ctx)
		require.NoError(t, err)
		require.Equal(t, [2]int64{3, 2}, [2]int64{rp[0].Stale, rp[1].Stale})
		require.Equal(t, [2]int64{3, 2}, [2]int64{rp[0].Repaired, rp[1].Repaired})
		require.Equal(t, [][]extref.CopyID{staleCarts, staleFeatured}, [][]extref.CopyID{rp[0].StaleCopies, rp[1].StaleCopies})

		vo, err = customers.Verify(ctx)
		require.NoError(t, err)
		require.Zero(t, vo[0].Stale)
		require.Empty(t, vo[0].StaleCopies)
		require.Equal(t, int64(1), vo[0].Orphans, "orphans are reported, not repaired")
		require.Equal(t, orphanOrders, vo[0].OrphanCopies)
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
// 40, then a short page of 20 that ends the scan, and one find of the
// greatest _id (none of a type sorted after timestamps).
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
	require.Equal(t, []string{"find", "find", "find", "find", "find", "find", "find"}, sent)
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
	require.Equal(t, extref.Report{Target: extref.Target{Collection: "orders", Path: "customer"}, Documents: 3, Copies: 3, Orphans: 2,
		OrphanCopies: []extref.CopyID{named(2, nil), {Document: idOf(3), Source: bson.RawValue{Type: bson.TypeNull}}}}, reports[0])
	reports, err = products.Verify(ctx)
	require.NoError(t, err)
	carts := extref.Report{Target: extref.Target{Collection: "carts", Path: "items[].product"}, Documents: 2, Copies: 3, Orphans: 2,
		OrphanCopies: []extref.CopyID{named(1, nil), named(2, nil)}}
	require.Equal(t, carts, reports[0])
	reports, err = products.Repair(ctx)
	require.NoError(t, err)
	require.Equal(t, carts, reports[0], "orphans are reported, not repaired")
}

// TestVerifyNamesCopies: each report names the first Config.ReportSample
// stale and orphan copies in the order of the scan (documents by _id
// across pages, a document's copies in array order), with the documents'
// and sources' ids, and counts them all. Copies without an id, or with a
// null one, are named as orphans; Repair's report names the copies it
// repaired.
func TestVerifyNamesCopies(t *testing.T) {
	mongotest.RunPlans(t, extref.PlanFor, func(t *testing.T, p extref.Plan) {
		db := mongotest.DB(t)
		cartsT, featuredT := extref.Target{Collection: "carts", Path: "items[].product"}, extref.Target{Collection: "featured", Path: "product"}
		r, err := extref.New[ProductRef](db, extref.Config{
			Source:       "products",
			Targets:      []extref.Target{cartsT, featuredT},
			BatchSize:    2, // the carts in two pages: 1 and 3, then 4 and 5
			ReportSample: 3,
		})
		require.NoError(t, err)
		require.NoError(t, patterns.EnsureIndexes(ctx, r.Indexes()...))
		extref.ForcePlan(r, p)
		insertAll(t, db.Collection("products"), []Product{{ID: 1, Name: "Mug", Price: 3}, {ID: 2, Name: "Pot", Price: 9}, {ID: 3, Name: "Cup", Price: 2}})
		fresh := ofAll(t, r, 3)
		stale := func(i int) ProductRef { c := fresh[i-1]; c.Name = "Mallory"; return c }
		orphan := func(id int) ProductRef { return ProductRef{ID: id, Name: "Gone"} }
		item := func(c any) bson.D { return bson.D{{Key: "product", Value: c}, {Key: "qty", Value: 1}} }
		noID := bson.D{{Key: "name", Value: "Nameless"}}
		nullID := bson.D{{Key: "id", Value: nil}, {Key: "name", Value: "Null"}}
		cart := func(id int, items ...bson.D) bson.D {
			return bson.D{{Key: "_id", Value: id}, {Key: "items", Value: items}}
		}
		// Inserted out of order: the scan's order is the _ids'.
		insertAll(t, db.Collection("carts"), []bson.D{
			cart(4, item(stale(1)), item(stale(2))),
			cart(1, item(fresh[0]), item(stale(2)), item(noID)),
			cart(5, item(noID), item(orphan(98))),
			cart(2),
			cart(3, item(nullID), item(stale(3)), item(orphan(99))),
		})
		featured := func(id int, c any) bson.D { return bson.D{{Key: "_id", Value: id}, {Key: "product", Value: c}} }
		insertAll(t, db.Collection("featured"), []bson.D{featured(4, orphan(97)), featured(1, fresh[0]), featured(3, stale(3)), featured(2, noID)})

		cartsOrphans := []extref.CopyID{named(1, nil), {Document: idOf(3), Source: bson.RawValue{Type: bson.TypeNull}}, named(3, 99)} // of 5
		featuredOrphans := []extref.CopyID{named(2, nil), named(4, 97)}
		want := []extref.Report{
			{Target: cartsT, Documents: 4, Copies: 10, Stale: 4, Orphans: 5,
				StaleCopies: []extref.CopyID{named(1, 2), named(3, 3), named(4, 1)}, OrphanCopies: cartsOrphans}, // of (4, 2) too
			{Target: featuredT, Documents: 4, Copies: 4, Stale: 1, Orphans: 2,
				StaleCopies: []extref.CopyID{named(3, 3)}, OrphanCopies: featuredOrphans},
		}
		counter := mongotest.NewCounter(t, db)
		var got []extref.Report
		sent := counter.Count(func() {
			got, err = r.Verify(ctx)
			require.NoError(t, err)
		})
		require.Equal(t, want, got)
		// Per target, two full pages and an empty one, a find of the
		// sources of each full page, and one of the greatest _id: the
		// finds Verify sent before it named copies.
		require.Len(t, sent, 2*(3+2+1))

		// The syncs of the first page of carts (products 2 and 3) rewrite
		// cart 4's copy of product 2 and featured 3 before the scan reaches
		// them: Repaired counts them, the names are of the copies found.
		want[0].Repaired = 4 // carts 1, 3 and 4 by the first page's syncs, cart 4 again by product 1's
		want[0].StaleCopies = []extref.CopyID{named(1, 2), named(3, 3), named(4, 1)}
		want[0].Stale = 3
		want[1].Repaired, want[1].Stale, want[1].StaleCopies = 1, 0, nil
		got, err = r.Repair(ctx)
		require.NoError(t, err)
		require.Equal(t, want, got)

		got, err = r.Verify(ctx)
		require.NoError(t, err)
		require.Equal(t, []extref.Report{
			{Target: cartsT, Documents: 4, Copies: 10, Orphans: 5, OrphanCopies: cartsOrphans},
			{Target: featuredT, Documents: 4, Copies: 4, Orphans: 2, OrphanCopies: featuredOrphans},
		}, got)
	})
}

// TestVerifyReportSampleDefault: without Config.ReportSample, a report
// names the first DefaultReportSample stale copies of many, by ids that
// find the target document and sync the source.
func TestVerifyReportSampleDefault(t *testing.T) {
	db, customers := withOrders(t, 10, 30)
	res, err := db.Collection("orders").UpdateMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$lte", Value: 25}}}}, set("customer.name", "Mallory"))
	require.NoError(t, err)
	require.EqualValues(t, 25, res.ModifiedCount)

	reports, err := customers.Verify(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 25, reports[0].Stale)
	want := make([]extref.CopyID, extref.DefaultReportSample)
	for i := range want {
		want[i] = named(i+1, i%10+1) // order i holds customer (i-1)%10+1
	}
	require.Equal(t, want, reports[0].StaleCopies)
	require.Nil(t, reports[0].OrphanCopies)

	// The ids find their documents: the order, and the source to sync.
	first := reports[0].StaleCopies[0]
	var o Order
	require.NoError(t, db.Collection("orders").FindOne(ctx, bson.D{{Key: "_id", Value: first.Document}}).Decode(&o))
	require.Equal(t, "Mallory", o.Customer.Name)
	counts, err := customers.Sync(ctx, first.Source)
	require.NoError(t, err)
	require.EqualValues(t, 3, counts[0].Modified, "orders 1, 11 and 21 of customer 1")
}

func TestCopyIDString(t *testing.T) {
	require.Equal(t, "document 7, source 3", named(7, 3).String())
	require.Equal(t, `document "cart-1", source null`, extref.CopyID{Document: idOf("cart-1"), Source: bson.RawValue{Type: bson.TypeNull}}.String())
	require.Equal(t, "document 7, no source id", named(7, nil).String())
}

// idOf is the BSON value of an id as the driver encodes it.
func idOf(v any) bson.RawValue {
	t, data, err := bson.MarshalValue(v)
	if err != nil {
		panic(err)
	}
	return bson.RawValue{Type: t, Value: data}
}

// named is the CopyID of the copy in document doc of source src (nil: a
// copy without an id).
func named(doc, src any) extref.CopyID {
	if src == nil {
		return extref.CopyID{Document: idOf(doc)}
	}
	return extref.CopyID{Document: idOf(doc), Source: idOf(src)}
}
