package outlier

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// TestConcurrentAppend is the acceptance test of the issue: 8 goroutines
// append 40 items each (20 on a slow server: the parent still fills and
// several overflow documents too) to one parent with N=50 and M=20. Every item comes
// out once, each goroutine's in its own order; the parent holds 50, no
// overflow document more than 20, and the flag is true. It runs with one
// item per call and with batches of 5 (a batch may straddle the parent and
// several overflow documents). The writers share two repositories, as two
// processes would: a repository runs its own Appends to one parent one at
// a time on the portable plan, and between the two the guards decide.
func TestConcurrentAppend(t *testing.T) {
	const writers = 8
	each := mongotest.Scale(40, 20) // a multiple of the batches
	appendPlans(t, func(t *testing.T, p Plan) {
		for _, batch := range []int{1, 5} {
			t.Run(fmt.Sprintf("batch%d", batch), func(t *testing.T) {
				ctx := context.Background()
				cfg := Config{Parents: "posts", Field: "comments", Cap: 50, OverflowCap: 20}
				r, db := newPost(t, cfg, p)
				other, err := New[post, comment](db, cfg)
				require.NoError(t, err)
				ForcePlan(other, p)
				repos := []*Repo[post, comment]{r, other}
				counter := mongotest.NewCounter(t, db)

				var wg sync.WaitGroup
				errs := make(chan error, writers*each)
				for w := range writers {
					wg.Go(func() {
						mine := comments(fmt.Sprintf("w%d-", w), 0, each)
						for i := 0; i < each; i += batch {
							if err := repos[w%2].Append(ctx, 1, mine[i:i+batch]...); err != nil {
								errs <- err
							}
						}
					})
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					require.NoError(t, err)
				}
				mongotest.Detail(t, "%d commands for %d items", counter.N(), writers*each)

				_, items, err := r.Get(ctx, 1)
				require.NoError(t, err)
				require.Len(t, items, writers*each)
				requireEachOnceInOrder(t, items, writers, "w%d-%d")

				parent, docs := stored(t, r, 1)
				require.Len(t, embedded(t, parent), 50, "the parent holds N")
				require.True(t, parent.Lookup("has_extra").Boolean(), "the flag is true")
				total := 0
				for i, d := range docs {
					require.Equal(t, int64(i), d.Seq, "seqs are contiguous")
					require.Equal(t, len(d.Items), d.Count)
					require.LessOrEqual(t, d.Count, 20, "no overflow document holds more than M")
					if i < len(docs)-1 {
						require.Equal(t, 20, d.Count, "documents fill in seq order")
					}
					total += d.Count
				}
				require.Equal(t, writers*each-50, total)
				require.Equal(t, int64(len(docs)-1), parent.Lookup("extra_tail").Int64())

				n, err := r.Count(ctx, 1)
				require.NoError(t, err)
				require.Equal(t, writers*each, n)
				var streamed []comment
				for c, err := range r.Items(ctx, 1) {
					require.NoError(t, err)
					streamed = append(streamed, c)
				}
				require.Equal(t, items, streamed)
			})
		}
	})
}

// TestPushLosesRace: another writer pushes into the parent between
// Append's read and its push. On the portable plan the push, guarded on
// the number of items read, matches nothing, and Append reads again and
// pushes after the other's item; with the server's size limit the push,
// guarded on room only, goes through. Either way both items are stored
// once, the other's first.
func TestPushLosesRace(t *testing.T) {
	appendPlans(t, func(t *testing.T, p Plan) {
		ctx := context.Background()
		r, db := newPost(t, small(), p)
		require.NoError(t, r.Append(ctx, 1, comment{ID: "c00"}))

		other, err := New[post, comment](mongotest.NewClient(t).Database(db.Name()), small())
		require.NoError(t, err)
		ForcePlan(other, p)
		var once sync.Once
		mongotest.OnCommand(t, db, "update", func(hook context.Context) {
			once.Do(func() { require.NoError(t, other.Append(hook, 1, comment{ID: "other"})) })
		})
		counter := mongotest.NewCounter(t, db)
		cmds := counter.Count(func() { require.NoError(t, r.Append(ctx, 1, comment{ID: "c01"})) })
		// Each command is counted when it starts, ours before the other's
		// that run in its window.
		if p.serverSizeLimit {
			// Our push, the other's, and ours goes through: room is left.
			require.Equal(t, []string{"update", "update"}, cmds)
		} else {
			// Our read and push; the other's read and push, in the window;
			// our push misses; our read again and push.
			require.Equal(t, []string{"find", "update", "find", "update", "find", "update"}, cmds)
		}
		parent, _ := stored(t, r, 1)
		require.Equal(t, []string{"c00", "other", "c01"}, embedded(t, parent))
	})
}

// TestAppendersOfOneRepository: concurrent Appends through one repository
// to an open parent never make each other's pushes miss: the repository
// writes them one batch at a time. So each costs at most what it costs
// alone (less when several wait and are written together).
func TestAppendersOfOneRepository(t *testing.T) {
	const writers, each = 4, 10
	appendPlans(t, func(t *testing.T, p Plan) {
		ctx := context.Background()
		cfg := small()
		cfg.Cap = writers * each
		r, db := newPost(t, cfg, p)
		counter := mongotest.NewCounter(t, db)
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for _, c := range comments(fmt.Sprintf("w%d-", w), 0, each) {
					require.NoError(t, r.Append(ctx, 1, c))
				}
			})
		}
		wg.Wait()
		perAppend := 2 // read, push
		if p.serverSizeLimit {
			perAppend = 1 // push
		}
		require.LessOrEqual(t, counter.N(), writers*each*perAppend)
		n, err := r.Count(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, writers*each, n)
	})
}

// TestRemoveLosesRace: another process removes the item between Remove's
// finding it and its write. The write, guarded on the item being where it
// was found, matches nothing: Remove reports patterns.ErrNotFound and
// lowers no count a second time.
func TestRemoveLosesRace(t *testing.T) {
	mongotest.RunPlans(t, PlanFor, func(t *testing.T, p Plan) {
		for _, id := range []string{"c01", "c04"} { // in the parent, in overflow document 0
			t.Run(id, func(t *testing.T) {
				ctx := context.Background()
				r, db := newPost(t, small(), p)
				require.NoError(t, r.Append(ctx, 1, comments("c", 0, 6)...))
				other, err := New[post, comment](mongotest.NewClient(t).Database(db.Name()), small())
				require.NoError(t, err)
				ForcePlan(other, p)
				var once sync.Once
				mongotest.OnCommand(t, db, "update", func(hook context.Context) {
					once.Do(func() { require.NoError(t, other.Remove(hook, 1, id)) })
				})
				require.ErrorIs(t, r.Remove(ctx, 1, id), patterns.ErrNotFound)

				parent, docs := stored(t, r, 1)
				got := embedded(t, parent)
				for _, d := range docs {
					require.Equal(t, len(d.Items), d.Count, "seq %d: the count was lowered once", d.Seq)
					got = append(got, idsOf(d.Items)...)
				}
				want := idsOf(comments("c", 0, 6))
				require.Equal(t, slicesDelete(want, id), got)
			})
		}
	})
}

// TestDeleteDuringAppend: a Delete that runs between an Append's close of
// the parent and its upsert of the overflow document leaves that document
// behind, with no parent; readers find no parent, and Delete again
// removes the document and reports patterns.ErrNotFound.
func TestDeleteDuringAppend(t *testing.T) {
	appendPlans(t, func(t *testing.T, p Plan) {
		ctx := context.Background()
		r := deleteDuringAppend(t, p)
		_, _, err := r.Get(ctx, 1)
		require.ErrorIs(t, err, patterns.ErrNotFound)
		require.ErrorIs(t, r.Delete(ctx, 1), patterns.ErrNotFound)
		left, err := r.overflow.CountDocuments(ctx, bson.D{{Key: fParent, Value: 1}})
		require.NoError(t, err)
		require.Zero(t, left, "Delete again removed it")
	})
}

// deleteDuringAppend runs a Delete of post 1, full with c00-c02, from
// another repository between an Append's close of the parent and its
// upsert of overflow document 0 with c03, and checks that the document
// is left behind; it returns the repository that appended.
func deleteDuringAppend(t *testing.T, p Plan) *Repo[post, comment] {
	t.Helper()
	ctx := context.Background()
	r, db := newPost(t, small(), p)
	require.NoError(t, r.Append(ctx, 1, comments("c", 0, 3)...))
	other := otherRepo(t, db.Name(), small(), p)
	// The Append's updates: (with the server's size limit, a push that
	// misses,) the close, the upsert.
	upsert := missedPush(p) + 2
	updates := atUpdate(t, db, upsert, func(hook context.Context) {
		require.NoError(t, other.Delete(hook, 1))
	})
	require.NoError(t, r.Append(ctx, 1, comment{ID: "c03"}))
	require.Equal(t, upsert, *updates)
	left, err := r.overflow.CountDocuments(ctx, overflowFilter(1))
	require.NoError(t, err)
	require.EqualValues(t, 1, left, "the overflow document the Append wrote after the Delete")
	return r
}

// TestOverlappingAppendsOfOneID: an Append of x overlaps another of x (a
// retry racing the attempt it gave up on, which the server still runs):
// the other completes between this one's read of the overflow and its
// push. The push, guarded on the ids as well as the room, matches nothing,
// and the Append finds x stored: x is stored once (issue 20, item 4).
func TestOverlappingAppendsOfOneID(t *testing.T) {
	appendPlans(t, func(t *testing.T, p Plan) {
		ctx := context.Background()
		cfg := Config{Parents: "posts", Field: "comments", Cap: 1, OverflowCap: 5}
		r, db := newPost(t, cfg, p)
		require.NoError(t, r.Append(ctx, 1, comment{ID: "a"}, comment{ID: "b"}))
		other, err := New[post, comment](mongotest.NewClient(t).Database(db.Name()), cfg)
		require.NoError(t, err)
		ForcePlan(other, p)
		// The Append's updates: (with the server's size limit, a push into
		// the parent that misses,) the push into overflow document 0.
		push := missedPush(p) + 1
		updates := atUpdate(t, db, push, func(hook context.Context) {
			require.NoError(t, other.Append(hook, 1, comment{ID: "x"}))
		})
		require.NoError(t, r.Append(ctx, 1, comment{ID: "x"}))
		require.GreaterOrEqual(t, *updates, push, "the other Append ran in the window")

		_, items, err := r.Get(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, []string{"a", "b", "x"}, idsOf(items))
		_, docs := stored(t, r, 1)
		for _, d := range docs {
			require.Equal(t, len(d.Items), d.Count)
		}
	})
}

// TestRetriesUnderDeadlines: 6 workers append their items one call at a
// time to one parent and remove every third, each call under a random
// deadline of 0 to 10 ms (growing by 5 ms per failed attempt, so that a
// slow server makes progress) and retried with the same arguments until
// it succeeds. A retry often overlaps the attempt it gave up on, which
// the server is still running. At the end every item not removed is
// stored once, each worker's in its order, and every overflow document's
// count is its number of items (issue 20, items 4 and 5).
//
// It needs atomic updates from concurrent connections: an attempt cut
// off by its deadline still runs on the server while the retry runs on
// the client's next connection, so even a client of one connection sends
// two updates at once. FerretDB 1.x then loses one of them (a removed
// item came back in 2 of 9 runs of -count=6 or -count=10).
func TestRetriesUnderDeadlines(t *testing.T) {
	mongotest.Require(t, patterns.FeatureConcurrentUpdates)
	const workers = 6
	each := mongotest.Scale(12, 6)
	appendPlans(t, func(t *testing.T, p Plan) {
		ctx := context.Background()
		cfg := Config{Parents: "posts", Field: "comments", Cap: 3, OverflowCap: 4}
		r, _ := newPost(t, cfg, p)
		retry := func(op func(ctx context.Context) error) (attempts int) {
			for {
				d := time.Duration(rand.Int64N(int64(10*time.Millisecond))) + time.Duration(attempts)*5*time.Millisecond
				cctx, cancel := context.WithTimeout(ctx, d)
				err := op(cctx)
				cancel()
				attempts++
				if err == nil {
					return attempts
				}
			}
		}
		var wg sync.WaitGroup
		var failed atomic.Int64
		for w := range workers {
			wg.Go(func() {
				for i, c := range comments(fmt.Sprintf("w%d-", w), 0, each) {
					failed.Add(int64(retry(func(ctx context.Context) error { return r.Append(ctx, 1, c) }) - 1))
					if i%3 == 1 {
						tried := false
						failed.Add(int64(retry(func(ctx context.Context) error {
							err := r.Remove(ctx, 1, c.ID)
							if tried && errors.Is(err, patterns.ErrNotFound) {
								return nil // an earlier attempt removed it
							}
							tried = true
							return err
						}) - 1))
					}
				}
			})
		}
		wg.Wait()
		mongotest.Detail(t, "%d attempts failed", failed.Load())

		_, items, err := r.Get(ctx, 1)
		require.NoError(t, err)
		seen := map[string]bool{}
		last := make([]int, workers)
		for w := range last {
			last[w] = -1
		}
		for _, c := range items {
			require.False(t, seen[c.ID], "%s stored twice", c.ID)
			seen[c.ID] = true
			var w, i int
			_, err := fmt.Sscanf(c.ID, "w%d-%d", &w, &i)
			require.NoError(t, err)
			require.NotEqual(t, 1, i%3, "%s was removed", c.ID)
			require.Greater(t, i, last[w], "worker %d's items out of order", w)
			last[w] = i
		}
		require.Len(t, items, workers*(each-each/3))
		_, docs := stored(t, r, 1)
		for _, d := range docs {
			require.Equal(t, len(d.Items), d.Count, "seq %d: the count is its items", d.Seq)
		}
		n, err := r.Count(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, len(items), n)
	})
}
