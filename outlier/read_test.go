package outlier

import (
	"context"
	"fmt"
	"iter"
	"testing"

	"github.com/stretchr/testify/require"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

func TestItemsStreams(t *testing.T) {
	ctx := context.Background()
	cfg := small()
	cfg.BatchSize = 2 // overflow documents per round trip: 4 items
	r, db := newPost(t, cfg, PlanFor(mongotest.Portable()))
	want := comments("c", 0, 13) // 3 embedded, 10 in 5 overflow documents
	require.NoError(t, r.Append(ctx, 1, want...))
	counter := mongotest.NewCounter(t, db)

	it := r.Items(ctx, 1)
	require.Empty(t, counter.Commands(), "building the iterator sends nothing")
	var got []comment
	cmds := counter.Count(func() { got = take(t, it, -1) })
	require.Equal(t, want, got)
	require.Equal(t, []string{"find", "find", "getMore", "getMore"}, cmds,
		"the parent, then one cursor over the documents: [0 2) in the find's reply, [2 4) and 4 in getMores")

	cmds = counter.Count(func() { got = take(t, it, 5) })
	require.Equal(t, want[:5], got)
	require.Equal(t, []string{"find", "find", "killCursors"}, cmds, "stopping early closes the cursor")

	cmds = counter.Count(func() { got = take(t, it, 2) })
	require.Equal(t, want[:2], got)
	require.Equal(t, []string{"find"}, cmds, "stopping in the parent reads nothing more")

	// A gap in the seqs (an Append cut short between announcing a
	// document and writing it, then a later one writing past it): the
	// documents after it are read all the same.
	for _, move := range [][2]int64{{4, 9}, {3, 6}} { // seqs 0, 1, 2, 6, 9
		_, err := r.overflow.UpdateOne(ctx, bson.D{{Key: fParent, Value: 1}, {Key: fSeq, Value: move[0]}},
			bson.D{{Key: "$set", Value: bson.D{{Key: fSeq, Value: move[1]}}}})
		require.NoError(t, err)
	}
	cmds = counter.Count(func() { got = take(t, it, -1) })
	require.Equal(t, want, got)
	require.Equal(t, []string{"find", "find", "getMore", "getMore"}, cmds)
}

// take ranges over it and returns its first k items (all when k < 0).
func take(t *testing.T, it iter.Seq2[comment, error], k int) []comment {
	t.Helper()
	var out []comment
	for c, err := range it {
		require.NoError(t, err)
		if out = append(out, c); len(out) == k {
			break
		}
	}
	return out
}

// TestEmbeddedField: Get takes the embedded items from the field of P
// that the decoder fills with them, found by asking the decoder, and
// decodes them itself when P has none.
func TestEmbeddedField(t *testing.T) {
	type tagged struct {
		Comments []comment `bson:"comments"`
	}
	type untagged struct{ Comments []comment } // the driver lowercases: "comments"
	type other struct {
		Comments []comment `bson:"notes"`
	}
	type raws struct {
		Comments []bson.Raw `bson:"comments"`
	}
	type Base struct {
		Comments []comment `bson:"comments"`
	}
	type inline struct {
		Base  `bson:",inline"`
		Title string `bson:"title"`
	}
	require.Equal(t, []int{0}, embeddedField[tagged, comment]("comments"))
	require.Equal(t, []int{0}, embeddedField[*tagged, comment]("comments"))
	require.Equal(t, []int{0}, embeddedField[untagged, comment]("comments"))
	require.Equal(t, []int{0, 0}, embeddedField[inline, comment]("comments"))
	require.Nil(t, embeddedField[other, comment]("comments"))
	require.Nil(t, embeddedField[raws, comment]("comments"), "another type: decoded apart")
	require.Nil(t, embeddedField[post, comment]("comments"))
	require.Nil(t, embeddedField[bson.Raw, comment]("comments"))
	require.Nil(t, embeddedField[bson.M, comment]("comments"))
}

// TestGetEmbeddedOnce: P's field and the returned items hold the same
// embedded items, but not the same memory.
func TestGetEmbeddedOnce(t *testing.T) {
	ctx := context.Background()
	type withComments struct {
		ID       int       `bson:"_id"`
		Comments []comment `bson:"comments"`
	}
	for _, name := range []string{"struct", "pointer"} {
		t.Run(name, func(t *testing.T) {
			db := mongotest.DB(t)
			check := func(p *withComments, items []comment, err error) {
				require.NoError(t, err)
				require.Equal(t, []string{"c00", "c01", "c02"}, idsOf(p.Comments))
				require.Equal(t, idsOf(comments("c", 0, 5)), idsOf(items))
				items[0].Text = "changed"
				require.Empty(t, p.Comments[0].Text)
			}
			if name == "struct" {
				r, err := New[withComments, comment](db, small())
				require.NoError(t, err)
				require.NoError(t, patterns.EnsureIndexes(ctx, r.Indexes()...))
				_, err = r.Insert(ctx, withComments{ID: 1})
				require.NoError(t, err)
				require.NoError(t, r.Append(ctx, 1, comments("c", 0, 5)...))
				p, items, err := r.Get(ctx, 1)
				check(&p, items, err)
				return
			}
			r, err := New[*withComments, comment](db, small())
			require.NoError(t, err)
			require.NoError(t, patterns.EnsureIndexes(ctx, r.Indexes()...))
			_, err = r.Insert(ctx, &withComments{ID: 1})
			require.NoError(t, err)
			require.NoError(t, r.Append(ctx, 1, comments("c", 0, 5)...))
			p, items, err := r.Get(ctx, 1)
			check(p, items, err)
		})
	}
}

// TestItemsOnceWhileOthersWrite: while Items reads the overflow one
// document per round trip, another client removes an item Items has
// already yielded (rewriting a document it has read), appends a new one
// and rewrites every overflow document before each of its reads. Items yields each item once, in append
// order, and every item that was there before it began and was not
// removed before Items reached it. FerretDB 2.x's cursors return a
// rewritten document again in a later batch (issue 19, item 3): Items
// skips a document whose seq it has passed.
func TestItemsOnceWhileOthersWrite(t *testing.T) {
	mongotest.RunPlans(t, PlanFor, func(t *testing.T, p Plan) {
		ctx := context.Background()
		cfg := small()
		cfg.BatchSize = 1
		r, db := newPost(t, cfg, p)
		before := comments("c", 0, 23) // 3 embedded, 20 in 10 overflow documents
		require.NoError(t, r.Append(ctx, 1, before...))
		other, err := New[post, comment](mongotest.NewClient(t).Database(db.Name()), cfg)
		require.NoError(t, err)
		ForcePlan(other, p)

		var seen []string
		removed := map[string]bool{}
		added := 0
		write := func(hook context.Context) {
			for i := len(seen) - 1; i >= 3; i-- { // an overflow item already yielded
				if !removed[seen[i]] {
					removed[seen[i]] = true
					require.NoError(t, other.Remove(hook, 1, seen[i]))
					break
				}
			}
			require.NoError(t, other.Append(hook, 1, comment{ID: fmt.Sprintf("n%02d", added)}))
			added++
			// Every overflow document rewritten, those ahead of the scan too.
			_, err := other.overflow.UpdateMany(hook, bson.D{{Key: fParent, Value: 1}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "touched", Value: 1}}}})
			require.NoError(t, err)
		}
		mongotest.OnCommand(t, db, "getMore", write)
		mongotest.OnCommand(t, db, "find", func(hook context.Context) {
			if len(seen) > 3 { // a read of the overflow after the first
				write(hook)
			}
		})
		for c, err := range r.Items(ctx, 1) {
			require.NoError(t, err)
			seen = append(seen, c.ID)
		}
		mongotest.Detail(t, "%d items seen, %d removed and %d appended during the scan", len(seen), len(removed), added)
		require.Positive(t, added)

		once := map[string]bool{}
		for _, id := range seen {
			require.False(t, once[id], "%s yielded twice", id)
			once[id] = true
		}
		for _, c := range before {
			require.True(t, once[c.ID], "%s, there before the scan, not yielded", c.ID)
		}
		_, all, err := r.Get(ctx, 1)
		require.NoError(t, err)
		order := map[string]int{}
		for i, c := range all {
			order[c.ID] = i
		}
		last := -1
		for _, id := range seen {
			if removed[id] {
				continue
			}
			require.Greater(t, order[id], last, "%s out of append order", id)
			last = order[id]
		}
	})
}

// TestItemsOnceWhileRewritten: Items yields each item once, in order,
// while the overflow documents it reads are rewritten under it (each
// item is edited as it is yielded, so every document it has read is
// rewritten before its next batch). FerretDB 2.x's cursor returns a
// rewritten document again in a later batch; Items skips a document whose
// seq it has passed.
func TestItemsOnceWhileRewritten(t *testing.T) {
	ctx := context.Background()
	mongotest.RunPlans(t, PlanFor, func(t *testing.T, p Plan) {
		cfg := small()
		cfg.OverflowCap, cfg.BatchSize = 4, 2
		r, _ := newPost(t, cfg, p)
		want := comments("c", 0, mongotest.Scale(200, 23))
		require.NoError(t, r.Append(ctx, 1, want...))
		var got []string
		for c, err := range r.Items(ctx, 1) {
			require.NoError(t, err)
			got = append(got, c.ID)
			require.NoError(t, r.Update(ctx, 1, comment{ID: c.ID, Text: "edited while read"}))
		}
		require.Equal(t, idsOf(want), got)
	})
}
