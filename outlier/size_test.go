package outlier

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/patterns"
)

// TestParentClosesWhenFullInBytes: a parent close to 16 MiB takes the
// items that fit and closes at the first that does not, which goes to
// overflow with those after it; nothing is lost and no document exceeds
// 16 MiB. (FerretDB would store the oversized parent: the portable path
// must size the push itself.)
func TestParentClosesWhenFullInBytes(t *testing.T) {
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) {
			needsMongoDB(t, path.mode, "size check (the server's)")
			ctx := context.Background()
			r, _ := newRepo(t, small(), path.mode)
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

			parent, docs := stored(t, r, 1)
			require.LessOrEqual(t, len(parent), patterns.MaxDocumentSize)
			require.Equal(t, []string{"a"}, embedded(t, parent), "the parent closed below N")
			require.True(t, parent.Lookup("has_extra").Boolean())
			var over []string
			for _, d := range docs {
				over = append(over, idsOf(d.Items)...)
			}
			require.Equal(t, []string{"b", "c", "d"}, over)
			_, items, err := r.Get(ctx, 1)
			require.NoError(t, err)
			require.Equal(t, []string{"a", "b", "c", "d"}, idsOf(items))
		})
	}
}

// TestOverflowDocumentsStayUnder16MiB: big items fill overflow documents
// by bytes before they reach M items.
func TestOverflowDocumentsStayUnder16MiB(t *testing.T) {
	ctx := context.Background()
	cfg := small()
	cfg.Threshold, cfg.PerOverflow = 1, 10
	r, _ := newRepo(t, cfg, modePortable)
	_, err := r.Insert(ctx, post{ID: 1})
	require.NoError(t, err)
	big := strings.Repeat("x", 6<<20)
	require.NoError(t, r.Append(ctx, 1, comment{ID: "p"}, comment{ID: "a", Text: big}, comment{ID: "b", Text: big}))
	require.NoError(t, r.Append(ctx, 1, comment{ID: "c", Text: big}, comment{ID: "d"}))

	_, docs := stored(t, r, 1)
	require.Equal(t, []int{2, 2}, counts(docs), "two 6 MiB items per document, the third opens the next")
	for _, d := range docs {
		raw, err := r.overflow.FindOne(ctx, bson.D{{Key: fSeq, Value: d.Seq}}).Raw()
		require.NoError(t, err)
		require.LessOrEqual(t, len(raw), patterns.MaxDocumentSize)
		require.LessOrEqual(t, len(raw)-d.Bytes, 100, "bytes accounts for the items")
	}
	_, items, err := r.Get(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, []string{"p", "a", "b", "c", "d"}, idsOf(items))
}
