package extref_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/extref"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// measure runs op once per iteration after prepare (untimed) and reports
// the commands op sent and the documents it rewrote per operation.
func measure(b *testing.B, db *mongo.Database, prepare func(i int), op func() int64) {
	counter := mongotest.NewCounter(b, db)
	var commands, written int64
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		i++
		prepare(i)
		b.StartTimer()
		commands += int64(len(counter.Count(func() { written += op() })))
	}
	b.ReportMetric(float64(commands)/float64(b.N), "cmds/op")
	b.ReportMetric(float64(written)/float64(b.N), "docs-written/op")
}

// BenchmarkSyncSingle: one customer with 40 orders. "renamed" syncs after
// every rename (40 stale copies); "fresh" syncs with nothing stale. The
// driver baseline is what one writes by hand: read the customer, then one
// updateMany over all its orders without the $ne filter.
func BenchmarkSyncSingle(b *testing.B) {
	db := mongotest.DB(b)
	r := customerRefs(b, db)
	seedOrders(b, db, r, 10, 400)
	customers, orders := db.Collection("customers"), db.Collection("orders")
	byHand := func() int64 {
		var c Customer
		require.NoError(b, customers.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&c))
		res, err := orders.UpdateMany(ctx, bson.D{{Key: "customer.id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{
			{Key: "customer.name", Value: c.Name}, {Key: "customer.email", Value: c.Email},
		}}})
		require.NoError(b, err)
		return res.ModifiedCount
	}
	lib := func() int64 {
		counts, err := r.Sync(ctx, 1)
		require.NoError(b, err)
		return counts[0].Modified
	}
	renamed := func(i int) { rename(b, customers, 1, fmt.Sprintf("Name %d", i)) }
	fresh := func(int) {}
	b.Run("renamed/extref", func(b *testing.B) { measure(b, db, renamed, lib) })
	b.Run("renamed/driver", func(b *testing.B) { measure(b, db, renamed, byHand) })
	b.Run("fresh/extref", func(b *testing.B) { measure(b, db, fresh, lib) })
	b.Run("fresh/driver", func(b *testing.B) { measure(b, db, fresh, byHand) })
}

// BenchmarkSyncArray: one product in about 30 of 100 carts, renamed before
// every sync. The driver baseline without arrayFilters reads the carts
// holding the product and writes each one's whole items array back by
// _id, unguarded (it can overwrite a concurrent change to the cart).
func BenchmarkSyncArray(b *testing.B) {
	paths := map[string]extref.Plan{"portable": portable()}
	if mongotest.Server().Has(patterns.FeatureArrayFilters) {
		paths["native"] = extref.PlanFor(mongotest.Server())
	}
	for name, p := range paths {
		b.Run(name+"/extref", func(b *testing.B) {
			db := mongotest.DB(b)
			r := productRefs(b, db)
			extref.ForcePlan(r, p)
			seedCarts(b, db, r, 10, 100)
			measure(b, db, func(i int) { rename(b, db.Collection("products"), 1, fmt.Sprintf("Name %d", i)) }, func() int64 {
				counts, err := r.Sync(ctx, 1)
				require.NoError(b, err)
				return counts[0].Modified
			})
		})
	}
	b.Run("driver", func(b *testing.B) {
		db := mongotest.DB(b)
		seedCarts(b, db, productRefs(b, db), 10, 100)
		carts := db.Collection("carts")
		measure(b, db, func(i int) { rename(b, db.Collection("products"), 1, fmt.Sprintf("Name %d", i)) }, func() int64 {
			var p Product
			require.NoError(b, db.Collection("products").FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&p))
			cur, err := carts.Find(ctx, bson.D{{Key: "items.product.id", Value: 1}})
			require.NoError(b, err)
			var all []Cart
			require.NoError(b, cur.All(ctx, &all))
			var models []mongo.WriteModel
			for _, c := range all {
				for i := range c.Items {
					if c.Items[i].Product.ID == 1 {
						c.Items[i].Product.Name, c.Items[i].Product.Price = p.Name, p.Price
					}
				}
				models = append(models, mongo.NewUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: c.ID}}).
					SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "items", Value: c.Items}}}}))
			}
			res, err := carts.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false))
			require.NoError(b, err)
			return res.ModifiedCount
		})
	})
}

// BenchmarkVerify: Verify over 2,000 orders of 50 customers.
func BenchmarkVerify(b *testing.B) {
	db := mongotest.DB(b)
	r := customerRefs(b, db)
	seedOrders(b, db, r, 50, 2000)
	measure(b, db, func(int) {}, func() int64 {
		reports, err := r.Verify(ctx)
		require.NoError(b, err)
		require.EqualValues(b, 2000, reports[0].Copies)
		return 0
	})
}
