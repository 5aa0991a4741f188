package extref_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/extref"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
)

// TestSyncRacingStaleInserts: copies are taken with Of, the sources are
// renamed, and then orders and carts embedding the stale copies are
// inserted while Sync runs again and again. Each stale document is
// rewritten exactly once over all the Syncs (the sum of their modified
// counts is the number of stale documents), and after a final Sync,
// Verify finds no drift.
func TestSyncRacingStaleInserts(t *testing.T) {
	mongotest.RunPlans(t, extref.PlanFor, func(t *testing.T, p extref.Plan) {
		db, customers := withOrders(t, 5, 20, p) // customer 1 has 4 orders
		products := productRefs(t, db, p)
		seedCarts(t, db, products, 5, 20)
		cartsHolding, err := db.Collection("carts").CountDocuments(ctx, bson.D{{Key: "items.product.id", Value: 1}})
		require.NoError(t, err)

		oldCustomer, err := customers.Of(ctx, 1)
		require.NoError(t, err)
		oldProduct, err := products.Of(ctx, 1)
		require.NoError(t, err)
		rename(t, db.Collection("customers"), 1, "Renamed")
		rename(t, db.Collection("products"), 1, "Renamed")

		const inserts, syncs = 40, 10
		var wg sync.WaitGroup
		wg.Go(func() {
			for i := range inserts {
				_, err := db.Collection("orders").InsertOne(ctx, Order{ID: 1000 + i, Customer: oldCustomer})
				assert.NoError(t, err)
				_, err = db.Collection("carts").InsertOne(ctx, Cart{ID: 1000 + i, Items: []Item{{Product: oldProduct, Qty: 1}}})
				assert.NoError(t, err)
			}
		})
		var orderSyncs, cartSyncs, featuredSyncs int64
		wg.Go(func() {
			for range syncs {
				counts, err := customers.Sync(ctx, 1)
				if !assert.NoError(t, err) {
					return
				}
				orderSyncs += counts[0].Modified
				counts, err = products.Sync(ctx, 1)
				if !assert.NoError(t, err) {
					return
				}
				cartSyncs += counts[0].Modified
				featuredSyncs += counts[1].Modified
			}
		})
		wg.Wait()
		counts, err := customers.Sync(ctx, 1)
		require.NoError(t, err)
		orderSyncs += counts[0].Modified
		counts, err = products.Sync(ctx, 1)
		require.NoError(t, err)
		cartSyncs += counts[0].Modified
		featuredSyncs += counts[1].Modified

		require.EqualValues(t, 4+inserts, orderSyncs, "every stale order rewritten once")
		require.EqualValues(t, cartsHolding+inserts, cartSyncs, "every stale cart rewritten once")
		require.EqualValues(t, 1, featuredSyncs)
		require.Equal(t, []int64{0}, verifyStale(t, customers))
		require.Equal(t, []int64{0, 0}, verifyStale(t, products))
	})
}
