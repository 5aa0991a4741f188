package subset_test

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/subset"
)

// counted is the configuration of the count tests: config with the count
// of all the parent's items in its field n.
func counted(capacity int) subset.Config {
	cfg := config(capacity)
	cfg.CountField = "n"
	return cfg
}

// countedParent is a parent with its count.
type countedParent struct {
	ID  string `bson:"_id"`
	Top []item `bson:"top,omitempty"`
	N   int64  `bson:"n"`
}

// requireCount checks the count both ways: Count, and the field read with
// the parent by Get.
func requireCount(t testing.TB, r *subset.Repo[countedParent, item], parentID string, want int64) {
	t.Helper()
	n, err := r.Count(context.Background(), parentID)
	require.NoError(t, err)
	require.Equal(t, want, n, "Count")
	p, err := r.Get(context.Background(), parentID)
	require.NoError(t, err)
	require.Equal(t, want, p.N, "the parent's count field")
}

// TestCountFollowsEveryWrite: the count field holds the number of all
// the parent's items after every write (Add, Remove, Update, Rebuild),
// set in the same update as the subset; the commands each sends are
// pinned, on every plan.
func TestCountFollowsEveryWrite(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, plan subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		r := newRepo[countedParent, item](t, db, counted(3), plan)
		insertParents(t, db, "a")
		c := mongotest.NewCounter(t, db)

		require.Equal(t, []string{"find", "findAndModify", "insert", "find", "aggregate", "update"},
			c.Count(func() { require.NoError(t, r.Add(ctx, "a", five...)) }), "Add recomputes on every plan, with a count (stamping the new parent first)")
		requireCount(t, r, "a", 5)
		require.Equal(t, []string{"find", "insert", "find", "aggregate", "update"},
			c.Count(func() { require.NoError(t, r.Add(ctx, "a", item{ID: 6, Score: 1})) }), "Add out of the subset")
		requireCount(t, r, "a", 6)
		require.NoError(t, r.Add(ctx, "a", item{ID: 6, Score: 1}), "a retry")
		requireCount(t, r, "a", 6)
		require.Equal(t, []string{"delete", "find", "find", "aggregate", "update"},
			c.Count(func() { require.NoError(t, r.Remove(ctx, "a", int64(5))) }), "Remove")
		requireCount(t, r, "a", 5)
		var err error
		require.Equal(t, []string{"delete", "find", "find", "find", "aggregate"},
			c.Count(func() { err = r.Remove(ctx, "a", int64(5)) }), "Remove of an item in neither place checks that it is gone, then the count")
		require.ErrorIs(t, err, patterns.ErrNotFound)
		require.Equal(t, []string{"update", "find", "find", "aggregate", "update"},
			c.Count(func() { require.NoError(t, r.Update(ctx, "a", item{ID: 1, Score: 99})) }), "Update")
		requireCount(t, r, "a", 5)

		// Items loaded without the repository: Rebuild counts them.
		_, err = db.Collection("items").InsertMany(ctx, []any{item{ID: 20, Parent: "a", Score: 2}, item{ID: 21, Parent: "a", Score: 3}})
		require.NoError(t, err)
		require.Equal(t, []string{"find", "find", "aggregate", "update"},
			c.Count(func() { require.NoError(t, r.Rebuild(ctx, "a")) }), "Rebuild")
		requireCount(t, r, "a", 7)
		require.Equal(t, []string{"find"}, c.Count(func() {
			_, err := r.Count(ctx, "a")
			require.NoError(t, err)
		}), "Count reads the field")
		p, err := r.Get(ctx, "a")
		require.NoError(t, err)
		require.Len(t, p.Top, 3, "the subset is still capped")
	})
}

// TestCountWithoutAField counts the items collection, and with a field,
// sets the count of a parent that has no count yet, once, then reads it.
func TestCountWithoutAField(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	r := newRepo[parent, item](t, db, config(3), portable)
	insertParents(t, db, "a", "b")
	require.NoError(t, r.Add(ctx, "a", five...))
	c := mongotest.NewCounter(t, db)
	var n int64
	require.Equal(t, []string{"aggregate"}, c.Count(func() {
		var err error
		n, err = r.Count(ctx, "a")
		require.NoError(t, err)
	}))
	require.EqualValues(t, 5, n)
	n, err := r.Count(ctx, "nope")
	require.NoError(t, err)
	require.Zero(t, n, "no parent, no items")
	_, err = r.Count(ctx, bson.D{{Key: "$ne", Value: nil}})
	require.ErrorIs(t, err, patterns.ErrInvalid)

	withField := newRepo[countedParent, item](t, db, counted(3), portable)
	require.Equal(t, []string{"find", "find", "find", "aggregate", "update", "find"}, c.Count(func() {
		n, err = withField.Count(ctx, "a")
		require.NoError(t, err)
	}), "a parent without a count yet gets one, as Rebuild sets it")
	require.EqualValues(t, 5, n)
	require.Equal(t, []string{"find"}, c.Count(func() {
		n, err = withField.Count(ctx, "a")
		require.NoError(t, err)
	}), "then Count reads it")
	require.EqualValues(t, 5, n)
	_, err = withField.Count(ctx, "nope")
	require.ErrorIs(t, err, patterns.ErrNotFound)
	_, err = db.Collection("parents").UpdateOne(ctx, bson.D{{Key: "_id", Value: "b"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: "many"}}}})
	require.NoError(t, err)
	_, err = withField.Count(ctx, "b")
	require.ErrorContains(t, err, "subset: Count: parent \"b\": the parent's n holds a string, not a count")
	require.ErrorIs(t, err, patterns.ErrInvalid, "a count of another type is invalid stored data")
}

// TestItem reads one item by its id, only under its parent.
func TestItem(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	r := newRepo[parent, item](t, db, config(3), portable)
	insertParents(t, db, "a", "b")
	require.NoError(t, r.Add(ctx, "a", five...))
	c := mongotest.NewCounter(t, db)
	require.Equal(t, []string{"find"}, c.Count(func() {
		it, err := r.Item(ctx, "a", 2.0) // the id as the server compares it
		require.NoError(t, err)
		require.Equal(t, item{ID: 2, Parent: "a", Score: 20}, it)
	}))
	_, err := r.Item(ctx, "b", 2)
	require.ErrorIs(t, err, patterns.ErrNotFound, "another parent's item")
	require.ErrorContains(t, err, `subset: Item: parent "b": item 2: no such item`)
	_, err = r.Item(ctx, "a", 9)
	require.ErrorIs(t, err, patterns.ErrNotFound)
	_, err = r.Item(ctx, "a", bson.M{"$ne": nil})
	require.ErrorIs(t, err, patterns.ErrInvalid)
	_, err = r.Item(ctx, "", 1)
	require.ErrorIs(t, err, patterns.ErrInvalid)
}

// TestCountIsExactUnderConcurrentWriters: 8 writers add, remove and
// update items of one parent at once (each Add and Remove recomputes the
// count, the writers racing for the revision); no call fails, and
// afterwards the count is the number of items, exactly, on every plan.
func TestCountIsExactUnderConcurrentWriters(t *testing.T) {
	const writers = 8
	each := mongotest.Scale(40, 6)
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, plan subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		r := newRepo[countedParent, item](t, db, counted(4), plan)
		insertParents(t, db, "a")
		var wg sync.WaitGroup
		errs := make(chan error, writers*each*2)
		kept := make([]int, writers)
		for w := range writers {
			wg.Go(func() {
				for k := range each {
					it := item{ID: int64(1000*(w+1) + k), Score: int64((w + k) % 7)}
					if err := r.Add(ctx, "a", it); err != nil {
						errs <- fmt.Errorf("Add %d: %w", it.ID, err)
						continue
					}
					switch k % 3 {
					case 0:
						if err := r.Remove(ctx, "a", it.ID); err != nil {
							errs <- fmt.Errorf("Remove %d: %w", it.ID, err)
							kept[w]++
						}
						continue
					case 1:
						it.Score += 10
						if err := r.Update(ctx, "a", it); err != nil {
							errs <- fmt.Errorf("Update %d: %w", it.ID, err)
						}
					}
					kept[w]++
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		var want int64
		for _, k := range kept {
			want += int64(k)
		}
		require.Equal(t, want, count(t, db.Collection("items"), bson.D{{Key: "parent", Value: "a"}}))
		requireCount(t, r, "a", want)
	})
}

// TestCountNeverGoesBackUnderFirstAdds: writers only add items to
// parents that have no count yet (parents created by the application, as
// every parent is), while readers Count them; the count a reader sees
// never goes down, on every plan. Before Count set a missing count
// itself, it counted the items collection instead, which runs ahead of
// the count that a first Add in flight then sets from an earlier count:
// 4, then 3, with no item removed (issue 23, on FerretDB 2).
func TestCountNeverGoesBackUnderFirstAdds(t *testing.T) {
	const writers, readers = 4, 2
	parents := mongotest.Scale(12, 4)
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, plan subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		r := newRepo[countedParent, item](t, db, counted(2), plan)
		for k := range parents {
			id := fmt.Sprintf("p%d", k)
			insertParents(t, db, id)
			var wg sync.WaitGroup
			done := make(chan struct{})
			var reading sync.WaitGroup
			errs := make(chan error, writers+readers)
			for c := range readers {
				reading.Go(func() {
					last := int64(0)
					for {
						n, err := r.Count(ctx, id)
						if err != nil {
							errs <- fmt.Errorf("reader %d: Count: %w", c, err)
							return
						}
						if n < last {
							errs <- fmt.Errorf("reader %d: parent %s: Count gave %d after %d, with no item removed", c, id, n, last)
							return
						}
						last = n
						select {
						case <-done:
							return
						default:
						}
					}
				})
			}
			for w := range writers {
				wg.Go(func() {
					if err := r.Add(ctx, id, item{ID: int64(100*k + w + 1), Score: int64(w)}); err != nil {
						errs <- fmt.Errorf("Add: %w", err)
					}
				})
			}
			wg.Wait()
			close(done)
			reading.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			requireCount(t, r, id, writers)
		}
	})
}

// TestCountReadsEveryNumericType: a count field stored without the
// repository is read by value: a whole number from 0 to 2^63-1 of any
// numeric type is the count; a fraction, NaN, an infinity, a negative
// number or a value beyond int64 is ErrInvalid, as a string is. A value
// the server does not store (FerretDB 1.x closes the connection on a
// decimal or a NaN, and refuses an infinity) is left out.
func TestCountReadsEveryNumericType(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	r := newRepo[countedParent, item](t, db, counted(3), portable)
	insertParents(t, db, "a")
	dec := func(s string) bson.Decimal128 {
		d, err := bson.ParseDecimal128(s)
		require.NoError(t, err)
		return d
	}
	for _, tc := range []struct {
		v    any
		want int64 // -1: ErrInvalid
	}{
		{int32(3), 3},
		{int64(3), 3},
		{3.0, 3},
		{math.Copysign(0, -1), 0},
		{dec("3"), 3},
		{dec("3.00"), 3},
		{int64(math.MaxInt64), math.MaxInt64},
		{2.9, -1},
		{dec("2.9"), -1},
		{math.NaN(), -1},
		{dec("NaN"), -1},
		{math.Inf(1), -1},
		{int32(-5), -1},
		{-5.0, -1},
		{float64(1 << 63), -1},
		{dec("9223372036854775808"), -1},
		{"3", -1},
		{true, -1},
		{nil, -1},
	} {
		_, err := db.Collection("parents").UpdateOne(ctx, bson.D{{Key: "_id", Value: "a"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: tc.v}}}})
		if err != nil {
			mongotest.Detail(t, "%T %v left out: the server does not store it (%v)", tc.v, tc.v, err)
			continue
		}
		n, err := r.Count(ctx, "a")
		if tc.want < 0 {
			require.ErrorIs(t, err, patterns.ErrInvalid, "%T %v", tc.v, tc.v)
			require.ErrorContains(t, err, "subset: Count: parent \"a\": the parent's n holds ")
			continue
		}
		require.NoError(t, err, "%T %v", tc.v, tc.v)
		require.Equal(t, tc.want, n, "%T %v", tc.v, tc.v)
	}
}
