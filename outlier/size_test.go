package outlier

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// TestParentClosesWhenFullInBytes: a parent close to 16 MiB takes the
// items that fit and closes at the first that does not, which goes to
// overflow with those after it; nothing is lost and no document exceeds
// 16 MiB. (FerretDB would store the oversized parent: the portable path
// must size the push itself.)
func TestParentClosesWhenFullInBytes(t *testing.T) {
	mongotest.RunPlans(t, PlanFor, func(t *testing.T, p Plan) {
		ctx := context.Background()
		r, _ := newRepo(t, small(), p)
		const room = 100 << 10
		_, err := r.Insert(ctx, post{ID: 1, Title: strings.Repeat("t", patterns.MaxDocumentSize-room)})
		require.NoError(t, err)

		text := func(kb int) string { return strings.Repeat("x", kb<<10) }
		require.NoError(t, r.Append(ctx, 1,
			comment{ID: "a", Text: text(40)},
			comment{ID: "b", Text: text(70)}, // does not fit after a
			comment{ID: "c", Text: text(1)},  // would fit, but comes after b
		))
		require.NoError(t, r.Append(ctx, 1, comment{ID: "d", Text: text(1)}))

		parent, docs := stored(t, r, 1) // the one read of the big parent
		require.LessOrEqual(t, len(parent), patterns.MaxDocumentSize)
		require.Equal(t, []string{"a"}, embedded(t, parent), "the parent closed below N")
		require.True(t, parent.Lookup("has_extra").Boolean())
		var over []string
		for _, d := range docs {
			over = append(over, idsOf(d.Items)...)
		}
		require.Equal(t, []string{"b", "c", "d"}, over)
		require.Equal(t, []string{"a", "b", "c", "d"}, idsOf(take(t, r.Items(ctx, 1), -1)), "Items reads the parent's array, not its title")
	})
}

// TestOverflowDocumentsStayUnder16MiB: big items fill overflow documents
// by bytes before they reach M items.
func TestOverflowDocumentsStayUnder16MiB(t *testing.T) {
	ctx := context.Background()
	cfg := small()
	cfg.Cap, cfg.OverflowCap = 1, 10
	r, _ := newPost(t, cfg, PlanFor(mongotest.Portable()))
	big := strings.Repeat("x", 6<<20)
	require.NoError(t, r.Append(ctx, 1, comment{ID: "p"}, comment{ID: "a", Text: big}, comment{ID: "b", Text: big}))
	require.NoError(t, r.Append(ctx, 1, comment{ID: "c", Text: big}, comment{ID: "d"}))

	cur, err := r.overflow.Find(ctx, bson.D{}, options.Find().SetSort(overflowOrder))
	require.NoError(t, err)
	var order []string
	for cur.Next(ctx) {
		require.LessOrEqual(t, len(cur.Current), patterns.MaxDocumentSize)
		var d overflowDoc
		require.NoError(t, cur.Decode(&d))
		require.Equal(t, 2, d.Count, "two 6 MiB items per document, the third opens the next")
		require.LessOrEqual(t, len(cur.Current)-d.Bytes, 100, "bytes accounts for the items")
		order = append(order, idsOf(d.Items)...)
	}
	require.NoError(t, cur.Err())
	require.Equal(t, []string{"a", "b", "c", "d"}, order)
	n, err := r.Count(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, 5, n)
}
