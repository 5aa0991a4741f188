package validation_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/faults"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/validation"
)

// TestFaultsApply breaks Apply before and inside each of its commands
// (listCollections, create, collMod, listCollections), on a collection
// that does not exist yet and on one that does: the caller sees the
// broken connection, never a claim about the validator; Apply run again
// on a healthy connection leaves the validator in force, with the level
// and action asked.
func TestFaultsApply(t *testing.T) {
	mongotest.Require(t, patterns.FeatureValidators)
	p := faults.New(t)
	plan := validation.PlanFor(mongotest.Server())
	v := users(t, validation.OnlyConstrained())
	for _, exists := range []bool{false, true} {
		t.Run(map[bool]string{false: "create", true: "collMod"}[exists], func(t *testing.T) {
			faults.Run(t, p, faults.Case[*[]error]{
				Prepare: func(t *testing.T, db *mongo.Database) *[]error {
					if exists {
						require.NoError(t, db.CreateCollection(context.Background(), "users"))
					}
					return new([]error)
				},
				Op: func(ctx context.Context, db *mongo.Database, seen *[]error) error {
					err := validation.ApplyPlan(ctx, db, "users", v, validation.Moderate, validation.Error, plan)
					*seen = append(*seen, err)
					return err
				},
				Check: func(t *testing.T, db *mongo.Database, seen *[]error) {
					for _, err := range (*seen)[:len(*seen)-1] {
						faults.Saw(t, "validation: Apply: ", err)
					}
					specs, err := db.ListCollectionSpecifications(context.Background(), bson.D{{Key: "name", Value: "users"}})
					require.NoError(t, err)
					require.Len(t, specs, 1)
					require.Equal(t, "moderate", specs[0].Options.Lookup("validationLevel").StringValue())
					_, err = db.Collection("users").InsertOne(context.Background(), with(user("a", "a@b.cd"), "role", "root"))
					requireRejected(t, err, "role root")
				},
			})
		})
	}
}
