package versioning_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
	"github.com/mongopatterns/mongopatterns/internal/bsonkinds"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/versioning"
)

// TestScansOverOddIDs: among four v1 documents with numeric _ids, one
// whose _id is a NaN or of a type outside the common ones (MinKey, a
// symbol, a DBPointer, JavaScript, MaxKey), stored without the
// repository: MigrateAll in batches of 1 to 3 counts and migrates all
// five, and Find yields all five once (issue 31: a NaN _id left 3
// documents at the old version, Find yielded 2 of 4); or either stops with
// an ErrInvalid naming it.
func TestScansOverOddIDs(t *testing.T) {
	ctx := context.Background()
	db, coll := usersDB(t)
	numbers := []any{int32(10), int64(20), 30.5, int32(40)}
	for _, v := range bsonkinds.Odd() {
		t.Run(v.Name, func(t *testing.T) {
			reseed := func() {
				_, err := coll.DeleteMany(ctx, bson.D{})
				require.NoError(t, err)
				if _, err := coll.InsertOne(ctx, old(v.V)); err != nil {
					t.Skipf("not stored: %v", err)
				}
				for _, id := range numbers {
					_, err := coll.InsertOne(ctx, old(id))
					require.NoError(t, err)
				}
			}
			for size := 1; size <= 3; size++ {
				reseed()
				r := newRepo[bson.M](t, db, serverPlan(), usersConfig())
				found, stopped := 0, false
				for _, err := range r.Find(ctx, nil, options.Find().SetBatchSize(int32(size))) {
					if err != nil {
						requireNames(t, err, v)
						stopped = true
						break
					}
					found++
				}
				if !stopped {
					require.Equal(t, 5, found, "pages of %d", size)
				}
				reseed() // Find wrote them back migrated
				res, err := newRepo[bson.M](t, db, serverPlan(), usersConfig()).MigrateAll(ctx, versioning.MigrateOptions{BatchSize: size})
				if err != nil {
					requireNames(t, err, v)
					continue
				}
				require.Equal(t, 5, res.Migrated+res.Skipped+len(res.Failed), "pages of %d: %+v", size, res)
				left, err := coll.CountDocuments(ctx, bson.D{{Key: "schemaVersion", Value: bson.D{{Key: "$ne", Value: 3}}}})
				require.NoError(t, err)
				require.Zero(t, left, "pages of %d: %+v", size, res)
			}
		})
	}
}

// old is a v1 document with the given _id.
func old(id any) bson.D {
	return bson.D{{Key: "_id", Value: id}, {Key: "name", Value: "Ada Lovelace"}, {Key: "mail", Value: "a@example.com"}}
}

func requireNames(t *testing.T, err error, v bsonkinds.Value) {
	t.Helper()
	require.ErrorIs(t, err, patterns.ErrInvalid)
	require.ErrorContains(t, err, bsonid.Text(v.V))
}
