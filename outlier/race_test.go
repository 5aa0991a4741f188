package outlier

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// The tests of issue 34: another repository, on its own client, acts in
// the window before each command of an operation on the same parent
// (mongotest.InWindow), and the result is what some order of the calls
// gives.

// otherRepo is a second repository over r's collections, on a client of
// its own, on plan p.
func otherRepo(t *testing.T, db string, cfg Config, p Plan) *Repo[post, comment] {
	t.Helper()
	other, err := New[post, comment](mongotest.NewClient(t).Database(db), cfg)
	require.NoError(t, err)
	ForcePlan(other, p)
	return other
}

// eachWindow runs test once per window of an operation (at = 0, 1, ...:
// before its at-th command), until test reports that the window did not
// fire (the operation sent fewer commands).
func eachWindow(t *testing.T, test func(t *testing.T, at int) (fired bool)) {
	t.Helper()
	for at, fired := 0, true; fired; at++ {
		fired = false // a test that fails before its window ends the loop
		t.Run(fmt.Sprintf("before command %d", at), func(t *testing.T) { fired = test(t, at) })
	}
}

// atUpdate runs fn once, in the window before the at-th (from 1) update
// command sent to db (see mongotest.OnCommand); it returns the number of
// updates sent so far.
func atUpdate(t *testing.T, db *mongo.Database, at int, fn func(hook context.Context)) *int {
	t.Helper()
	updates := 0
	mongotest.OnCommand(t, db, "update", func(hook context.Context) {
		if updates++; updates == at {
			fn(hook)
		}
	})
	return &updates
}

// missedPush is the number of updates an Append to a parent that cannot
// take its item sends before it reads the parent: with the server's size
// limit, its first push, which misses; none without.
func missedPush(p Plan) int {
	if p.serverSizeLimit {
		return 1
	}
	return 0
}

// requireOnce asserts that the parent holds want, in order, each once,
// and that every overflow document's count is its number of items.
func requireOnce(t *testing.T, r *Repo[post, comment], want []string) {
	t.Helper()
	_, items, err := r.Get(context.Background(), 1)
	require.NoError(t, err)
	require.Equal(t, want, idsOf(items), "Get")
	parent, docs := stored(t, r, 1)
	got := embedded(t, parent)
	for _, d := range docs {
		require.Equal(t, len(d.Items), d.Count, "seq %d: count", d.Seq)
		got = append(got, idsOf(d.Items)...)
	}
	require.Equal(t, want, got, "the parent and its overflow documents")
}

// TestAppendWhileAnotherMakesRoom: B appends x to a full open parent
// while A removes an item and appends x, which then fits in the parent.
// Issue 34: B's push missed (full), B read the parent without x and
// decided on the overflow; A made room and pushed x into the parent; B
// found no overflow document holding x, closed the parent with a filter
// on its _id alone and stored x again in overflow document 0. x must be
// stored once, whatever the window.
func TestAppendWhileAnotherMakesRoom(t *testing.T) {
	appendPlans(t, func(t *testing.T, p Plan) {
		eachWindow(t, func(t *testing.T, at int) bool {
			ctx := context.Background()
			r, db := newPost(t, small(), p)
			require.NoError(t, r.Append(ctx, 1, comments("c", 0, 3)...))
			other := otherRepo(t, db.Name(), small(), p)
			x := comment{ID: "x"}
			w := mongotest.InWindow(t, db, at, func(ctx context.Context) {
				require.NoError(t, other.Remove(ctx, 1, "c01"))
				require.NoError(t, other.Append(ctx, 1, x))
			}, "find", "update")
			require.NoError(t, r.Append(ctx, 1, x))
			w.Close()
			if !w.Fired() {
				return false
			}
			requireOnce(t, r, []string{"c00", "c02", "x"})
			return true
		})
	})
}

// TestRemoveWhileAnotherUpdates: another repository updates the item in
// the window before each command of a Remove. Issue 34: on the portable
// path Remove read the element, the Update rewrote it, and Remove's
// $pullAll, which compares whole elements, pulled nothing from a
// document that its filter on the id alone matched: Remove returned nil
// with the item stored, and in an overflow document lowered the count
// for good. A Remove that returns nil removed the item, and no count
// goes wrong.
func TestRemoveWhileAnotherUpdates(t *testing.T) {
	mongotest.RunPlans(t, PlanFor, func(t *testing.T, p Plan) {
		for _, id := range []string{"c01", "c04"} { // in the parent, in overflow document 0
			t.Run(id, func(t *testing.T) {
				eachWindow(t, func(t *testing.T, at int) bool {
					ctx := context.Background()
					r, db := newPost(t, small(), p)
					all := comments("c", 0, 6)
					require.NoError(t, r.Append(ctx, 1, all...))
					other := otherRepo(t, db.Name(), small(), p)
					var updateErr error
					w := mongotest.InWindow(t, db, at, func(ctx context.Context) {
						updateErr = other.Update(ctx, 1, comment{ID: id, Text: "edited"})
					}, "find", "update")
					require.NoError(t, r.Remove(ctx, 1, id))
					w.Close()
					if !w.Fired() {
						return false
					}
					if updateErr != nil {
						require.ErrorIs(t, updateErr, patterns.ErrNotFound, "an Update after the Remove")
					}
					requireOnce(t, r, slicesDelete(idsOf(all), id))
					return true
				})
			})
		}
	})
}

// TestAppendAfterDeleteLeftOverflow: a Delete that runs in the window of
// an Append's upsert leaves overflow document 0 behind, holding c03 (see
// TestDeleteDuringAppend); a parent with the same id is then inserted and
// overflows. Issue 34: the new parent inherited the document: c03 was
// skipped as "already stored", d03 went into the old document 0, the
// flag was never set, and Append returned nil with d03 invisible. The new
// parent holds what was appended to it, and nothing of the old one.
func TestAppendAfterDeleteLeftOverflow(t *testing.T) {
	appendPlans(t, func(t *testing.T, p Plan) {
		ctx := context.Background()
		r := deleteDuringAppend(t, p)
		_, err := r.Insert(ctx, post{ID: 1})
		require.NoError(t, err)
		again := append(comments("d", 0, 3), comment{ID: "c03"}, comment{ID: "d03"})
		for _, c := range again {
			require.NoError(t, r.Append(ctx, 1, c))
		}
		requireOnce(t, r, idsOf(again))
		n, err := r.Count(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, len(again), n)
	})
}

// TestAppendWhileParentReinserted: another repository deletes the parent
// and inserts it again, empty, in the window before an Append's first
// write after its read of the parent: the close of a parent read open
// and full, or the overflow write of a parent read closed (an upsert
// after the close when the newest overflow document is full, a push into
// it when it has room, which then matches nothing, the Delete having
// removed it). Issue 34 (MONGOPATTERNS_SEED=7410713906858292459 on
// FerretDB 2.7): the close, filtered on the _id and the items alone, set
// the flag of the new, empty parent, and the item went to its overflow.
// No order of the calls gives that: after the Insert the item goes into
// the open parent.
//
// An Append of several items, x1 then x2, whose window is after it wrote
// x1 (into the parent or its newest overflow document): x1 goes with the
// deleted parent and x2 into the new one, and Append returns nil, as the
// Append godoc says ("An Append of several items is a sequence of such
// writes: a [Repo.Delete] of the parent between two of them removes the
// items written before it, and if the parent is inserted again
// meanwhile, the Append writes the rest into the new parent ... and
// returns nil"). (An outside attack found it returning nil so, against
// "Append appends items to the parent, in order"; the godoc now says it.)
// (One database for every plan and a parent per case: a database and its
// indexes cost a few hundred milliseconds on FerretDB 2.)
func TestAppendWhileParentReinserted(t *testing.T) {
	db := mongotest.DB(t)
	indexed, err := New[post, comment](db, small())
	require.NoError(t, err)
	require.NoError(t, patterns.EnsureIndexes(context.Background(), indexed.Indexes()...))
	parents := 0 // the parents of the plans run so far
	appendPlans(t, func(t *testing.T, p Plan) {
		r, err := New[post, comment](db, small())
		require.NoError(t, err)
		ForcePlan(r, p)
		other := otherRepo(t, db.Name(), small(), p)
		for _, tc := range []struct {
			name   string
			stored int      // items appended before: Cap 3, OverflowCap 2
			items  []string // appended in the window's Append
			at     int      // its updates after the read, the window's included
			want   []string // what the new parent holds
		}{
			{"read open and full", 3, []string{"x"}, 1, []string{"x"}},
			{"read closed, newest overflow full", 5, []string{"x"}, 1, []string{"x"}},
			{"read closed, newest overflow with room", 4, []string{"x"}, 1, []string{"x"}},
			// The push of x1, then the close for x2.
			{"two items, read open with room for one", 2, []string{"x1", "x2"}, 2, []string{"x2"}},
			{"two items, read closed, newest overflow with room for one", 4, []string{"x1", "x2"}, 2, []string{"x2"}},
		} {
			parents++
			id := parents
			t.Run(tc.name, func(t *testing.T) {
				ctx := context.Background()
				_, err := r.Insert(ctx, post{ID: id})
				require.NoError(t, err)
				require.NoError(t, r.Append(ctx, id, comments("c", 0, tc.stored)...))
				// The Append's tc.at-th update after its read of the
				// parent.
				at := missedPush(p) + tc.at
				updates := atUpdate(t, db, at, func(hook context.Context) {
					require.NoError(t, other.Delete(hook, id))
					_, err := other.Insert(hook, post{ID: id})
					require.NoError(t, err)
				})
				items := make([]comment, len(tc.items))
				for i, x := range tc.items {
					items[i] = comment{ID: x}
				}
				require.NoError(t, r.Append(ctx, id, items...))
				require.GreaterOrEqual(t, *updates, at, "the window fired")
				parent, docs := stored(t, r, id)
				require.Equal(t, tc.want, embedded(t, parent), "the items written after the Insert went into the new, open parent")
				require.False(t, r.flagged(parent), "the new parent stays open")
				require.Empty(t, docs, "no overflow document")
				_, all, err := r.Get(ctx, id)
				require.NoError(t, err)
				require.Equal(t, tc.want, idsOf(all), "Get")
			})
		}
	})
}
