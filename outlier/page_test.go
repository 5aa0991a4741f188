package outlier

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// pages pages through the parent's items limit at a time, through the
// text of each cursor as a client would hand it back, and returns the ids
// of each page.
func pages(t *testing.T, r *Repo[post, comment], limit int) [][]string {
	t.Helper()
	var out [][]string
	var after Cursor
	for range 100 {
		items, next, err := r.Page(context.Background(), 1, after, limit)
		require.NoError(t, err)
		require.LessOrEqual(t, len(items), limit)
		out = append(out, idsOf(items))
		if next.IsZero() {
			return out
		}
		after, err = ParseCursor(next.String())
		require.NoError(t, err)
		require.Equal(t, next, after, "the cursor's text reads back as the cursor")
	}
	t.Fatal("more than 100 pages")
	return nil
}

// TestPageWalksTheItems: pages of every size hold the items in append
// order, each once, the embedded ones and those of the overflow
// documents, a document emptied by Remove included.
func TestPageWalksTheItems(t *testing.T) {
	ctx := context.Background()
	mongotest.RunPlans(t, PlanFor, func(t *testing.T, p Plan) {
		r, _ := newPost(t, small(), p)
		require.NoError(t, r.Append(ctx, 1, comments("c", 0, 12)...)) // 3 embedded, 5 documents of 2 (the last of 1)
		require.NoError(t, r.Remove(ctx, 1, "c05"))
		require.NoError(t, r.Remove(ctx, 1, "c06")) // document 1 emptied
		_, all, err := r.Get(ctx, 1)
		require.NoError(t, err)
		want := idsOf(all)
		for _, limit := range []int{1, 2, 3, 5, len(want) - 1, len(want), len(want) + 1} {
			var got []string
			ps := pages(t, r, limit)
			for i, pg := range ps {
				if i < len(ps)-1 {
					require.Len(t, pg, limit, "limit %d: every page but the last is full", limit)
				}
				got = append(got, pg...)
			}
			require.Equal(t, want, got, "limit %d", limit)
		}
	})
}

// TestPageRoundTrips: a page within the parent is one command; a page
// whose cursor is in an overflow document is two (the parent's flag, then
// one aggregate of the items from that document on, never the parent's
// items or the documents before it), as is a page that crosses from the
// parent into overflow.
func TestPageRoundTrips(t *testing.T) {
	ctx := context.Background()
	cfg := small()
	cfg.Cap, cfg.OverflowCap = 5, 3
	r, db := newPost(t, cfg, PlanFor(mongotest.Server()))
	require.NoError(t, r.Append(ctx, 1, comments("c", 0, 35)...)) // 5 embedded, 10 documents of 3
	c := mongotest.NewCounter(t, db)

	var items []comment
	var next Cursor
	var err error
	page := func(after Cursor, limit int) []string {
		return c.Count(func() {
			items, next, err = r.Page(ctx, 1, after, limit)
			require.NoError(t, err)
		})
	}
	require.Equal(t, []string{"find"}, page(Cursor{}, 2), "within the parent")
	require.Equal(t, []string{"c00", "c01"}, idsOf(items))
	require.Equal(t, []string{"find"}, page(next, 3), "within the parent, to its last item")
	require.Equal(t, []string{"c02", "c03", "c04"}, idsOf(items))
	require.False(t, next.IsZero())
	require.Equal(t, []string{"find", "find"}, page(next, 4), "the parent, then overflow")
	require.Equal(t, []string{"c05", "c06", "c07", "c08"}, idsOf(items))
	require.Equal(t, []string{"find", "find"}, page(next, 7), "from the cursor's overflow document on")
	require.Equal(t, []string{"c09", "c10", "c11", "c12", "c13", "c14", "c15"}, idsOf(items))
	c.Reset()
	deep := next
	require.Equal(t, []string{"find", "find"}, page(deep, 19), "to the last item")
	require.Equal(t, idsOf(comments("c", 16, 35)), idsOf(items))
	require.True(t, next.IsZero(), "no page after the last")
	require.Equal(t, []string{"find", "find"}, page(deep, 18), "to the item before the last")
	require.False(t, next.IsZero())
	require.Equal(t, []string{"find", "find"}, page(next, 5))
	require.Equal(t, []string{"c34"}, idsOf(items))
	require.True(t, next.IsZero())
}

// TestPageResumes: a cursor continues after its item wherever items were
// appended or removed meanwhile; after its own item was removed, at its
// place.
func TestPageResumes(t *testing.T) {
	ctx := context.Background()
	mongotest.RunPlans(t, PlanFor, func(t *testing.T, p Plan) {
		r, _ := newPost(t, small(), p)
		require.NoError(t, r.Append(ctx, 1, comments("c", 0, 9)...)) // 3 embedded, documents [3 4] [5 6] [7 8]
		first, inParent, err := r.Page(ctx, 1, Cursor{}, 2)
		require.NoError(t, err)
		require.Equal(t, []string{"c00", "c01"}, idsOf(first))
		second, inOverflow, err := r.Page(ctx, 1, inParent, 3)
		require.NoError(t, err)
		require.Equal(t, []string{"c02", "c03", "c04"}, idsOf(second))

		require.NoError(t, r.Remove(ctx, 1, "c00")) // before the cursor, in its document
		require.NoError(t, r.Remove(ctx, 1, "c03"))
		require.NoError(t, r.Append(ctx, 1, comments("d", 0, 1)...))
		got, _, err := r.Page(ctx, 1, inParent, 3)
		require.NoError(t, err)
		require.Equal(t, []string{"c02", "c04", "c05"}, idsOf(got), "after c01, found by its id")
		got, _, err = r.Page(ctx, 1, inOverflow, 10)
		require.NoError(t, err)
		require.Equal(t, []string{"c05", "c06", "c07", "c08", "d00"}, idsOf(got), "after c04, the appended item last")

		require.NoError(t, r.Remove(ctx, 1, "c04")) // the cursor's own item
		got, _, err = r.Page(ctx, 1, inOverflow, 2)
		require.NoError(t, err)
		require.Equal(t, []string{"c05", "c06"}, idsOf(got), "at its place")
	})
}

// TestPageRefuses: bad input is patterns.ErrInvalid, a missing parent
// patterns.ErrNotFound, and nothing is sent for either of the first.
func TestPageRefuses(t *testing.T) {
	ctx := context.Background()
	r, db := newPost(t, small(), PlanFor(mongotest.Server()))
	c := mongotest.NewCounter(t, db)
	for _, limit := range []int{0, -1, 1<<20 + 1} {
		_, _, err := r.Page(ctx, 1, Cursor{}, limit)
		require.ErrorIs(t, err, patterns.ErrInvalid)
		require.ErrorContains(t, err, "outlier: Page: parent 1: limit")
	}
	_, _, err := r.Page(ctx, []int{1}, Cursor{}, 1)
	require.ErrorIs(t, err, patterns.ErrInvalid)
	require.Empty(t, c.Commands())
	_, _, err = r.Page(ctx, 2, Cursor{}, 1)
	require.ErrorIs(t, err, patterns.ErrNotFound)

	for _, text := range []string{"!", "AAAA", Cursor{seq: -2, id: rawValue(t, "a"), set: true}.String(),
		Cursor{seq: 0, index: -1, id: rawValue(t, "a"), set: true}.String(),
		Cursor{seq: 0, id: rawValue(t, []int{1}), set: true}.String()} {
		_, err := ParseCursor(text)
		require.ErrorIs(t, err, patterns.ErrInvalid, "%q", text)
		require.ErrorContains(t, err, "outlier: ParseCursor: cursor ")
	}
	zero, err := ParseCursor("")
	require.NoError(t, err)
	require.True(t, zero.IsZero())
	require.Empty(t, zero.String())
}

// TestPageOfADeletedParent: once Delete has deleted the parent, a page
// is patterns.ErrNotFound whatever its cursor, as Get is: between
// Delete's two commands (the overflow documents still there), and after
// a Delete that a concurrent Append left an overflow document behind.
// The overflow documents left are never read.
func TestPageOfADeletedParent(t *testing.T) {
	ctx := context.Background()
	mongotest.RunPlans(t, PlanFor, func(t *testing.T, p Plan) {
		r, db := newPost(t, small(), p)
		require.NoError(t, r.Append(ctx, 1, comments("c", 0, 12)...)) // 3 embedded, 5 documents of 2 (the last of 1)
		_, inParent, err := r.Page(ctx, 1, Cursor{}, 1)
		require.NoError(t, err)
		_, inOverflow, err := r.Page(ctx, 1, Cursor{}, 4)
		require.NoError(t, err)
		require.GreaterOrEqual(t, inOverflow.seq, int64(0), "a cursor in an overflow document")
		cursors := map[string]Cursor{"the start": {}, "in the parent": inParent, "in overflow": inOverflow}
		check := func(ctx context.Context, when string) {
			for name, after := range cursors {
				items, next, err := r.Page(ctx, 1, after, 5)
				require.ErrorIs(t, err, patterns.ErrNotFound, "%s, a cursor %s: %v", when, name, idsOf(items))
				require.Empty(t, items)
				require.True(t, next.IsZero())
			}
		}

		other, err := New[post, comment](mongotest.NewClient(t).Database(db.Name()), small())
		require.NoError(t, err)
		ForcePlan(other, p)
		deletes := 0
		mongotest.OnCommand(t, db, "delete", func(hook context.Context) {
			if deletes++; deletes == 2 { // the parent deleted, not yet its overflow documents
				_, _, err := other.Get(hook, 1)
				require.ErrorIs(t, err, patterns.ErrNotFound)
				for name, after := range cursors {
					_, _, err := other.Page(hook, 1, after, 5)
					require.ErrorIs(t, err, patterns.ErrNotFound, "between Delete's commands, a cursor %s", name)
				}
			}
		})
		require.NoError(t, r.Delete(ctx, 1))
		require.Equal(t, 2, deletes)

		// What an Append that read the parent before the Delete writes
		// after it: an overflow document of the deleted parent.
		_, err = r.overflow.InsertOne(ctx, overflowDoc{Parent: 1, Seq: 0, Count: 2, Items: comments("c", 3, 5)})
		require.NoError(t, err)
		check(ctx, "after Delete, an overflow document left")
	})
}

// TestPageFindsOfThinnedOverflow: a page over overflow documents that
// Remove thinned (to one item of four each, one emptied) sends at most 1 +
// log2(d) finds of the overflow for the d documents its items span, each
// asking for twice the documents of the one before, rather than a find
// per few documents; and yields every item once, in order.
func TestPageFindsOfThinnedOverflow(t *testing.T) {
	ctx := context.Background()
	mongotest.RunPlans(t, PlanFor, func(t *testing.T, p Plan) {
		cfg := small()
		cfg.Cap, cfg.OverflowCap = 3, 4
		r, db := newPost(t, cfg, p)
		const docs = 20
		require.NoError(t, r.Append(ctx, 1, comments("c", 0, 3+4*docs)...)) // 3 embedded, 20 documents of 4
		for d := range docs {
			keep := 1
			if d == 5 {
				keep = 0 // emptied
			}
			for i := keep; i < 4; i++ {
				require.NoError(t, r.Remove(ctx, 1, fmt.Sprintf("c%02d", 3+4*d+i)))
			}
		}
		_, all, err := r.Get(ctx, 1)
		require.NoError(t, err)
		want := idsOf(all)
		require.Len(t, want, 3+docs-1)
		c := mongotest.NewCounter(t, db)
		var items []comment
		var next Cursor
		sent := c.Count(func() {
			items, next, err = r.Page(ctx, 1, Cursor{}, len(want))
			require.NoError(t, err)
		})
		require.Equal(t, want, idsOf(items))
		require.True(t, next.IsZero())
		bound := 1 + int(math.Log2(docs))
		require.LessOrEqual(t, len(sent)-1, bound, "finds of the overflow: %v", sent)
		require.Equal(t, "find", sent[0], "the parent")

		_, after, err := r.Page(ctx, 1, Cursor{}, 4) // a cursor in the first document
		require.NoError(t, err)
		sent = c.Count(func() {
			items, next, err = r.Page(ctx, 1, after, len(want)-4)
			require.NoError(t, err)
		})
		require.Equal(t, want[4:], idsOf(items))
		require.LessOrEqual(t, len(sent)-1, bound, "finds of the overflow: %v", sent)
	})
}

// TestPageRefusesAnotherParentsCursor: a cursor is bound to its parent
// and its repository; on another parent (or the same parent in another
// repository) it is patterns.ErrInvalid, nothing sent, rather than a
// place that skips an item. The same parent named by an equal number of
// another type takes it.
func TestPageRefusesAnotherParentsCursor(t *testing.T) {
	ctx := context.Background()
	r, db := newPost(t, small(), PlanFor(mongotest.Server()))
	_, err := r.Insert(ctx, post{ID: 2})
	require.NoError(t, err)
	require.NoError(t, r.Append(ctx, 1, comments("a", 0, 5)...))
	require.NoError(t, r.Append(ctx, 2, comments("b", 0, 5)...))
	cfg := small()
	cfg.Parents = "articles"
	elsewhere, err := New[post, comment](db, cfg)
	require.NoError(t, err)
	require.NoError(t, patterns.EnsureIndexes(ctx, elsewhere.Indexes()...))
	_, err = elsewhere.Insert(ctx, post{ID: 1})
	require.NoError(t, err)
	require.NoError(t, elsewhere.Append(ctx, 1, comments("a", 0, 5)...))
	for _, limit := range []int{2, 4} { // a cursor in the parent, in overflow
		_, after, err := r.Page(ctx, 1, Cursor{}, limit)
		require.NoError(t, err)
		text := after.String()
		after, err = ParseCursor(text)
		require.NoError(t, err)
		c := mongotest.NewCounter(t, db)
		_, _, err = r.Page(ctx, 2, after, 3)
		require.ErrorIs(t, err, patterns.ErrInvalid, "another parent")
		require.ErrorContains(t, err, "outlier: Page: parent 2: cursor")
		_, _, err = elsewhere.Page(ctx, 1, after, 3)
		require.ErrorIs(t, err, patterns.ErrInvalid, "another repository")
		require.Empty(t, c.Commands())
		items, _, err := r.Page(ctx, 1.0, after, 1)
		require.NoError(t, err, "the parent 1.0 is the parent 1")
		require.Equal(t, []string{fmt.Sprintf("a%02d", limit)}, idsOf(items))
	}
}
