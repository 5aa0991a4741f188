package outlier

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// TestHotParent is issue 19's hot document: 8 writers append comments,
// 3 per Append, to one post (Cap 20, OverflowCap 40: most go to overflow
// documents) at once. No error reaches a caller, and every comment is
// stored once, each writer's in its order. Through one repository the
// writers do not fight: their Appends are written in batches, so the 8
// cost no more commands than one writer appending as many comments
// alone (before, each missed the others' writes and sent more). Through
// two repositories, as two processes, the server's guards keep them
// apart.
func TestHotParent(t *testing.T) {
	const writers = 8
	n := writers * mongotest.Scale(150, 24) // a multiple of hotBatch per writer
	appendPlans(t, func(t *testing.T, p Plan) {
		ctx := context.Background()
		t.Run("one-repo", func(t *testing.T) {
			r, db := newRepo(t, hotConfig, p)
			for _, id := range []int{1, 2} {
				_, err := r.Insert(ctx, post{ID: id})
				require.NoError(t, err)
			}
			counter := mongotest.NewCounter(t, db)
			_, failed := appendHot(ctx, []*Repo[post, comment]{r}, 1, 1, n)
			one := counter.N()
			requireHot(t, r, 1, 1, n, failed)
			counter.Reset()
			_, failed = appendHot(ctx, []*Repo[post, comment]{r}, 2, writers, n)
			many := counter.N()
			requireHot(t, r, 2, writers, n, failed)
			mongotest.Detail(t, "%d comments: %d commands from one writer, %d from %d", n, one, many, writers)
			require.LessOrEqual(t, many, one, "8 writers cost no more commands than one")
		})
		t.Run("two-repos", func(t *testing.T) {
			r, db := newPost(t, hotConfig, p)
			other, err := New[post, comment](db, hotConfig)
			require.NoError(t, err)
			ForcePlan(other, p)
			_, failed := appendHot(ctx, []*Repo[post, comment]{r, other}, 1, writers, n)
			requireHot(t, r, 1, writers, n, failed)
		})
	})
}

// queueItems returns items with the given string ids, for appendQueues.
func queueItems(ids ...string) []item {
	out := make([]item, len(ids))
	for i, id := range ids {
		t, v, err := bson.MarshalValue(id)
		if err != nil {
			panic(err)
		}
		out[i] = item{id: bson.RawValue{Type: t, Value: v}}
	}
	return out
}

// written returns the ids of a batch as strings.
func written(batch []item) []string {
	out := make([]string, len(batch))
	for i, it := range batch {
		out[i] = it.id.StringValue()
	}
	return out
}

// TestAppendQueues: the Appends that arrive while a batch is written wait
// and are written together, in arrival order, each id once, by one of
// them; a batch that fails fails only the call that wrote it, and the
// others are written again; a call whose ctx ends while it waits leaves,
// and its items are not written; an entry lives only while calls are in
// flight.
func TestAppendQueues(t *testing.T) {
	ctx := context.Background()
	var q appendQueues
	var mu sync.Mutex
	var batches [][]string
	started := make(chan struct{}, 10)
	release := make(chan error)
	// write records the batch, says it started and waits for its outcome.
	write := func(ctx context.Context, batch []item) error {
		mu.Lock()
		batches = append(batches, written(batch))
		mu.Unlock()
		started <- struct{}{}
		return <-release
	}
	waiting := func(n int) { // waits until n calls wait for the running batch
		require.Eventually(t, func() bool {
			q.mu.Lock()
			defer q.mu.Unlock()
			return len(q.m["k"].waiting) == n
		}, 5*time.Second, time.Millisecond)
	}
	results := make(chan string, 10)
	call := func(ctx context.Context, name string, ids ...string) {
		go func() {
			err := q.do(ctx, "k", queueItems(ids...), write)
			results <- fmt.Sprintf("%s: %v", name, err)
		}()
	}

	// a writes alone; b, c and d arrive meanwhile and are written as one
	// batch, in order, "x" once.
	call(ctx, "a", "a1")
	<-started
	call(ctx, "b", "b1", "x")
	waiting(1)
	call(ctx, "c", "c1", "c2")
	waiting(2)
	call(ctx, "d", "x", "d1")
	waiting(3)
	release <- nil
	require.Equal(t, "a: <nil>", <-results)
	<-started
	require.Equal(t, []string{"b1", "x", "c1", "c2", "d1"}, batches[1], "one batch, in order, each id once")

	// That batch fails: the call that wrote it gets the error, the others
	// are written again, together, in order.
	release <- errors.New("boom")
	<-started
	release <- nil
	var failed []string
	for range 3 {
		if r := <-results; r != "b: <nil>" && r != "c: <nil>" && r != "d: <nil>" {
			failed = append(failed, r)
		}
	}
	require.Len(t, failed, 1, "only the writer of the failed batch fails")
	again := map[string][]string{ // the batch written again, by the call that failed
		"b: boom": {"c1", "c2", "x", "d1"},
		"c: boom": {"b1", "x", "d1"},
		"d: boom": {"b1", "x", "c1", "c2"},
	}[failed[0]]
	require.NotNil(t, again, "the writer gets its own error: %s", failed[0])
	require.Equal(t, again, batches[2], "the others are written again")

	// A call whose ctx ends while it waits leaves; its items are not
	// written.
	call(ctx, "e", "e1")
	<-started
	short, cancel := context.WithCancel(ctx)
	call(short, "f", "f1")
	waiting(1)
	call(ctx, "g", "g1")
	waiting(2)
	cancel()
	require.Equal(t, "f: context canceled", <-results)
	release <- nil
	require.Equal(t, "e: <nil>", <-results)
	<-started
	release <- nil
	require.Equal(t, "g: <nil>", <-results)
	require.Equal(t, []string{"g1"}, batches[len(batches)-1])
	require.Empty(t, q.m, "no entry outlives its calls")
}

// TestSessionAppendIsNotBatched: an Append whose ctx carries a session is
// written alone, in its session, not queued behind another call's batch
// (which would write its items with that call's ctx, outside its
// session): here it runs while another Append's push is on its way, and
// returns at once. It needs a second connection of the client, since the
// other Append holds the first.
func TestSessionAppendIsNotBatched(t *testing.T) {
	mongotest.Require(t, patterns.FeatureConcurrentUpdates)
	appendPlans(t, func(t *testing.T, p Plan) {
		if !p.serverSizeLimit {
			t.Skip("skipped: without the server's size limit the repository runs its Appends of one parent one at a time, session or not")
		}
		ctx := context.Background()
		r, db := newPost(t, small(), p)
		sess, err := db.Client().StartSession()
		require.NoError(t, err)
		defer sess.EndSession(ctx)
		var once sync.Once
		mongotest.OnCommand(t, db, "update", func(hook context.Context) {
			once.Do(func() {
				short, cancel := context.WithTimeout(hook, 10*time.Second)
				defer cancel()
				require.NoError(t, r.Append(mongo.NewSessionContext(short, sess), 1, comment{ID: "in-session"}))
			})
		})
		require.NoError(t, r.Append(ctx, 1, comment{ID: "plain"}))
		parent, _ := stored(t, r, 1)
		require.Equal(t, []string{"in-session", "plain"}, embedded(t, parent))
	})
}
