package extref_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/extref"
	"github.com/mongopatterns/mongopatterns/internal/bsonid"
	"github.com/mongopatterns/mongopatterns/internal/bsonkinds"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// TestVerifyOverOddIDs: among four orders with numeric _ids, one whose
// _id is a NaN or of a type outside the common ones (MinKey, a symbol, a
// DBPointer, JavaScript, MaxKey), stored without the repository: Verify
// in batches of 1 to 3 counts the five documents, each once (issue 31:
// with a NaN _id it reported 1 document of 4); or stops with an
// ErrInvalid naming it.
func TestVerifyOverOddIDs(t *testing.T) {
	db, _ := withOrders(t, 1, 1)
	orders := db.Collection("orders")
	var order bson.D
	require.NoError(t, orders.FindOne(ctx, bson.D{}).Decode(&order))
	withID := func(id any) bson.D { return append(bson.D{{Key: "_id", Value: id}}, order[1:]...) }
	numbers := []any{int32(10), int64(20), 30.5, int32(40)}
	for _, v := range bsonkinds.Odd() {
		t.Run(v.Name, func(t *testing.T) {
			_, err := orders.DeleteMany(ctx, bson.D{})
			require.NoError(t, err)
			if _, err := orders.InsertOne(ctx, withID(v.V)); err != nil {
				t.Skipf("not stored: %v", err)
			}
			for _, id := range numbers {
				_, err := orders.InsertOne(ctx, withID(id))
				require.NoError(t, err)
			}
			for size := 1; size <= 3; size++ {
				r, err := extref.New[CustomerRef](db, extref.Config{Source: "customers", Targets: []extref.Target{{Collection: "orders", Path: "customer"}}, BatchSize: size})
				require.NoError(t, err)
				reports, err := r.Verify(ctx)
				if err != nil {
					require.ErrorIs(t, err, patterns.ErrInvalid)
					require.ErrorContains(t, err, bsonid.Text(v.V))
					continue
				}
				require.EqualValues(t, 5, reports[0].Documents, "batches of %d", size)
				require.EqualValues(t, 5, reports[0].Copies, "batches of %d", size)
				require.Zero(t, reports[0].Stale+reports[0].Orphans, "batches of %d", size)
			}
		})
	}
}
