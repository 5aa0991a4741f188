package outlier

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
)

// hotConfig is the viral post of issue 19: 20 comments embedded, 40 per
// overflow document.
var hotConfig = Config{Parents: "posts", Field: "comments", Cap: 20, OverflowCap: 40}

// hotBatch is how many comments each Append of the hot-parent benchmark
// and test carries.
const hotBatch = 3

// appendHot appends each writers' share of n comments (writer w's are
// hw<w>-<i>, i counting from 0) to post id through repos (writer w uses
// repos[w%len(repos)]), hotBatch at a time, all writers at once, and
// returns how long it took and the errors the writers met.
func appendHot(ctx context.Context, repos []*Repo[post, comment], id, writers, n int) (time.Duration, []error) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []error
	start := time.Now()
	for w := range writers {
		wg.Go(func() {
			mine := comments(fmt.Sprintf("hw%d-", w), 0, n/writers)
			for i := 0; i < len(mine); i += hotBatch {
				if err := repos[w%len(repos)].Append(ctx, id, mine[i:min(i+hotBatch, len(mine))]...); err != nil {
					mu.Lock()
					failed = append(failed, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start), failed
}

// requireHot checks post id after appendHot: no writer met an error,
// the post holds n comments, each once, and each writer's in the order
// it appended them.
func requireHot(t testing.TB, r *Repo[post, comment], id, writers, n int, failed []error) {
	t.Helper()
	require.Empty(t, failed, "no error reaches a caller")
	var items []comment
	for c, err := range r.Items(context.Background(), id) {
		require.NoError(t, err)
		items = append(items, c)
	}
	require.Len(t, items, n, "every comment is stored")
	requireEachOnceInOrder(t, items, writers, "hw%d-%d")
}

// requireEachOnceInOrder checks that items, whose ids read format
// (writer, index), hold each id once, and each writer's items in the
// order of their indexes, from 0 and without a gap.
func requireEachOnceInOrder(t testing.TB, items []comment, writers int, format string) {
	t.Helper()
	seen := map[string]bool{}
	next := make([]int, writers) // the index each writer's next item must have
	for _, c := range items {
		require.False(t, seen[c.ID], "%s twice", c.ID)
		seen[c.ID] = true
		var w, i int
		_, err := fmt.Sscanf(c.ID, format, &w, &i)
		require.NoError(t, err)
		require.Equal(t, next[w], i, "writer %d's items out of order", w)
		next[w]++
	}
}

// BenchmarkHotParent appends about b.N comments, in Appends of 3, to one
// post (Cap 20, OverflowCap 40: most go to overflow documents) from one
// writer, then as many to another post from 8 writers at once through
// one repository, on the server's own plan, and reports the throughput
// of each (items/s) and their ratio, hot-x: the goal is at least half of
// one writer's with 8. "two-repos" has the 8 writers share two
// repositories, as two processes would, where only the server's guards
// keep them apart. Every Append must succeed (no error reaches the
// caller), and afterwards each post holds each of its comments once, in
// each writer's order.
func BenchmarkHotParent(b *testing.B) {
	for _, bc := range []struct {
		name  string
		repos int
	}{{"one-repo", 1}, {"two-repos", 2}} {
		b.Run(bc.name, func(b *testing.B) {
			const writers = 8
			ctx := context.Background()
			n := max(b.N, writers*hotBatch)
			n -= n % (writers * hotBatch) // every Append carries hotBatch
			b.StopTimer()
			r, db := newRepo(b, hotConfig, PlanFor(mongotest.Server()))
			repos := []*Repo[post, comment]{r}
			for len(repos) < bc.repos {
				other, err := New[post, comment](db, hotConfig)
				require.NoError(b, err)
				ForcePlan(other, PlanFor(mongotest.Server()))
				repos = append(repos, other)
			}
			for _, id := range []int{1, 2} {
				_, err := r.Insert(ctx, post{ID: id})
				require.NoError(b, err)
			}
			b.StartTimer()
			one, failed := appendHot(ctx, repos[:1], 1, 1, n)
			requireHot(b, r, 1, 1, n, failed)
			many, failed := appendHot(ctx, repos, 2, writers, n)
			b.StopTimer()
			requireHot(b, r, 2, writers, n, failed)
			b.ReportMetric(float64(n)/one.Seconds(), "one-items/s")
			b.ReportMetric(float64(n)/many.Seconds(), "eight-items/s")
			b.ReportMetric(one.Seconds()/many.Seconds(), "hot-x")
			b.ReportMetric(0.5, "hot-goal-x")
		})
	}
}
