package validation_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/validation"
)

// TestEightAppliesAtOnce: 8 goroutines apply one validator to a
// collection that does not exist yet, at once, several rounds: every call
// succeeds (the losers of the create go on with collMod), and the
// validator is in force after.
func TestEightAppliesAtOnce(t *testing.T) {
	mongotest.Require(t, patterns.FeatureValidators)
	ctx := context.Background()
	db := mongotest.DB(t)
	v := users(t, validation.OnlyConstrained())
	p := validation.PlanFor(mongotest.Server())
	for round := range 3 {
		name := []string{"a", "b", "c"}[round]
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Go(func() { errs[i] = validation.ApplyPlan(ctx, db, name, v, "", "", p) })
		}
		wg.Wait()
		for i, err := range errs {
			require.NoError(t, err, "round %d, caller %d", round, i)
		}
		_, err := db.Collection(name).InsertOne(ctx, with(user("x", "x@example.com"), "role", "root"))
		requireRejected(t, err, "role root")
	}
}

// TestApplyRacingAnotherValidator: another caller sets its validator
// between Apply's collMod and its read-back (a rolling deploy): a third
// one, or the collection's previous one with its previous settings (an
// instance of the older release starting). Apply must not say the server
// lacks validators (ErrUnsupported, as it did when the read-back showed
// the previous settings): it says another writer won
// (patterns.ErrConflict), and the other's validator stays.
func TestApplyRacingAnotherValidator(t *testing.T) {
	mongotest.Require(t, patterns.FeatureValidators)
	for name, level := range map[string]validation.Level{"a third setting": validation.Moderate, "the previous setting": ""} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			db := mongotest.DB(t)
			p := validation.PlanFor(mongotest.Server())
			mine := users(t, validation.OnlyConstrained())
			theirs := users(t)
			require.NoError(t, validation.ApplyPlan(ctx, db, "users", theirs, "", "", p))
			other := mongotest.NewClient(t).Database(db.Name())
			var lists int
			mongotest.OnCommand(t, db, "listCollections", func(hctx context.Context) {
				if lists++; lists == 2 { // the read-back: the other release's Apply lands first
					require.NoError(t, validation.ApplyPlan(hctx, other, "users", theirs, level, "", p))
				}
			})
			err := validation.ApplyPlan(ctx, db, "users", mine, "", "", p)
			require.ErrorIs(t, err, patterns.ErrConflict)
			require.NotErrorIs(t, err, patterns.ErrUnsupported)
			require.ErrorContains(t, err, "validation: Apply: users: ")
		})
	}
}

// TestApplyAfterLosingTheCreate: another caller creates the collection
// between Apply's listCollections and its create; Apply goes on with
// collMod, in the five commands its godoc counts, and the validator is in
// force. The counter sees the other caller's create too.
func TestApplyAfterLosingTheCreate(t *testing.T) {
	mongotest.Require(t, patterns.FeatureValidators)
	ctx := context.Background()
	db := mongotest.DB(t)
	p := validation.PlanFor(mongotest.Server())
	other := mongotest.NewClient(t).Database(db.Name())
	mongotest.OnCommand(t, db, "create", func(hctx context.Context) {
		require.NoError(t, other.CreateCollection(hctx, "users"))
	})
	c := mongotest.NewCounter(t, db)
	require.NoError(t, validation.ApplyPlan(ctx, db, "users", users(t, validation.OnlyConstrained()), "", "", p))
	// The other caller's create comes first; a create without options of
	// an existing collection succeeds, one with other options fails.
	if p.CreateWithValidator {
		require.Equal(t, []string{"listCollections", "create", "create", "listCollections", "collMod", "listCollections"}, c.Commands())
	} else {
		require.Equal(t, []string{"listCollections", "create", "create", "collMod", "listCollections"}, c.Commands())
	}
	_, err := db.Collection("users").InsertOne(ctx, with(user("x", "x@example.com"), "role", "root"))
	requireRejected(t, err, "role root")
}
