package subset_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/subset"
)

func TestAddKeepsTheMostRelevantWhateverTheOrder(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, plan subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		r := newRepo[parent, item](t, db, config(3), plan)
		insertParents(t, db, "a")
		var all []item
		for _, batch := range [][]item{
			{{ID: 1, Score: 5}, {ID: 2, Score: 7}},
			{{ID: 3, Score: 5}, {ID: 4, Score: 1}, {ID: 5, Score: 9}},
			{{ID: 6, Score: 1}},
			{{ID: 7, Score: 7}},
		} {
			require.NoError(t, r.Add(ctx, "a", batch...))
			all = append(all, batch...)
			requireState(t, r, "a", all, 3)
		}
	})
}

func TestAddIsRetrySafe(t *testing.T) {
	items := []item{{ID: 1, Score: 4}, {ID: 2, Score: 8}, {ID: 3, Score: 6}}
	// Each case stores what a failed Add may have left behind, then
	// retries the Add.
	cases := []struct {
		name   string
		before func(t *testing.T, r *subset.Repo[parent, item], coll func(string) *mongoColl)
	}{
		{"nothing stored", func(*testing.T, *subset.Repo[parent, item], func(string) *mongoColl) {}},
		{"all items stored, subset untouched", func(t *testing.T, _ *subset.Repo[parent, item], coll func(string) *mongoColl) {
			coll("items").insert(t, withParent("a", items...)...)
		}},
		{"one item stored, subset untouched", func(t *testing.T, _ *subset.Repo[parent, item], coll func(string) *mongoColl) {
			coll("items").insert(t, withParent("a", items[1])...)
		}},
		{"both steps done, acknowledgement lost", func(t *testing.T, r *subset.Repo[parent, item], _ func(string) *mongoColl) {
			require.NoError(t, r.Add(context.Background(), "a", items...))
		}},
		{"a recomputation already put one item in the subset", func(t *testing.T, r *subset.Repo[parent, item], coll func(string) *mongoColl) {
			coll("items").insert(t, withParent("a", items[0])...)
			require.NoError(t, r.Rebuild(context.Background(), "a"))
		}},
	}
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, plan subset.Plan) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				db := mongotest.DB(t)
				r := newRepo[parent, item](t, db, config(2), plan)
				insertParents(t, db, "a")
				tc.before(t, r, func(name string) *mongoColl { return &mongoColl{db.Collection(name)} })
				require.NoError(t, r.Add(context.Background(), "a", items...))
				requireState(t, r, "a", items, 2)
			})
		}
	})
}

func TestAddToAMissingParentLeavesNothing(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, plan subset.Plan) {
		db := mongotest.DB(t)
		r := newRepo[parent, item](t, db, config(3), plan)
		err := r.Add(context.Background(), "nope", item{ID: 1, Score: 1}, item{ID: 2, Score: 2})
		require.ErrorIs(t, err, patterns.ErrNotFound)
		require.Zero(t, count(t, db.Collection("items"), bson.D{}), "no orphan items")
	})
}

func TestAddOfAnIDTakenByAnotherParent(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, plan subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		r := newRepo[parent, item](t, db, config(3), plan)
		insertParents(t, db, "a", "b")
		require.NoError(t, r.Add(ctx, "a", item{ID: 1, Score: 1}))
		err := r.Add(ctx, "b", item{ID: 2, Score: 2}, item{ID: 1, Score: 3})
		require.ErrorIs(t, err, patterns.ErrInvalid)
		require.Zero(t, count(t, db.Collection("items"), bson.D{{Key: "parent", Value: "b"}}), "the items of the call are taken back")
		requireState(t, r, "a", []item{{ID: 1, Score: 1}}, 3)
		requireState(t, r, "b", nil, 3)
	})
}

// TestAddOfAnItemRemovedAfterEachInsert: another writer stores x again
// before each of an Add's inserts (the first finds it stored from the
// start) and removes it before each read that follows, rounds times, so
// that the insert finds x taken and the read finds it gone each time.
// Such an x is no other parent's: the Add stores it once the writer
// stops, after as many inserts as it takes (soak seed
// 16720569214792909661, portable, FerretDB 2.7: the second round gave
// ErrInvalid, "taken by items that are not the parent's"), and gives
// ErrConflict, with the item it inserted taken back, when the writer
// outlasts its 10 inserts.
func TestAddOfAnItemRemovedAfterEachInsert(t *testing.T) {
	x, y := item{ID: 1, Score: 5}, item{ID: 2, Score: 3}
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, plan subset.Plan) {
		for _, rounds := range []int{1, 2, 3, 10} {
			t.Run(fmt.Sprintf("%d rounds", rounds), func(t *testing.T) {
				ctx := context.Background()
				db := mongotest.DB(t)
				r := newRepo[parent, item](t, db, config(3), plan)
				insertParents(t, db, "a")
				require.NoError(t, r.Add(ctx, "a", item{ID: x.ID, Score: 1}))
				other := mongotest.NewClient(t).Database(db.Name()).Collection("items")
				var mu sync.Mutex
				sent, inserts, done, armed := 0, 0, 0, false
				inAdd := func(ctx context.Context) bool { return ctx.Value(theAdd{}) != nil }
				mongotest.OnCommand(t, db, "insert", func(ctx context.Context) {
					mu.Lock()
					defer mu.Unlock()
					if !inAdd(ctx) {
						return
					}
					if sent++; done == rounds {
						return
					}
					if inserts++; inserts > 1 {
						_, err := other.InsertOne(ctx, bson.D{{Key: "_id", Value: x.ID}, {Key: "parent", Value: "a"}, {Key: "score", Value: 9}})
						require.NoError(t, err)
					}
					armed = true
				})
				mongotest.OnCommand(t, db, "find", func(ctx context.Context) {
					mu.Lock()
					defer mu.Unlock()
					if !inAdd(ctx) || !armed {
						return
					}
					_, err := other.DeleteOne(ctx, bson.D{{Key: "_id", Value: x.ID}})
					require.NoError(t, err)
					done, armed = done+1, false
				})
				err := r.Add(context.WithValue(ctx, theAdd{}, true), "a", x, y)
				require.Equal(t, rounds, done, "the rounds of the other writer")
				if rounds >= 10 {
					require.ErrorIs(t, err, patterns.ErrConflict)
					require.ErrorContains(t, err, "after each of 10 inserts")
					require.Equal(t, 10, sent, "Add's inserts")
					require.Zero(t, count(t, db.Collection("items"), bson.D{}), "y taken back, x removed by the other writer")
					return
				}
				require.NoError(t, err)
				require.Equal(t, rounds+1, sent, "Add's inserts: one per round, and the one that stores x")
				requireState(t, r, "a", []item{x, y}, 3)
			})
		}
	})
}

// TestInsertBatches: Add inserts its items in batches that the driver
// sends as one command each (at most InsertBatchBytes of documents and
// InsertBatchCount documents, far under its 48,000,000 bytes and the
// 25,000 statements FerretDB 2.7 takes), so that a command error of one
// tells which items applied; a document larger than the bound goes
// alone. The $in of ids its reads and deletes send hold 8 MiB of ids at
// most (MongoDB refuses a command past 16 MiB and 16 KiB).
func TestInsertBatches(t *testing.T) {
	const mib = 1 << 20
	require.Equal(t, 32*mib, subset.InsertBatchBytes)
	many := make([]int, subset.InsertBatchCount+1)
	for i := range many {
		many[i] = 20
	}
	for _, c := range []struct {
		name  string
		sizes []int
		max   int
		want  []int
	}{
		{"none", nil, subset.InsertBatchBytes, nil},
		{"one", []int{100}, subset.InsertBatchBytes, []int{1}},
		{"4 of 12.5 MB", []int{12_500_000, 12_500_000, 12_500_000, 12_500_000}, subset.InsertBatchBytes, []int{2, 2}},
		{"exactly the bound", []int{16 * mib, 16 * mib, 1}, subset.InsertBatchBytes, []int{2, 1}},
		{"larger than the bound, alone", []int{10, 40, 10}, 30, []int{1, 1, 1}},
		{"past the count", many, subset.InsertBatchBytes, []int{subset.InsertBatchCount, 1}},
	} {
		require.Equal(t, c.want, subset.InsertBatchSizes(c.sizes, c.max), c.name)
	}
	require.Equal(t, 10_000, subset.InsertBatchCount)
	ids := make([]int, 17_000)
	for i := range ids {
		ids[i] = 1_000 // 17 MB of ids in all
	}
	require.Equal(t, []int{8_322, 8_322, 356}, subset.IDBatchSizes(ids), "8 MiB of ids (and element overhead) each")
	require.Equal(t, []int{10_000, 1}, subset.IDBatchSizes(many), "10,000 ids each")
}

// TestAddPastSixteenMiB: items that one update cannot carry (their
// documents past 16 MiB) are put in the subset on the push plan by a
// recomputation in place of the push and its count (a read of the
// parent, of the first Cap items, and the compare-and-set); each fits
// in the parent (Cap 1), and so does the subset. The push of both was
// refused (an outside attack: TestAttackAddPushPastSixteenMiB, its long
// form).
func TestAddPastSixteenMiB(t *testing.T) {
	requirePushPlan(t)
	ctx := context.Background()
	db := mongotest.DB(t)
	r := newRepo[parent, item](t, db, config(1), pushPlan)
	insertParents(t, db, "a")
	require.NoError(t, r.Add(ctx, "a", item{ID: 3, Score: 3}), "stamped")
	items := []item{{ID: 1, Score: 1, Body: strings.Repeat("a", 8_500_000)}, {ID: 2, Score: 2, Body: strings.Repeat("b", 8_500_000)}}
	n := mongotest.NewCounter(t, db)
	require.Equal(t, []string{"find", "insert", "find", "find", "update"}, n.Count(func() { require.NoError(t, r.Add(ctx, "a", items...)) }))
	requireState(t, r, "a", append(items, item{ID: 3, Score: 3}), 1)
}

// theAdd marks the context of the Add whose commands a test's hooks act
// before.
type theAdd struct{}

func TestAddRejectsBadInputAndWritesNothing(t *testing.T) {
	db := mongotest.DB(t)
	r := newRepo[bson.M, bson.M](t, db, config(3), portable)
	insertParents(t, db, "a")
	huge := strings.Repeat("x", patterns.MaxDocumentSize/3)
	cases := []struct {
		name     string
		parentID any
		items    []bson.M
		want     error
	}{
		{"nil parent id", nil, []bson.M{{"_id": 1, "score": 1}}, patterns.ErrInvalid},
		{"zero parent id", "", []bson.M{{"_id": 1, "score": 1}}, patterns.ErrInvalid},
		{"operator as parent id", bson.M{"$ne": nil}, []bson.M{{"_id": 1, "score": 1}}, patterns.ErrInvalid},
		{"item without id", "a", []bson.M{{"score": 1}}, patterns.ErrInvalid},
		{"item with zero id", "a", []bson.M{{"_id": 0, "score": 1}}, patterns.ErrInvalid},
		{"operator as item id", "a", []bson.M{{"_id": bson.M{"$gt": 0}, "score": 1}}, patterns.ErrInvalid},
		{"item without sort value", "a", []bson.M{{"_id": 1}}, patterns.ErrInvalid},
		{"null sort value", "a", []bson.M{{"_id": 1, "score": nil}}, patterns.ErrInvalid},
		{"array sort value", "a", []bson.M{{"_id": 1, "score": bson.A{1, 2}}}, patterns.ErrInvalid},
		{"document sort value", "a", []bson.M{{"_id": 1, "score": bson.M{"$gt": 1}}}, patterns.ErrInvalid},
		{"item of another parent", "a", []bson.M{{"_id": 1, "score": 1, "parent": "b"}}, patterns.ErrInvalid},
		{"one id twice", "a", []bson.M{{"_id": 1, "score": 1}, {"_id": 1, "score": 2}}, patterns.ErrInvalid},
		{"one id twice, as 1 and 1.0", "a", []bson.M{{"_id": 1, "score": 1}, {"_id": 1.0, "score": 2}}, patterns.ErrInvalid},
		{"bad item after a good one", "a", []bson.M{{"_id": 1, "score": 1}, {"_id": 2}}, patterns.ErrInvalid},
		{"item larger than a third of a document", "a", []bson.M{{"_id": 1, "score": 1, "body": huge}}, patterns.ErrTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := r.Add(context.Background(), tc.parentID, tc.items...)
			require.ErrorIs(t, err, tc.want)
			require.Zero(t, count(t, db.Collection("items"), bson.D{}))
			p, err := r.Get(context.Background(), "a")
			require.NoError(t, err)
			require.Equal(t, bson.M{"_id": "a"}, p, "the parent is untouched")
		})
	}
}

func TestAddAcceptsTheParentIDInTheItem(t *testing.T) {
	db := mongotest.DB(t)
	r := newRepo[bson.M, bson.M](t, db, config(3), portable)
	_, err := db.Collection("parents").InsertOne(context.Background(), bson.D{{Key: "_id", Value: int64(7)}})
	require.NoError(t, err)
	// An int parent id encodes as int32; the items' are an int64 and a
	// double, which the server takes for the same id.
	require.NoError(t, r.Add(context.Background(), 7, bson.M{"_id": 1, "score": 1, "parent": int64(7)}))
	require.NoError(t, r.Add(context.Background(), 7, bson.M{"_id": 2, "score": 2, "parent": 7.0}))
	require.EqualValues(t, 2, count(t, db.Collection("items"), bson.D{{Key: "parent", Value: 7}}))
}

func TestAddNothingSendsNothing(t *testing.T) {
	db := mongotest.DB(t)
	r := newRepo[parent, item](t, db, config(3), portable)
	c := mongotest.NewCounter(t, db)
	require.Empty(t, c.Count(func() { require.NoError(t, r.Add(context.Background(), "a")) }))
	require.ErrorIs(t, r.Add(context.Background(), ""), patterns.ErrInvalid, "the parent id is checked all the same")
}

// mongoColl stores documents for a test's setup.
type mongoColl struct{ *mongo.Collection }

func (c *mongoColl) insert(t *testing.T, docs ...any) {
	t.Helper()
	_, err := c.InsertMany(context.Background(), docs)
	require.NoError(t, err)
}

// withParent returns the items as the items collection stores them.
func withParent(parentID string, items ...item) []any {
	out := make([]any, len(items))
	for i, it := range items {
		it.Parent = parentID
		out[i] = it
	}
	return out
}
