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

// TestAppendItemWithNumericField: the push into a parent with room
// succeeds whatever its items' field names (append.go, Append: "such an
// item may cost a push one miss (a read and a push more), never an item,
// a wrong close or an error"). The push guard was {"comments.<i>":
// {$exists: false}} alone (i = Cap-k, or n read), which a parent holding
// a vote for option 2 never matched (Cap 3, two items: "comments.2"
// exists as the field of an element), so every push missed and Append
// ended in ErrConflict with no other writer. Portable pushes are guarded
// on {$size: n} now; native ones, after the first, on either.
//
// And the close of a parent read open
// is guarded on the parent holding the items Append counted (append.go,
// Append: "if read open, holding exactly as many items as read ... When
// it matches nothing because the parent is open (a Remove made room in
// it, ..., or it was deleted and inserted again), the items go into it
// while it has room"). The guard was {"comments.<held-1>": {$exists:
// true}}, which MongoDB (and FerretDB 1.x and 2.x) read both as the
// element at that index and as the field of that name in any element
// (mongodb/mongo src/mongo/db/matcher/path_test.cpp, TEST(Path,
// ArrayIndex3): path "a.1" over {a: [5, {"1": 4}, 3]} yields the field
// "1" of an element as well as the element at index 1). An item with a
// field named "2" (a vote for option 2) made it match a parent holding
// one item, which it then closed with room, its item going to overflow.
// The guard is {comments: {$size: held}} now. Each case runs with items
// without the field "2" too, the control.
func TestAppendItemWithNumericField(t *testing.T) {
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
						Comments []comment `bson:"comments"` // their ids
						Flag     bool      `bson:"has_extra"`
					}
					require.NoError(t, r.parents.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&parent))
					n, err := r.overflow.CountDocuments(ctx, overflowFilter(id))
					require.NoError(t, err)
					t.Logf("parent holds %v, flag %v; %d overflow documents", idsOf(parent.Comments), parent.Flag, n)
					require.Equal(t, tc.want, idsOf(parent.Comments), "the item goes into the open parent, which has room")
					require.False(t, parent.Flag, "the parent, with room, stays open")
					require.Zero(t, n, "no overflow document")
				})
			}
		}
		parents++
		id := parents
		t.Run("a parent with room holding an item with a field \"2\"", func(t *testing.T) {
			_, err = r.Insert(ctx, poll{ID: id, Comments: []vote{{ID: "a"}, {ID: "b", Opt2: true}}})
			require.NoError(t, err)
			require.NoError(t, r.Append(ctx, id, vote{ID: "x"}), "no other writer: the parent, with room for one, takes x")
			var parent struct {
				Comments []comment `bson:"comments"` // their ids
			}
			require.NoError(t, r.parents.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&parent))
			require.Equal(t, []string{"a", "b", "x"}, idsOf(parent.Comments))
		})
	})
}

// TestUpdateGuardItemWithNumericField: Update of an item of a parent
// holding a vote for option 2 replaces it (update.go: "The size is
// guarded exactly ($size)"). Where the server does not check sizes the
// guard on the n items read was {"comments.<n>": {$exists: false}},
// which the field "2" of an element made match nothing: ErrConflict after
// 100 misses with no other writer.
func TestUpdateGuardItemWithNumericField(t *testing.T) {
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
