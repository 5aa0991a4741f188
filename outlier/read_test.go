package outlier

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
)

func TestItemsStreams(t *testing.T) {
	ctx := context.Background()
	cfg := small()
	cfg.BatchSize = 2 // overflow documents per round trip: 4 items
	r, db := newRepo(t, cfg, modePortable)
	_, err := r.Insert(ctx, post{ID: 1})
	require.NoError(t, err)
	want := comments("c", 0, 13) // 3 embedded, 10 in 5 overflow documents
	require.NoError(t, r.Append(ctx, 1, want...))
	counter := mongotest.NewCounter(t, db)

	it := r.Items(ctx, 1)
	require.Empty(t, counter.Commands(), "building the iterator sends nothing")
	var got []comment
	cmds := counter.Count(func() {
		for c, err := range it {
			require.NoError(t, err)
			got = append(got, c)
		}
	})
	require.Equal(t, want, got)
	require.Equal(t, []string{"find", "find", "getMore", "getMore"}, cmds, "the parent, then 5 documents 2 by 2")

	got = got[:0]
	cmds = counter.Count(func() {
		for c, err := range it {
			require.NoError(t, err)
			if got = append(got, c); len(got) == 5 {
				break
			}
		}
	})
	require.Equal(t, want[:5], got)
	require.Equal(t, []string{"find", "find", "killCursors"}, cmds, "stopping early closes the cursor")

	got = got[:0]
	cmds = counter.Count(func() {
		for c, err := range it {
			require.NoError(t, err)
			if got = append(got, c); len(got) == 2 {
				break
			}
		}
	})
	require.Equal(t, want[:2], got)
	require.Equal(t, []string{"find"}, cmds, "stopping in the parent reads nothing more")
}
