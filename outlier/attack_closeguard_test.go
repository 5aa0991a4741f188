package outlier

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// vote is an item with a field whose name is a number: a poll answer that
// records the option chosen under the option's number ("2": true), as a
// Go struct tag or an inline map[string]bool of options would encode it.
type vote struct {
	ID   string `bson:"_id"`
	Opt2 bool   `bson:"2,omitempty"`
}

// poll is a parent of votes.
type poll struct {
	ID       int    `bson:"_id"`
	Comments []vote `bson:"comments,omitempty"`
}

func voteIDs(vs []vote) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.ID
	}
	return out
}

// TestAttackCloseGuardNumericField attacks the guard the change put on
// the close of a parent read open (commands.go, closeFilter: "the filter
// requires an element at index held-1, which a new parent holding fewer
// items lacks, as does one that a Remove gave room") and the promises
// built on it, append.go:
//
//	"It is also guarded on the parent being as Append last read it: ...
//	if read open, holding at least the items read ... When it matches
//	nothing because the parent is open (a Remove made room in it, or it
//	was deleted and inserted again), the items go into it" (Append godoc)
//
//	"It closes the new parent only if that one was inserted with at least
//	as many items as the old one held when the Append read it full"
//	(Append godoc, the Delete/re-Insert paragraph)
//
// The guard is {"comments.<held-1>": {$exists: true}}. On MongoDB a
// numeric path component over an array of documents names both the
// element at that index and the field of that name in every element:
// src/mongo/db/matcher/path_test.cpp, TEST(Path, ArrayIndex3): path "a.1"
// over {a: [5, {"1": 4}, 3]} yields 4 (the field "1" of an element) as
// well as the element at index 1. So an item with a field named "2" (a
// vote for option 2) makes "comments.2" exist in a parent holding one
// item: the close matches a parent that a Remove gave room, or a new
// parent holding fewer items than read, closes it, and the item goes to
// overflow: issue 34's result, which the change says cannot happen.
func TestAttackCloseGuardNumericField(t *testing.T) {
	// One database for every plan and a parent per case (a database costs
	// a few hundred milliseconds on FerretDB 2).
	ctx := context.Background()
	db := mongotest.DB(t)
	indexed, err := New[poll, vote](db, small())
	require.NoError(t, err)
	require.NoError(t, patterns.EnsureIndexes(ctx, indexed.Indexes()...))
	parents := 0
	appendPlans(t, func(t *testing.T, p Plan) {
		r, err := New[poll, vote](db, small())
		require.NoError(t, err)
		ForcePlan(r, p)
		other, err := New[poll, vote](mongotest.NewClient(t).Database(db.Name()), small())
		require.NoError(t, err)
		ForcePlan(other, p)
		for _, tc := range []struct {
			name   string
			before []vote // the parent, full (Cap 3), when the Append reads it
			window func(ctx context.Context, other *Repo[poll, vote], id int, numeric bool)
			want   []string // what the open parent holds after the Append
		}{
			{
				name:   "a Remove made room",
				before: []vote{{ID: "a"}, {ID: "b"}, {ID: "c", Opt2: true}},
				window: func(ctx context.Context, other *Repo[poll, vote], id int, _ bool) {
					require.NoError(t, other.Remove(ctx, id, "a"))
				},
				want: []string{"b", "c", "x"},
			},
			{
				name:   "deleted and inserted again with one item",
				before: []vote{{ID: "a"}, {ID: "b"}, {ID: "c"}},
				window: func(ctx context.Context, other *Repo[poll, vote], id int, numeric bool) {
					require.NoError(t, other.Delete(ctx, id))
					_, err := other.Insert(ctx, poll{ID: id, Comments: []vote{{ID: "n", Opt2: numeric}}})
					require.NoError(t, err)
				},
				want: []string{"n", "x"},
			},
		} {
			// numeric false is the control: the same items without the
			// field "2", where the guard holds.
			for _, numeric := range []bool{false, true} {
				name := tc.name + `, items without a field "2" (control)`
				before := tc.before
				if numeric {
					name = tc.name + `, an item with a field "2"`
				} else {
					before = make([]vote, len(tc.before))
					for i, v := range tc.before {
						before[i] = vote{ID: v.ID}
					}
				}
				parents++
				id := parents
				t.Run(name, func(t *testing.T) {
					_, err := r.Insert(ctx, poll{ID: id, Comments: before})
					require.NoError(t, err)

					// The close: the Append's first update after its read
					// of the full parent.
					at := missedPush(p) + 1
					updates := atUpdate(t, db, at, func(hook context.Context) { tc.window(hook, other, id, numeric) })
					require.NoError(t, r.Append(ctx, id, vote{ID: "x"}))
					require.GreaterOrEqual(t, *updates, at, "the window fired")

					var parent struct {
						Comments []vote `bson:"comments"`
						Flag     bool   `bson:"has_extra"`
					}
					require.NoError(t, r.parents.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&parent))
					n, err := r.overflow.CountDocuments(ctx, overflowFilter(id))
					require.NoError(t, err)
					t.Logf("parent holds %v, flag %v; %d overflow documents", voteIDs(parent.Comments), parent.Flag, n)
					require.Equal(t, tc.want, voteIDs(parent.Comments), "the item goes into the open parent, which has room")
					require.False(t, parent.Flag, "the parent, with room, stays open")
					require.Zero(t, n, "no overflow document")
				})
			}
		}
	})
}

// TestAttackPushGuardNumericField: the same path semantics against the
// push guard, which this change did not touch but which the close guard
// copies (commands.go, pushParentFilter: "'Can take' is a count ... no
// element at index Cap-k" / "no element at index n"). A parent holding
// two votes, one of them for option 2, has room for a third (Cap 3), but
// {"comments.2": {$exists: false}} never matches it: every push misses,
// and Append gives up with ErrConflict although no other writer ran
// (append.go: "maxMisses is how many guarded writes in a row an Append
// lets concurrent writers win ... Every miss means another writer made
// progress on the same parent").
func TestAttackPushGuardNumericField(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	indexed, err := New[poll, vote](db, small())
	require.NoError(t, err)
	require.NoError(t, patterns.EnsureIndexes(ctx, indexed.Indexes()...))
	parents := 0
	appendPlans(t, func(t *testing.T, p Plan) {
		r, err := New[poll, vote](db, small())
		require.NoError(t, err)
		ForcePlan(r, p)
		parents++
		id := parents
		_, err = r.Insert(ctx, poll{ID: id, Comments: []vote{{ID: "a"}, {ID: "b", Opt2: true}}})
		require.NoError(t, err)
		err = r.Append(ctx, id, vote{ID: "x"})
		require.NoError(t, err, "no other writer: the parent, with room for one, takes x")
		var parent struct {
			Comments []vote `bson:"comments"`
		}
		require.NoError(t, r.parents.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&parent))
		require.Equal(t, []string{"a", "b", "x"}, voteIDs(parent.Comments))
	})
}

// TestAttackUpdateGuardNumericField: the same path semantics against
// Update's guard where the server does not check sizes (update.go,
// updateParentFilter: "also while it holds the n items read (no element
// at index n)"). Not this change's code: the close guard shares its
// reading of "comments.<n>". A parent holding a vote for option 2 at
// index 1 never matches {"comments.2": {$exists: false}}: Update of an
// item it holds ends in ErrConflict with no other writer (update.go:
// "a concurrent Remove ... makes it match nothing, and Update reads
// again (after 100 misses in a row, [patterns.ErrConflict])").
func TestAttackUpdateGuardNumericField(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	parents := 0
	mongotest.RunPlans(t, PlanFor, func(t *testing.T, p Plan) {
		r, err := New[poll, vote](db, small())
		require.NoError(t, err)
		ForcePlan(r, p)
		parents++
		id := parents
		_, err = r.Insert(ctx, poll{ID: id, Comments: []vote{{ID: "a"}, {ID: "b", Opt2: true}}})
		require.NoError(t, err)
		require.NoError(t, r.Update(ctx, id, vote{ID: "a", Opt2: true}), "no other writer: a is replaced")
	})
}
