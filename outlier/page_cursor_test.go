package outlier

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// TestPageCursorOfAnotherRepositoryOnTheSameParents: Page's godoc
// (outlier/page.go:63): "A cursor is bound to its parent and repository:
// on another parent ..., or in another repository, it is
// [patterns.ErrInvalid], with nothing sent." Two repositories over the
// same parents collection (two arrays of one parent document: comments
// and likes, each with its own overflow collection) are two repositories,
// but pagetoken.Scope binds the cursor to the database, the parents
// collection and the parent id only: a cursor of one is taken by the
// other, as a place in the wrong list.
func TestPageCursorOfAnotherRepositoryOnTheSameParents(t *testing.T) {
	ctx := context.Background()
	r, db := newPost(t, small(), PlanFor(mongotest.Server()))
	require.NoError(t, r.Append(ctx, 1, comments("a", 0, 6)...))
	cfg := Config{Parents: "posts", Field: "likes", Cap: 3, OverflowCap: 2, Overflow: "likes_overflow", FlagField: "likes_extra", TailField: "likes_tail"}
	likes, err := New[post, comment](db, cfg)
	require.NoError(t, err)
	require.NoError(t, patterns.EnsureIndexes(ctx, likes.Indexes()...))
	require.NoError(t, likes.Append(ctx, 1, comments("l", 0, 6)...))
	for _, limit := range []int{2, 4} { // a cursor in the parent, in overflow
		_, after, err := r.Page(ctx, 1, Cursor{}, limit)
		require.NoError(t, err)
		c := mongotest.NewCounter(t, db)
		items, _, err := likes.Page(ctx, 1, after, 3)
		require.ErrorIs(t, err, patterns.ErrInvalid, "limit %d: a comments cursor in the likes repository gave %v", limit, idsOf(items))
		require.Empty(t, c.Commands())
	}
}

// TestAttackPageFindsAtTheEnd: Page's godoc (outlier/page.go:30-33): "a
// page that starts in the parent ... When the page runs past the parent's
// items into overflow, 1 find more", and (page.go:46-49) "a page whose
// overflow items, and the item after them, lie in d documents sends at
// most 1 + log2(d) finds of the overflow". No Remove here: the last
// overflow document simply holds fewer than OverflowCap items, as every
// tail does. A page that ends exactly at the parent's last item reads
// one overflow document (d = 1) and yet sends a second, empty find.
func TestPageFindsAtTheEnd(t *testing.T) {
	ctx := context.Background()
	r, db := newPost(t, small(), PlanFor(mongotest.Server()))    // Cap 3, OverflowCap 2
	require.NoError(t, r.Append(ctx, 1, comments("c", 0, 4)...)) // 3 embedded, document 0 holds c03
	c := mongotest.NewCounter(t, db)
	var items []comment
	var next Cursor
	sent := c.Count(func() {
		var err error
		items, next, err = r.Page(ctx, 1, Cursor{}, 4)
		require.NoError(t, err)
	})
	require.Equal(t, []string{"c00", "c01", "c02", "c03"}, idsOf(items))
	require.True(t, next.IsZero())
	// The bound the godoc now gives: 2 + log2(d) finds of the overflow,
	// the last finding nothing when the page ends where the items do.
	bound := 2 + int(math.Log2(1))
	require.Equal(t, []string{"find", "find", "find"}, sent, "the parent, then %d finds of the overflow", bound)
}

// TestPageSymbolParent: Page's godoc: "on another parent (the
// parent 7 and the parent 7.0 are one) ... ErrInvalid". ValidateID
// accepts symbols as ids, and the server's equality takes the string
// "p" and the symbol "p" as one _id (manual, Comparison/Sort Order:
// strings and symbols compare as one type; canonicalizeBSONType). A
// cursor read on the parent "p" is refused on the same parent named by
// the symbol "p". (FerretDB 1.x stores no symbol.)
func TestPageSymbolParent(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	type sp struct {
		ID any `bson:"_id"`
	}
	r, err := New[sp, comment](db, small())
	require.NoError(t, err)
	require.NoError(t, patterns.EnsureIndexes(ctx, r.Indexes()...))
	if _, err := r.Insert(ctx, sp{ID: "p"}); err != nil {
		t.Fatal(err)
	}
	require.NoError(t, r.Append(ctx, "p", comments("c", 0, 6)...))
	// A server that stores no symbol (FerretDB 1.x) answers a filter with
	// one by closing the connection after two minutes: ask it to store one
	// first, which it refuses at once.
	if _, err := db.Collection("symbols").InsertOne(ctx, bson.D{{Key: "_id", Value: bson.Symbol("p")}}); err != nil {
		t.Skipf("the server stores no symbol: %v", err)
	}
	// the server finds the parent by the symbol
	n, err := db.Collection("posts").CountDocuments(ctx, bson.D{{Key: "_id", Value: bson.Symbol("p")}})
	if err != nil || n != 1 {
		t.Skipf("the server does not match the string _id by a symbol: %v %v", n, err)
	}
	_, after, err := r.Page(ctx, "p", Cursor{}, 2)
	require.NoError(t, err)
	items, _, err := r.Page(ctx, bson.Symbol("p"), after, 2)
	require.NoError(t, err, "the parent \"p\" named by a symbol is the same parent")
	require.Equal(t, []string{"c02", "c03"}, idsOf(items))
}
