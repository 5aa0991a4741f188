package outlier

import (
	"context"
	"iter"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
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
	require.Equal(t, []string{"find", "find", "getMore", "getMore"}, cmds, "the parent, then 5 documents 2 by 2")

	cmds = counter.Count(func() { got = take(t, it, 5) })
	require.Equal(t, want[:5], got)
	require.Equal(t, []string{"find", "find", "killCursors"}, cmds, "stopping early closes the cursor")

	cmds = counter.Count(func() { got = take(t, it, 2) })
	require.Equal(t, want[:2], got)
	require.Equal(t, []string{"find"}, cmds, "stopping in the parent reads nothing more")
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
