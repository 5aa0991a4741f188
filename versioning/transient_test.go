package versioning_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/faults"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/versioning"
)

// TestTransientMigrateAllSendsAgain fails each write of MigrateAll (a
// bulk write per page of one, or a replaceOne per document) with FerretDB
// 2.x's transient deadlock, in both of its shapes (a command error, a
// write error): MigrateAll sends that write again and migrates every
// document, none failed.
func TestTransientMigrateAllSendsAgain(t *testing.T) {
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, p versioning.Plan) {
		const n = 3
		faults.RunTransient(t, faults.NewTransient(t), faults.Case[*versioning.MigrateResult]{
			Prepare: func(t *testing.T, db *mongo.Database) *versioning.MigrateResult {
				seedNumbered(t, db.Collection("users"), n)
				return &versioning.MigrateResult{}
			},
			Op: func(ctx context.Context, db *mongo.Database, res *versioning.MigrateResult) error {
				var err error
				*res, err = newUsers(t, db, p).MigrateAll(ctx, versioning.MigrateOptions{BatchSize: 1})
				return err
			},
			Check: func(t *testing.T, db *mongo.Database, res *versioning.MigrateResult) {
				require.Equal(t, versioning.MigrateResult{Migrated: n}, *res)
				s, err := newUsers(t, db, p).Stats(context.Background())
				require.NoError(t, err)
				require.Equal(t, map[int]int64{3: n}, s.Versions)
			},
		})
	})
}
