package subset_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/subset"
)

// vote is an item identified within its parent by its author: one vote
// per author and poll.
type vote struct {
	Author string `bson:"author"`
	Poll   string `bson:"poll,omitempty"`
	Weight int    `bson:"weight"`
}

type poll struct {
	ID    string   `bson:"_id"`
	Votes []bson.M `bson:"votes"`
}

func TestItemsIdentifiedWithinTheirParent(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, plan subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		r := newRepo[poll, vote](t, db, subset.Config{
			Parents: "polls", Field: "votes", Items: "votes", ParentField: "poll",
			IDField: "author", SortField: "weight", Descending: true, Cap: 2,
		}, plan)
		_, err := db.Collection("polls").InsertMany(ctx, []any{bson.D{{Key: "_id", Value: "p"}}, bson.D{{Key: "_id", Value: "q"}}})
		require.NoError(t, err)

		votes := []vote{{Author: "ann", Weight: 1}, {Author: "bob", Weight: 3}, {Author: "cy", Weight: 2}}
		require.NoError(t, r.Add(ctx, "p", votes...))
		require.NoError(t, r.Add(ctx, "p", votes...), "a retry: the unique index of Indexes finds the duplicates")
		require.NoError(t, r.Add(ctx, "q", vote{Author: "ann", Weight: 5}), "the same id under another parent")
		require.EqualValues(t, 3, count(t, db.Collection("votes"), bson.D{{Key: "poll", Value: "p"}}))

		// The subset holds the stored documents, generated _id included.
		storedVotes := func() []bson.M {
			cur, err := db.Collection("votes").Find(ctx, bson.D{{Key: "poll", Value: "p"}},
				options.Find().SetSort(bson.D{{Key: "weight", Value: -1}, {Key: "author", Value: -1}}))
			require.NoError(t, err)
			var out []bson.M
			require.NoError(t, cur.All(ctx, &out))
			return out
		}
		before := storedVotes()
		p, err := r.Get(ctx, "p")
		require.NoError(t, err)
		require.Equal(t, before[:2], p.Votes)

		require.NoError(t, r.Update(ctx, "p", vote{Author: "ann", Weight: 9}))
		require.NoError(t, r.Remove(ctx, "p", "bob"))
		after := storedVotes()
		require.Equal(t, before[2]["_id"], after[0]["_id"], "an update keeps the stored _id")
		p, err = r.Get(ctx, "p")
		require.NoError(t, err)
		require.Equal(t, after, p.Votes)
		require.Equal(t, "ann", p.Votes[0]["author"])
	})
}

// TestAddOfAnItemWhoseIDAnotherDocumentHolds: with IDField other than
// _id, an item that carries its own _id, which another document holds,
// is bad input, found by the insert and by the read of the ids held
// elsewhere (a document with the item's _id that is not the parent's
// item with its id); the Add's other items are taken back.
func TestAddOfAnItemWhoseIDAnotherDocumentHolds(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, plan subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		r := newRepo[bson.M, bson.M](t, db, subset.Config{
			Parents: "polls", Field: "votes", Items: "votes", ParentField: "poll",
			IDField: "author", SortField: "weight", Descending: true, Cap: 2,
		}, plan)
		_, err := db.Collection("polls").InsertMany(ctx, []any{bson.D{{Key: "_id", Value: "p"}}, bson.D{{Key: "_id", Value: "q"}}})
		require.NoError(t, err)
		require.NoError(t, r.Add(ctx, "q", bson.M{"_id": "v1", "author": "zed", "weight": 1}))
		for _, holder := range []string{"q", "p"} {
			if holder == "p" { // the parent's own item, under another id
				_, err := db.Collection("votes").UpdateOne(ctx, bson.D{{Key: "_id", Value: "v1"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "poll", Value: "p"}}}})
				require.NoError(t, err)
			}
			err = r.Add(ctx, "p", bson.M{"author": "bob", "weight": 3}, bson.M{"_id": "v1", "author": "ann", "weight": 2})
			require.ErrorIs(t, err, patterns.ErrInvalid, "held by %s's item", holder)
			require.ErrorContains(t, err, `item ids ["ann"] are taken by items that are not the parent's`)
			require.Zero(t, count(t, db.Collection("votes"), bson.D{{Key: "author", Value: bson.D{{Key: "$ne", Value: "zed"}}}}), "bob taken back")
		}
	})
}

// TestConcurrentDeleteLeavesNoOrphans adds items to a parent one at a time
// while the parent is deleted: afterwards no item of it remains, whichever
// step of an Add the delete fell between, and an Add that starts after
// the delete returned fails with ErrNotFound (the writer goes on until
// one has, so a server fast enough to finish every Add before the delete
// lands still checks it).
func TestConcurrentDeleteLeavesNoOrphans(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, plan subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		r := newRepo[parent, item](t, db, config(3), plan)
		for round := range 4 {
			insertParents(t, db, "a")
			started := make(chan struct{})
			var deleted atomic.Bool
			var wg sync.WaitGroup
			var notFoundAfter bool
			var unexpected error
			wg.Go(func() {
				for i := 0; ; i++ {
					if i == round*2 {
						close(started)
					}
					after := deleted.Load()
					err := r.Add(ctx, "a", item{ID: int64(round*1000 + i + 1), Score: int64(i)})
					switch {
					case errors.Is(err, patterns.ErrNotFound):
						if after {
							notFoundAfter = true
							return
						}
					case err != nil:
						unexpected = err
						return
					case after:
						unexpected = fmt.Errorf("add %d after the delete: stored", i)
						return
					}
				}
			})
			<-started
			require.NoError(t, r.Delete(ctx, "a"))
			deleted.Store(true)
			wg.Wait()
			require.NoError(t, unexpected)
			require.True(t, notFoundAfter, "round %d: an add after the delete fails", round)
			require.Zero(t, count(t, db.Collection("items"), bson.D{}), "round %d: no orphan items", round)
		}
	})
}
