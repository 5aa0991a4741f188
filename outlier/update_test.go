package outlier

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// TestUpdate: Update replaces an item in the parent and one in an
// overflow document in place (1 or 2, and 3 commands), sends no write
// for an item stored as given, keeps each overflow document's count and its
// bytes equal to its items', and finds no item it does not hold.
func TestUpdate(t *testing.T) {
	ctx := context.Background()
	appendPlans(t, func(t *testing.T, p Plan) {
		r, db := newPost(t, small(), p)
		require.NoError(t, r.Append(ctx, 1, comments("c", 0, 6)...)) // 3 embedded, [3 4] [5]
		c := mongotest.NewCounter(t, db)

		// With arrayFilters, the parent's update by id comes first; without,
		// a read of the parent.
		first := "find"
		if p.arrayFilters {
			first = "update"
		}
		cmds := c.Count(func() { require.NoError(t, r.Update(ctx, 1, comment{ID: "c01", Text: "edited"})) })
		if p.arrayFilters {
			require.Equal(t, []string{"update"}, cmds, "in the parent")
		} else {
			require.Equal(t, []string{"find", "update"}, cmds, "in the parent")
		}
		cmds = c.Count(func() { require.NoError(t, r.Update(ctx, 1, comment{ID: "c00"})) })
		if p.arrayFilters {
			require.Equal(t, []string{"update", "find"}, cmds, "stored as given in the parent: the update matches nothing, the read says why")
		} else {
			require.Equal(t, []string{"find"}, cmds, "stored as given in the parent: no write")
		}
		cmds = c.Count(func() { require.NoError(t, r.Update(ctx, 1, comment{ID: "c04", Text: "edited, longer"})) })
		require.Equal(t, []string{first, "find", "update"}, cmds, "in overflow")
		cmds = c.Count(func() { require.NoError(t, r.Update(ctx, 1, comment{ID: "c03", Text: ""})) })
		require.Equal(t, []string{first, "find"}, cmds, "stored as given in overflow: no write there")
		require.NoError(t, r.Update(ctx, 1, comment{ID: "c04", Text: "short"})) // shrinks

		_, items, err := r.Get(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, []comment{{ID: "c00"}, {ID: "c01", Text: "edited"}, {ID: "c02"}, {ID: "c03"},
			{ID: "c04", Text: "short"}, {ID: "c05"}}, items, "in place, in append order")
		_, docs := stored(t, r, 1)
		for _, d := range docs {
			require.Equal(t, len(d.Items), d.Count)
			require.Equal(t, itemBytes(t, r.cfg, d.Items), d.Bytes, "seq %d: bytes follow the items' size", d.Seq)
		}

		for _, tc := range []struct {
			parent any
			item   comment
		}{{1, comment{ID: "nope"}}, {2, comment{ID: "c01"}}} {
			err := r.Update(ctx, tc.parent, tc.item)
			require.ErrorIs(t, err, patterns.ErrNotFound)
		}
		_, again, err := r.Get(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, items, again, "nothing changed")
	})
}

// TestUpdateNotOverflowed: an id the open parent does not hold is
// patterns.ErrNotFound, after one read where Update reads the parent
// first; with arrayFilters, after the update by id (which matches nothing
// on a parent whose flag is false: no overflow to look in) and the read
// of the parent that tells a missing item from a missing parent.
func TestUpdateNotOverflowed(t *testing.T) {
	ctx := context.Background()
	mongotest.RunPlans(t, PlanFor, func(t *testing.T, p Plan) {
		r, db := newPost(t, small(), p)
		require.NoError(t, r.Append(ctx, 1, comments("c", 0, 2)...))
		c := mongotest.NewCounter(t, db)
		cmds := c.Count(func() {
			err := r.Update(ctx, 1, comment{ID: "c05"})
			require.ErrorIs(t, err, patterns.ErrNotFound)
			require.ErrorContains(t, err, `outlier: Update: parent 1: item "c05": no such item`)
			err = r.Update(ctx, 2, comment{ID: "c05"})
			require.ErrorContains(t, err, `outlier: Update: parent 2: no such parent`)
		})
		if p.arrayFilters {
			require.Equal(t, []string{"update", "find", "update", "find"}, cmds)
		} else {
			require.Equal(t, []string{"find", "find"}, cmds)
		}
	})
}

// TestUpdateRefuses: bad input is patterns.ErrInvalid and an item that
// would take its overflow document past the bytes it may hold is
// patterns.ErrTooLarge, before anything is written.
func TestUpdateRefuses(t *testing.T) {
	ctx := context.Background()
	r, _ := newPost(t, small(), PlanFor(mongotest.Server()))
	require.NoError(t, r.Append(ctx, 1, comments("c", 0, 5)...))
	for _, tc := range []struct {
		parent any
		item   comment
	}{{[]int{1}, comment{ID: "c01"}}, {1, comment{ID: ""}}} {
		require.ErrorIs(t, r.Update(ctx, tc.parent, tc.item), patterns.ErrInvalid)
	}
	huge := comment{ID: "c01", Text: strings.Repeat("x", patterns.MaxDocumentSize)}
	require.ErrorIs(t, r.Update(ctx, 1, huge), patterns.ErrTooLarge, "no document can hold it")

	// Overflow document 0 holds c03 and c04, and its bytes say it is 12
	// bytes short of full.
	budget := overflowBudget(must(encodeID(1)))
	_, err := r.overflow.UpdateOne(ctx, bson.D{{Key: fParent, Value: 1}, {Key: fSeq, Value: int64(0)}},
		bson.D{{Key: "$set", Value: bson.D{{Key: fBytes, Value: int64(budget - 12)}}}})
	require.NoError(t, err)
	before, docs := stored(t, r, 1)
	// A text field adds its type, name, length and NUL: 11 bytes and its text.
	err = r.Update(ctx, 1, comment{ID: "c04", Text: "xx"})
	require.ErrorIs(t, err, patterns.ErrTooLarge)
	require.ErrorContains(t, err, "overflow document 0 has room for 12 more bytes")
	require.NoError(t, r.Update(ctx, 1, comment{ID: "c04", Text: "x"}), "12 more bytes fit")
	require.NoError(t, r.Update(ctx, 1, comment{ID: "c04"}))
	after, docsAfter := stored(t, r, 1)
	require.Equal(t, before, after)
	require.Equal(t, docs, docsAfter, "untouched, bytes back where they were")
}

// TestUpdateParentPast16MiB: an item that would take the parent past 16
// MiB is patterns.ErrTooLarge, the parent untouched: the server refuses
// it, or, on the portable plan, Update counts. (The parent is written
// directly and read back without its title: each 16 MiB read or write
// costs seconds on the embedded server.)
func TestUpdateParentPast16MiB(t *testing.T) {
	ctx := context.Background()
	mongotest.RunPlans(t, PlanFor, func(t *testing.T, p Plan) {
		r, _ := newRepo(t, small(), p)
		_, err := r.parents.InsertOne(ctx, bson.D{
			{Key: "_id", Value: 1}, {Key: "title", Value: strings.Repeat("t", patterns.MaxDocumentSize-(100<<10))},
			{Key: "comments", Value: bson.A{comment{ID: "a"}}}, {Key: "has_extra", Value: false}, {Key: "extra_tail", Value: int64(0)},
		})
		require.NoError(t, err)
		err = r.Update(ctx, 1, comment{ID: "a", Text: strings.Repeat("x", 200<<10)})
		require.ErrorIs(t, err, patterns.ErrTooLarge)
		items := take(t, r.Items(ctx, 1), -1) // the array and the flag only
		require.Equal(t, []comment{{ID: "a"}}, items, "untouched")
	})
}

// TestUpdateOverflowItemOfEmptiedParent: an Update of an item in overflow
// when Remove has emptied the closed parent's array. Found by the soak of
// TestHistories on FerretDB 2.7 (native plan, seed
// 10591309083278278361: a Page at rest met "item 0 of the parent is a
// BSON null, not a document"). Update's first command, {$set:
// {comments.$[e]: item}} with arrayFilters [{e._id: id}], matched the
// closed parent by its flag; on an empty array FerretDB 2.7 writes [null]
// and answers nModified 1 (MongoDB modifies nothing: no element matches
// the filter), so Update returned nil without touching the overflow item
// and left a null that Get and Page cannot decode.
//
// Promises: Update godoc, "3 for one in overflow (that update, matching
// the parent by its flag and changing nothing ...)", "Each write is
// atomic", the item replaced "wherever it lives"; Page and Get decode every
// item.
func TestUpdateOverflowItemOfEmptiedParent(t *testing.T) {
	ctx := context.Background()
	appendPlans(t, func(t *testing.T, p Plan) {
		r, db := newPost(t, small(), p)
		require.NoError(t, r.Append(ctx, 1, comments("c", 0, 4)...)) // 3 embedded, [3]
		for _, id := range []string{"c00", "c01", "c02"} {
			require.NoError(t, r.Remove(ctx, 1, id))
		}
		c := mongotest.NewCounter(t, db)
		cmds := c.Count(func() { require.NoError(t, r.Update(ctx, 1, comment{ID: "c03", Text: "edited"})) })
		t.Logf("sent %v", cmds)
		if p.arrayFilters {
			require.Equal(t, []string{"update", "find", "find", "update"}, cmds,
				"the update by id matches nothing on an empty array: a read of the parent says to look in overflow")
		} else {
			require.Equal(t, []string{"find", "find", "update"}, cmds)
		}

		var parent bson.Raw
		require.NoError(t, r.parents.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&parent))
		arr, ok := parent.Lookup("comments").ArrayOK()
		require.True(t, ok, "%s", parent)
		vals, err := arr.Values()
		require.NoError(t, err)
		require.Empty(t, vals, "the parent's array stays empty: %s", parent)
		_, items, err := r.Get(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, []comment{{ID: "c03", Text: "edited"}}, items)
		page, _, err := r.Page(ctx, 1, Cursor{}, 3)
		require.NoError(t, err)
		require.Equal(t, items, page)
	})
}
