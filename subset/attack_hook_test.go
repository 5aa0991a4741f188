package subset_test

import (
	"context"
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

// TestAttackDriverRetryCounted (issue 37's attack): the driver retries a
// read once after a network error (driver v2.10.0
// x/mongo/driver/operation.go, retryable reads), so a reset before Get's
// find makes it send the find twice, both with the operation's context.
// patterns.Operation.Commands counts the commands the operation hands to
// the driver, and says that the driver's own retries are not among them
// and that a command monitor sees them: one counted, two seen.
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
		px.Arm(faults.Fault{Step: 1, Place: faults.Before, Kind: faults.Reset})
		rec.Reset()
		_, err := r.Get(ctx, "a")
		require.NoError(t, err, "the driver's retry read it")
		require.True(t, px.Fired())
		ops := rec.Ended()
		require.Len(t, ops, 1)
		require.Equal(t, 1, ops[0].Commands(), "one find handed to the driver")
		require.Equal(t, []string{"find", "find"}, rec.Sent(ops[0]), "the driver sent it twice")
	})
}

// TestAttackCapabilitiesFailureCounted (issue 37's attack): Capabilities
// counted hello and buildInfo before it sent hello, so an operation whose
// hello failed (an expired deadline here) counted two commands where it
// handed one to the driver (which sent none: the command monitor, driver
// v2.10.0 event.CommandMonitor, sees what was really sent). It now counts
// each as it hands it over (patterns.Operation.Commands).
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
	require.Empty(t, sent[ops[0]], "the driver sent nothing: the context had ended")
	require.Equal(t, 1, ops[0].Commands(), "hello was handed to the driver, buildInfo was not: Capabilities counts each as it hands it over (%v)", err)
}

// TestAttackExpiredContextCounted (issue 37's attack): an operation
// given a context whose deadline has passed hands its first command to
// the driver, which sends nothing (it fails server selection first:
// driver v2.10.0 x/mongo/driver/operation.go Execute).
// patterns.Operation.Commands counts what is handed to the driver and
// says a command the driver never sends is among them: Get counts its
// find, and the monitor sees none.
func TestAttackExpiredContextCounted(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		r, rec := hookRepo(t, config(3), p)
		insertParents(t, r.Indexes()[0].Collection.Database(), "a")
		require.NoError(t, r.Add(context.Background(), "a", five...))
		ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
		defer cancel()
		<-ctx.Done()
		rec.Reset()
		_, err := r.Get(ctx, "a")
		require.ErrorIs(t, err, context.DeadlineExceeded)
		ops := rec.Ended()
		require.Len(t, ops, 1)
		require.ErrorIs(t, ops[0].Outcome(), context.DeadlineExceeded)
		require.Equal(t, 1, ops[0].Commands())
		require.Empty(t, rec.Sent(ops[0]))
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

// TestAttackRetryReportedButNotSent (issue 37's attack): srverr.Retry
// reported a retry before its backoff, so a context that ended during the
// backoff had a retry reported and nothing sent again; it now reports it
// after the backoff, as it hands the write to the driver again
// (TestRetryReportsOnlyWritesSentAgain in internal/srverr shows the
// backoff case). A hook that cancels the context at the event itself, as
// here, may make the driver send nothing: a command handed over and not
// sent, as patterns.Operation.Commands says.
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
		require.Equal(t, 1, op.Retries(), "the retry is reported as the insert is handed to the driver again")
		require.LessOrEqual(t, inserts, 1+op.Retries(), "the driver may send it or not (its context ended): %v", rec.Sent(op))
	})
}
