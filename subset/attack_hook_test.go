package subset_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/internal/faults"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/subset"
)

// TestAttackDriverRetryCounted: patterns/hook.go:207 "Commands is the
// number of commands the operation sent", and mongotest.RequireReports
// "the commands it counted are the commands the monitor saw sent with its
// context". The driver retries a read once after a network error
// (driver v2.10.0 x/mongo/driver/operation.go, retryable reads; the
// MongoDB manual "Retryable Reads": "drivers retry ... once"), so a
// reset before Get's first command makes the driver send it twice, both
// with the operation's context: Commands() must count both.
func TestAttackDriverRetryCounted(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		insertParents(t, db, "a")
		px := faults.New(t)
		rec := mongotest.NewRecorder(t)
		cfg := config(3)
		cfg.Hook = rec
		r := newRepo[parent, item](t, px.Client().Database(db.Name()), cfg, p)
		require.NoError(t, r.Add(ctx, "a", five...))
		for _, step := range []int{1, 2} {
			px.Arm(faults.Fault{Step: step, Place: faults.Before, Kind: faults.Reset})
			op := rec.RequireReports(t, "subset", "Get", false, func() error { _, err := r.Get(ctx, "a"); return err })
			require.True(t, px.Fired())
			require.NoError(t, op.Err)
			t.Logf("step %d: sent %v, counted %d", step, rec.Sent(op), op.Commands())
		}
	})
}

// TestAttackCapabilitiesFailureCounted: patterns/hook.go:207 "Commands is
// the number of commands the operation sent"; patterns/capabilities.go:478
// "The first call for a client sends two commands to the admin database
// (hello and buildInfo)". Capabilities counts both before it sends hello
// (capabilities.go:500 op.Sent(2)): when hello is not sent or fails (an
// expired deadline here; a reset likewise) buildInfo is never sent, yet
// the operation that decides the plan counts two. The command monitor
// (driver v2.10.0 event.CommandMonitor, Started for every command written)
// sees what was really sent with the operation's context.
func TestAttackCapabilitiesFailureCounted(t *testing.T) {
	db := mongotest.DB(t)
	insertParents(t, db, "a")
	newRepo[parent, item](t, db, config(3), portable) // its indexes
	var mu sync.Mutex
	sent := map[*patterns.Operation][]string{}
	client, err := mongo.Connect(options.Client().ApplyURI(mongotest.URI()).SetMonitor(&event.CommandMonitor{
		Started: func(ctx context.Context, e *event.CommandStartedEvent) {
			if op := patterns.OperationFrom(ctx); op != nil {
				mu.Lock()
				sent[op] = append(sent[op], e.CommandName)
				mu.Unlock()
			}
		},
	}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	rec := mongotest.NewRecorder(t)
	cfg := config(3)
	cfg.Hook = rec
	r, err := subset.New[parent, item](client.Database(db.Name()), cfg) // no forced plan: the first Add decides it
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	err = r.Add(ctx, "a", five...)
	require.Error(t, err)
	ops := rec.Ended()
	require.Len(t, ops, 1)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, len(sent[ops[0]]), ops[0].Commands(), "commands counted vs sent %v (error %v)", sent[ops[0]], err)
}

// TestAttackExpiredContextCounted: patterns/hook.go:207 "Commands is the
// number of commands the operation sent"; mongotest.RequireReports: "the
// commands it counted are the commands the monitor saw sent with its
// context". An operation given a context whose deadline has passed sends
// nothing (the driver fails server selection first: driver v2.10.0
// x/mongo/driver/operation.go Execute), yet each operation counts its
// command before sending it.
func TestAttackExpiredContextCounted(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		r, rec := hookRepo(t, config(3), p)
		insertParents(t, r.Indexes()[0].Collection.Database(), "a")
		require.NoError(t, r.Add(context.Background(), "a", five...))
		ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
		defer cancel()
		<-ctx.Done()
		for name, call := range map[string]func() error{
			"Get":   func() error { _, err := r.Get(ctx, "a"); return err },
			"Count": func() error { _, err := r.Count(ctx, "a"); return err },
			"Add":   func() error { return r.Add(ctx, "a", item{ID: 77, Score: 1}) },
		} {
			t.Run(name, func(t *testing.T) {
				op := rec.RequireReports(t, "subset", name, true, call)
				require.ErrorIs(t, op.Outcome(), context.DeadlineExceeded)
			})
		}
	})
}

// TestAttackSplitInsertCounted: subset/doc.go "Observing": "its end, with
// the commands it sent"; patterns/hook.go:207 "Commands is the number of
// commands the operation sent". The driver splits an insertMany whose
// documents exceed the server's maxMessageSizeBytes (48000000) into
// several insert commands (driver v2.10.0 x/mongo/driver/batches.go,
// operation.go: each batch a command, each reported to the monitor);
// Add counts one per InsertMany call (subset/repo.go write: op.Sent(1)).
func TestAttackSplitInsertCounted(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		ctx := context.Background()
		r, rec := hookRepo(t, config(3), p)
		insertParents(t, r.Indexes()[0].Collection.Database(), "a")
		body := strings.Repeat("x", 1<<20)
		items := make([]item, 50) // 50 MiB in all
		for i := range items {
			items[i] = item{ID: int64(i + 1), Score: int64(i), Body: body}
		}
		op := rec.RequireReports(t, "subset", "Add", false, func() error { return r.Add(ctx, "a", items...) })
		t.Logf("sent %v, err %v", rec.Sent(op), op.Err)
	})
}

// cancelOnRetry cancels the operation's context when it reports a retry.
type cancelOnRetry struct{ cancel context.CancelFunc }

func (h cancelOnRetry) OperationStart(ctx context.Context, _ *patterns.Operation) context.Context {
	return ctx
}
func (h cancelOnRetry) OperationEvent(_ context.Context, _ *patterns.Operation, e patterns.Event) {
	if e.Kind == patterns.EventRetry {
		h.cancel()
	}
}
func (cancelOnRetry) OperationEnd(context.Context, *patterns.Operation) {}

// TestAttackRetryReportedButNotSent: patterns/hook.go:97 "EventRetry: the
// operation sends a command again after a failure"; hook.go:211 "Retries
// is the number of commands the operation sent again after a transient
// failure". srverr.Retry reports the retry before its backoff; when the
// context ends during the backoff it returns without sending the command
// again: the monitor sees one insert, yet Retries is 1 and an EventRetry
// was reported.
func TestAttackRetryReportedButNotSent(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		db := mongotest.DB(t)
		insertParents(t, db, "a")
		tp := faults.NewTransient(t)
		rec := mongotest.NewRecorder(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		cfg := config(3)
		cfg.Hook = patterns.Hooks(rec, cancelOnRetry{cancel})
		r := newRepo[parent, item](t, tp.Client().Database(db.Name()), cfg, p)
		tp.Arm(1) // the insert of the items
		op := rec.RequireReports(t, "subset", "Add", false, func() error { return r.Add(ctx, "a", five...) })
		inserts := 0
		for _, c := range rec.Sent(op) {
			if c == "insert" {
				inserts++
			}
		}
		require.ErrorIs(t, op.Err, context.Canceled)
		require.Equal(t, inserts-1, op.Retries(), "retries vs inserts sent %v", rec.Sent(op))
	})
}
