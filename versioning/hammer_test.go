package versioning_test

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

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/versioning"
)

// TestEightUpdatersUnderDeadlinesOnOneOldDocument: 8 goroutines update
// one v1 document at once, each call under a deadline of 5-400 ms that
// strikes at a random point (the find, the write-back, the update). Every
// call that returned nil landed once; one that failed landed at most
// once; the document is migrated once (each step recorded once) and whole.
func TestEightUpdatersUnderDeadlinesOnOneOldDocument(t *testing.T) {
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, p versioning.Plan) {
		db := mongotest.DB(t)
		seedRaw(t, db, oldV1("ada", "Ada Lovelace", "ada@example.com", 0))
		r := tracedUsers(db, p)
		const writers = 8
		calls := mongotest.Scale(40, 8)
		var ok, failed, conflicts atomic.Int32
		var wg sync.WaitGroup
		errs := make(chan error, writers*calls)
		for w := range writers {
			wg.Go(func() {
				rnd := rand.New(rand.NewPCG(uint64(w), 7))
				for range calls {
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(5+rnd.IntN(400))*time.Millisecond)
					err := r.Update(ctx, "ada", incVisits)
					struck := deadline(ctx, err)
					cancel()
					switch {
					case err == nil:
						ok.Add(1)
					case struck:
						failed.Add(1)
					case errors.Is(err, patterns.ErrConflict) && !p.ServerSizeLimit:
						// The read-then-findAndModify path gives up after 4
						// lost races, the update not applied (documented).
						conflicts.Add(1)
					default:
						errs <- err
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err, "only the deadline may fail a call")
		}
		got, err := tracedUsers(db, p).Get(context.Background(), "ada")
		require.NoError(t, err)
		require.Equal(t, []string{"1>2", "2>3"}, got.Applied, "each step once")
		require.Equal(t, "Ada", got.First)
		require.GreaterOrEqual(t, got.Visits, int(ok.Load()), "no successful update lost")
		require.LessOrEqual(t, got.Visits, int(ok.Load()+failed.Load()), "none applied twice")
		mongotest.Detail(t, "%d succeeded, %d timed out, %d conflicts, %d visits", ok.Load(), failed.Load(), conflicts.Load(), got.Visits)
	})
}

// TestEightWritersAroundTwoMigrateAlls: two MigrateAll runs overlap while
// six goroutines of the previous release update the same old documents.
// Each document is migrated by exactly one write: the runs' Migrated (and
// a final run's) add up to the documents, each run counts a document at
// most once, each migration step is recorded once in every document, and
// no update of the previous release is lost.
func TestEightWritersAroundTwoMigrateAlls(t *testing.T) {
	t.Parallel() // beside TestFaults, which waits on its stalls
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, p versioning.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		n := mongotest.Scale(400, 60)
		docs := make([]any, n)
		for i := range docs {
			docs[i] = oldV1(fmt.Sprintf("u%04d", i), "Ada Lovelace", "ada@example.com", 0)
		}
		seed(t, db.Collection("users"), docs...)
		require.NoError(t, patterns.EnsureIndexes(ctx, tracedUsers(db, p).Indexes()...))
		old := oldRelease(t, db, p)
		var landed atomic.Int64
		var stop atomic.Bool
		var wg sync.WaitGroup
		werrs := make(chan error, 6)
		for w := range 6 {
			wg.Go(func() {
				for i := w; !stop.Load(); i += 7 {
					err := old.Update(ctx, fmt.Sprintf("u%04d", (i*7919)%n), incVisits)
					switch {
					case err == nil:
						landed.Add(1)
					case errors.Is(err, versioning.ErrNewerSchema), errors.Is(err, patterns.ErrConflict):
					default:
						werrs <- err
						return
					}
				}
			})
		}
		var runs [2]versioning.MigrateResult
		var rerrs [2]error
		var mw sync.WaitGroup
		for k := range runs {
			mw.Go(func() {
				runs[k], rerrs[k] = tracedUsers(db, p).MigrateAll(ctx, versioning.MigrateOptions{BatchSize: 7})
			})
		}
		mw.Wait()
		stop.Store(true)
		wg.Wait()
		close(werrs)
		for err := range werrs {
			require.NoError(t, err)
		}
		for k := range runs {
			require.NoError(t, rerrs[k])
			require.Empty(t, runs[k].Failed)
			require.LessOrEqual(t, runs[k].Migrated+runs[k].Skipped, n, "run %d counts each document at most once: %+v", k, runs[k])
		}
		final, err := tracedUsers(db, p).MigrateAll(ctx, versioning.MigrateOptions{})
		require.NoError(t, err)
		require.Zero(t, final.Skipped)
		require.Equal(t, n, runs[0].Migrated+runs[1].Migrated+final.Migrated, "each document migrated by one write (%+v %+v %+v)", runs[0], runs[1], final)
		visits := 0
		for u, err := range tracedUsers(db, p).Find(ctx, nil) {
			require.NoError(t, err)
			require.Equal(t, []string{"1>2", "2>3"}, u.Applied, "%s: each step once", u.ID)
			visits += u.Visits
		}
		require.EqualValues(t, landed.Load(), visits, "no update of the previous release lost")
		mongotest.Detail(t, "runs %+v %+v, final %+v, %d old-release updates", runs[0], runs[1], final, landed.Load())
	})
}

// TestMigrateAllUnderDeadlines runs MigrateAll again and again, each run
// under a deadline of 5-150 ms that strikes at a random point (a page, a
// bulk write), until one finishes. A run the deadline stopped returns an
// error that is not ErrMigration and lists no failed document (the
// deadline is not a document's failure, whether the client or the server,
// by maxTimeMS, noticed it); the runs together migrate every document,
// each step once, and count none twice.
func TestMigrateAllUnderDeadlines(t *testing.T) {
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, p versioning.Plan) {
		db := mongotest.DB(t)
		n := mongotest.Scale(300, 60)
		docs := make([]any, n)
		for i := range docs {
			docs[i] = oldV1(fmt.Sprintf("u%04d", i), "Ada Lovelace", "ada@example.com", int32(i))
		}
		seed(t, db.Collection("users"), docs...)
		require.NoError(t, patterns.EnsureIndexes(context.Background(), tracedUsers(db, p).Indexes()...))
		rnd := rand.New(rand.NewPCG(9, 9))
		migrated, skipped, stopped := 0, 0, 0
		for run := 0; ; run++ {
			require.Less(t, run, 1000, "MigrateAll never finished")
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(5+rnd.IntN(150))*time.Millisecond)
			res, err := tracedUsers(db, p).MigrateAll(ctx, versioning.MigrateOptions{BatchSize: 1 + rnd.IntN(40)})
			ended := deadline(ctx, err)
			cancel()
			migrated += res.Migrated
			skipped += res.Skipped // a write of an earlier run that the server applied after its deadline
			if err == nil {
				break
			}
			require.True(t, ended, "run %d: only the deadline stops a run: %v", run, err)
			require.NotErrorIs(t, err, versioning.ErrMigration, "run %d: the deadline is no document's failure", run)
			require.Empty(t, res.Failed, "run %d", run)
			stopped++
		}
		require.LessOrEqual(t, migrated, n, "no document counted twice")
		visits := 0
		for u, err := range tracedUsers(db, p).Find(context.Background(), nil) {
			require.NoError(t, err)
			require.Equal(t, []string{"1>2", "2>3"}, u.Applied, "%s: each step once", u.ID)
			visits += u.Visits
		}
		require.Equal(t, n*(n-1)/2, visits, "every document, whole")
		mongotest.Detail(t, "%d runs stopped by their deadline, %d documents counted migrated and %d skipped of %d", stopped, migrated, skipped, n)
	})
}

// deadline reports whether err came from ctx's deadline: ctx ended, or
// the driver gave up because it would end before a reply could come.
func deadline(ctx context.Context, err error) bool {
	return ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded)
}
