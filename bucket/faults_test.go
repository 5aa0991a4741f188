package bucket_test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/bucket"
	"github.com/mongopatterns/mongopatterns/internal/dial"
	"github.com/mongopatterns/mongopatterns/internal/faults"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// The fault tests break each operation of Buckets that sends commands at
// every one of its commands (before the server gets it, and after the
// server ran it with the reply lost), retry it on a healthy connection as
// its godoc says is safe, and check the final state exactly: every
// measurement stored as often as the godoc promises, no bucket over its
// cap, every bucket's count, first, last and summary those of its
// measurements, every measurement in its window's bucket.

// faultCap is the cap of the fault tests' buckets: small, so that a few
// readings fill buckets and top up others in few commands.
const faultCap = 4

// faultStore builds the store of a fault test on db (through the faulty
// client or the healthy one), taking the path p.
func faultStore(db *mongo.Database, p bucket.Plan) *bucket.Buckets[string, reading] {
	s, err := bucket.New[string, reading](db, config(faultCap))
	if err != nil {
		panic(err) // the configuration is valid
	}
	bucket.ForcePlan(s, p)
	return s
}

// prepareStore creates the store's indexes on db and stores pts, through
// the healthy client.
func prepareStore(t *testing.T, db *mongo.Database, p bucket.Plan, pts []bucket.Point[string, reading]) {
	t.Helper()
	s := newBucketsOn(t, db, p, config(faultCap))
	if len(pts) > 0 {
		require.NoError(t, s.AddMany(context.Background(), pts))
	}
}

// points returns readings of one sensor at the given minutes of base.
func points(sensor string, minutes ...int) []bucket.Point[string, reading] {
	out := make([]bucket.Point[string, reading], len(minutes))
	for i, m := range minutes {
		out[i] = bucket.Point[string, reading]{Meta: sensor, Value: readingAt(at(time.Duration(m)*time.Minute), m)}
	}
	return out
}

// bySensor groups points by series.
func bySensor(pts ...[]bucket.Point[string, reading]) map[string][]reading {
	out := map[string][]reading{}
	for _, ps := range pts {
		for _, p := range ps {
			out[p.Meta] = append(out[p.Meta], p.Value)
		}
	}
	return out
}

// sortReadings orders readings by time, then by value: a multiset in a
// canonical order.
func sortReadings(rs []reading) []reading {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b reading) int {
		return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.Temp, b.Temp), cmp.Compare(a.Hum, b.Hum))
	})
	return rs
}

// checkExactly checks the invariants of every bucket (within the cap,
// count, first, last and summary those of its measurements, each
// measurement in its window) and that the buckets of each series hold
// exactly want: every reading as many times as it appears there, no
// other. It returns the buckets.
func checkExactly(t *testing.T, db *mongo.Database, want map[string][]reading) []storedBucket {
	t.Helper()
	bks := storedBuckets(t, db)
	checkBuckets(t, bks, faultCap, time.Hour)
	got := map[string][]reading{}
	for _, b := range bks {
		got[b.Meta] = append(got[b.Meta], utc(b.Points)...)
	}
	require.Len(t, got, len(want), "series stored")
	for sensor, rs := range want {
		require.Equal(t, sortReadings(rs), sortReadings(got[sensor]), "sensor %s: every reading stored once", sensor)
	}
	return bks
}

// checkBound checks that the buckets of each window number at most
// ceil(n/Cap) + (writers - 1), for n readings in it.
func checkBound(t *testing.T, bks []storedBucket, writers int) {
	t.Helper()
	readings := map[string]int{}
	for _, b := range bks {
		readings[b.Meta+" "+b.Start.UTC().Format(time.RFC3339)] += b.Count
	}
	for window, n := range perWindow(bks) {
		require.LessOrEqual(t, n, (readings[window]+faultCap-1)/faultCap+writers-1, "window %s: buckets", window)
	}
}

// addManyCase is the fault case of one AddMany call of op on a store
// holding before. The retry is the whole call again (AddMany's godoc:
// exact after any error); the final state holds every reading of before
// and op once.
func addManyCase(p bucket.Plan, before, op []bucket.Point[string, reading]) faults.Case[*opState] {
	want := bySensor(before, op)
	return faults.Case[*opState]{
		Reuse: true,
		Prepare: func(t *testing.T, db *mongo.Database) *opState {
			prepareStore(t, db, p, before)
			return &opState{routes: mongotest.NewCounter(t, db)}
		},
		Op:    addManyOp(p, op),
		Retry: addManyRetry(p, op),
		Check: func(t *testing.T, db *mongo.Database, s *opState) {
			bks := checkExactly(t, db, want)
			checkBound(t, bks, 2)
			requireRecommended(t, s.routes)
		},
	}
}

// addManyOp calls AddMany of op on db, recording its error.
func addManyOp(p bucket.Plan, op []bucket.Point[string, reading]) func(context.Context, *mongo.Database, *opState) error {
	return func(ctx context.Context, db *mongo.Database, s *opState) error {
		err := faultStore(db, p).AddMany(ctx, op)
		s.errs = append(s.errs, err)
		return err
	}
}

// addManyRetry checks that the state after the failed call is what its
// error says (see checkPartial), then calls AddMany of op again.
func addManyRetry(p bucket.Plan, op []bucket.Point[string, reading]) func(context.Context, *mongo.Database, *opState) error {
	return func(ctx context.Context, db *mongo.Database, s *opState) error {
		if err := checkPartial(ctx, db, op, s.errs[0]); err != nil {
			return fmt.Errorf("what the failed call said: %w", err)
		}
		return addManyOp(p, op)(ctx, db, s)
	}
}

// opState records what the calls of a fault case returned.
type opState struct {
	errs []error
	// interfered counts the other writer's turns (faultsAddManyAfterLostRaces).
	interfered atomic.Int32
	// routes counts the commands of the failed call and of its retry,
	// for requireRecommended.
	routes *mongotest.Counter
}

// checkPartial checks the promise of an AddMany error about the points
// op it was given: a *bucket.PartialError says which were not stored
// (Failed) and which may have been (Unknown), every other stored exactly
// once; any other error, that none was stored.
func checkPartial(ctx context.Context, db *mongo.Database, op []bucket.Point[string, reading], err error) error {
	if !strings.HasPrefix(err.Error(), "bucket: AddMany: ") {
		return fmt.Errorf("error %q lacks its prefix", err)
	}
	cur, ferr := db.Collection("readings").Find(ctx, bson.D{})
	if ferr != nil {
		return ferr
	}
	var bks []storedBucket
	if ferr := cur.All(ctx, &bks); ferr != nil {
		return ferr
	}
	stored := map[bucket.Point[string, reading]]int{}
	for _, b := range bks {
		for _, r := range utc(b.Points) {
			stored[bucket.Point[string, reading]{Meta: b.Meta, Value: r}]++
		}
	}
	failed, unknown := map[int]bool{}, map[int]bool{}
	pe, partial := errors.AsType[*bucket.PartialError](err)
	if partial {
		for _, list := range [][]int{pe.Failed, pe.Unknown} {
			if !slices.IsSorted(list) {
				return fmt.Errorf("lists not in order: %v", pe)
			}
		}
		for _, at := range pe.Failed {
			failed[at] = true
		}
		for _, at := range pe.Unknown {
			unknown[at] = true
		}
	}
	for i, pt := range op {
		n := stored[pt]
		switch {
		case !partial && n != 0:
			return fmt.Errorf("point %d stored %d times after %v, which says none was", i, n, err)
		case !partial:
		case failed[i] && unknown[i]:
			return fmt.Errorf("point %d both failed and unknown in %v", i, err)
		case failed[i] && n != 0:
			return fmt.Errorf("point %d stored %d times, listed as not stored in %v", i, n, err)
		case unknown[i] && n > 1:
			return fmt.Errorf("point %d stored %d times, listed as unknown in %v", i, n, err)
		case !failed[i] && !unknown[i] && n != 1:
			return fmt.Errorf("point %d stored %d times, not listed in %v", i, n, err)
		}
	}
	return nil
}

// TestFaults breaks every operation at every command (the groups below:
// AddMany topping up and opening buckets, into new windows, after lost
// races; Add; DeleteBefore and DeleteSeriesBefore; the reads Range,
// Summaries, SummariesBySeries and Latest; a TimeSeries's first AddMany),
// the groups side by side (faults.Concurrently), each through a proxy of
// its own: they spend most of their time waiting on stalls, which one
// after the other added up to most of the package's time.
func TestFaults(t *testing.T) {
	t.Parallel()
	groups := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"AddManyTopsUpAndOpens", faultsAddManyTopsUpAndOpens}, {"AddManyNewWindows", faultsAddManyNewWindows},
		{"AddManyAfterLostRaces", faultsAddManyAfterLostRaces}, {"Add", faultsAdd},
		{"DeleteBefore", faultsDeleteBefore}, {"DeleteSeriesBefore", faultsDeleteSeriesBefore},
		{"Range", faultsRange}, {"Summaries", faultsSummaries}, {"SummariesBySeries", faultsSummariesBySeries},
		{"Latest", faultsLatest}, {"TimeSeriesFirstUse", faultsTimeSeriesFirstUse},
	}
	faults.Concurrently(t, len(groups), func(i int) string { return groups[i].name }, func(t *testing.T, i int) { groups[i].run(t) })
}

// faultsAddManyTopsUpAndOpens: AddMany of two series, each with a
// part-full bucket to top up and readings left for new buckets (one in a
// window of its own), broken at every command: the whole call retried
// stores every reading once.
func faultsAddManyTopsUpAndOpens(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		before := slices.Concat(points("s1", 0, 1), points("s2", 0, 1, 2))
		op := slices.Concat(points("s1", 10, 11, 12, 13), points("s2", 10, 11, 12, 70))
		faults.Run(t, faults.New(t), addManyCase(p, before, op))
	})
}

// faultsAddManyNewWindows: AddMany into windows without buckets (a
// find, then one insert of the new buckets), broken at every command.
func faultsAddManyNewWindows(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		op := slices.Concat(points("s1", 0, 1, 2, 3, 4), points("s2", 60, 61))
		faults.Run(t, faults.New(t), addManyCase(p, nil, op))
	})
}

// faultsAddManyAfterLostRaces: another writer (a client of its own)
// takes the room of the bucket AddMany tops up before each of its first
// two update commands, so that AddMany loses two races and stores the
// rest one upsert per reading; broken at every command, the whole call
// retried stores every reading once, and the other writer's too.
func faultsAddManyAfterLostRaces(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		before := points("s1", 0)
		op := points("s1", 30, 31)
		var others []bucket.Point[string, reading]
		for k := range 2 {
			others = append(others, points("s1", 40+4*k, 41+4*k, 42+4*k, 43+4*k)...)
		}
		other := otherWriter(t)
		want := bySensor(before, op, others)
		faults.Run(t, faults.New(t), faults.Case[*opState]{
			Prepare: func(t *testing.T, db *mongo.Database) *opState {
				prepareStore(t, db, p, before)
				s := &opState{routes: mongotest.NewCounter(t, db)}
				o := faultStore(other.Database(db.Name()), p)
				// Before each of the first two updates: four readings,
				// three filling the bucket with room, one opening
				// another, which the next round reads and tops up.
				mongotest.OnCommand(t, db, "update", func(ctx context.Context) {
					k := int(s.interfered.Add(1)) - 1
					if k >= 2 {
						return
					}
					for _, pt := range others[4*k : 4*k+4] {
						if err := o.Add(ctx, pt.Meta, pt.Value); err != nil {
							panic(err)
						}
					}
				})
				return s
			},
			Op:    addManyOp(p, op),
			Retry: addManyRetry(p, op),
			Check: func(t *testing.T, db *mongo.Database, s *opState) {
				require.EqualValues(t, 2, min(s.interfered.Load(), 2), "the other writer took its two turns")
				bks := checkExactly(t, db, want)
				checkBound(t, bks, 3)
				requireRecommended(t, s.routes)
			},
		})
	})
}

// otherWriter connects a client that is not the harness's: its commands
// run no OnCommand hooks and are not counted by faults.Run.
func otherWriter(t *testing.T) *mongo.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, _, err := dial.Connect(ctx, mongotest.URI(), func() *options.ClientOptions { return options.Client().SetTimeout(time.Minute) })
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Disconnect(context.Background()) })
	return c
}

// faultsAdd: Add is one upsert; broken before or inside it, the caller
// sees an error and the reading is stored once or not at all (Add is not
// idempotent: the godoc says not to send it again blindly), never twice,
// and every bucket agrees with its measurements.
func faultsAdd(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		before := points("s1", 0, 1)
		pt := points("s1", 5)[0]
		faults.Run(t, faults.New(t), faults.Case[*opState]{
			Reuse: true,
			Prepare: func(t *testing.T, db *mongo.Database) *opState {
				prepareStore(t, db, p, before)
				return &opState{}
			},
			Op: func(ctx context.Context, db *mongo.Database, s *opState) error {
				err := faultStore(db, p).Add(ctx, pt.Meta, pt.Value)
				s.errs = append(s.errs, err)
				return err
			},
			Retry: func(context.Context, *mongo.Database, *opState) error { return nil },
			Check: func(t *testing.T, db *mongo.Database, s *opState) {
				if s.errs[0] == nil {
					checkExactly(t, db, bySensor(before, []bucket.Point[string, reading]{pt}))
					return
				}
				require.ErrorContains(t, s.errs[0], "bucket: Add: ")
				bks := storedBuckets(t, db)
				checkBuckets(t, bks, faultCap, time.Hour)
				var n int
				for _, b := range bks {
					n += b.Count
				}
				stored := n - len(before)
				require.Contains(t, []int{0, 1}, stored, "stored once or not at all")
				want := before
				if stored == 1 {
					want = append(slices.Clone(before), pt)
				}
				checkExactly(t, db, bySensor(want))
			},
		})
	})
}

// deleteCase is the fault case of a delete of the buckets before 02:00:
// one deleteMany, safe to send again; the final state keeps exactly the
// readings of the buckets that are not all before it.
func deleteCase(p bucket.Plan, op func(ctx context.Context, s *bucket.Buckets[string, reading]) error, kept map[string][]reading) faults.Case[*opState] {
	before := slices.Concat(points("s1", 0, 1, 61, 62, 121, 122), points("s2", 5, 65, 125))
	return faults.Case[*opState]{
		Reuse: true,
		Prepare: func(t *testing.T, db *mongo.Database) *opState {
			prepareStore(t, db, p, before)
			return &opState{}
		},
		Op: func(ctx context.Context, db *mongo.Database, s *opState) error {
			err := op(ctx, faultStore(db, p))
			s.errs = append(s.errs, err)
			return err
		},
		Check: func(t *testing.T, db *mongo.Database, s *opState) {
			checkExactly(t, db, kept)
			for _, err := range s.errs {
				if err != nil {
					require.ErrorContains(t, err, "bucket: Delete")
				}
			}
		},
	}
}

// faultsDeleteBefore: DeleteBefore is one deleteMany; broken before
// or inside it and sent again, it leaves exactly the buckets not all
// before t ("running it again is harmless").
func faultsDeleteBefore(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		faults.Run(t, faults.New(t), deleteCase(p, func(ctx context.Context, s *bucket.Buckets[string, reading]) error {
			return s.DeleteBefore(ctx, at(2*time.Hour))
		}, bySensor(points("s1", 121, 122), points("s2", 125))))
	})
}

// faultsDeleteSeriesBefore: likewise for one series.
func faultsDeleteSeriesBefore(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		faults.Run(t, faults.New(t), deleteCase(p, func(ctx context.Context, s *bucket.Buckets[string, reading]) error {
			return s.DeleteSeriesBefore(ctx, "s1", at(2*time.Hour))
		}, bySensor(points("s1", 121, 122), points("s2", 5, 65, 125))))
	})
}

// readState is what a read of a fault case returned last, and the errors
// its calls returned.
type readState[T any] struct {
	got  []T
	errs []error
}

// readFixture is the series of the read fault tests: a reading every five
// minutes for 43 hours in buckets of four (three buckets a window, 129 in
// all: more than the first batch of a find, 101), so that every read
// needs a getMore.
func readFixture() []bucket.Point[string, reading] {
	var pts []bucket.Point[string, reading]
	for m := 0; m < 43*60; m += 5 {
		pts = append(pts, points("s1", m)...)
	}
	return slices.Concat(pts, points("s2", 0, 10))
}

// readCase is the fault case of a read: it yields an error, or all of the
// right result; read again on a healthy connection, the right result.
func readCase[T any](p bucket.Plan, op string, read func(ctx context.Context, s *bucket.Buckets[string, reading]) ([]T, error), want []T) faults.Case[*readState[T]] {
	return faults.Case[*readState[T]]{
		Reuse: true,
		Prepare: func(t *testing.T, db *mongo.Database) *readState[T] {
			prepareStore(t, db, p, readFixture())
			return &readState[T]{}
		},
		Op: func(ctx context.Context, db *mongo.Database, s *readState[T]) error {
			got, err := read(ctx, faultStore(db, p))
			s.got = got
			s.errs = append(s.errs, err)
			return err
		},
		Check: func(t *testing.T, _ *mongo.Database, s *readState[T]) {
			require.Equal(t, want, s.got, "a complete and correct result")
			for _, err := range s.errs {
				if err != nil {
					require.ErrorContains(t, err, "bucket: "+op+": ")
				}
			}
		},
	}
}

// drain collects an iterator up to its first error.
func drain[T any](seq func(yield func(T, error) bool)) ([]T, error) {
	var out []T
	for v, err := range seq {
		if err != nil {
			return out, err
		}
		out = append(out, v)
	}
	return out, nil
}

// faultsRange: Range over 129 buckets (a find and a getMore), broken
// at each: the caller gets an error, or every reading of the interval in
// time order.
func faultsRange(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		from, to := at(5*time.Minute), at(43*time.Hour)
		want := inRange(bySensor(readFixture())["s1"], from, to)
		faults.Run(t, faults.New(t), readCase(p, "Range", func(ctx context.Context, s *bucket.Buckets[string, reading]) ([]reading, error) {
			got, err := drain(s.Range(ctx, "s1", from, to))
			return utc(got), err
		}, want))
	})
}

// faultsSummaries: Summaries over 129 buckets, in 104 steps of 25
// minutes that split two buckets in three, broken at each command (on
// the client path: a find and a getMore; on the server path: an
// aggregate and a getMore): an error, or the right summaries.
func faultsSummaries(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		from, to, step := at(0), at(43*time.Hour), 25*time.Minute
		want := summarise(bySensor(readFixture())["s1"], from, to, step)
		require.Greater(t, len(want), 101)
		faults.Run(t, faults.New(t), readCase(p, "Summaries", func(ctx context.Context, s *bucket.Buckets[string, reading]) ([]bucket.Summary, error) {
			return drain(s.Summaries(ctx, "s1", from, to, step))
		}, want))
	})
}

// faultsLatest: Latest of a series whose newest window holds three
// buckets (two finds), broken at each: an error, or the newest reading.
func faultsLatest(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		all := sortReadings(bySensor(readFixture())["s1"])
		faults.Run(t, faults.New(t), readCase(p, "Latest", func(ctx context.Context, s *bucket.Buckets[string, reading]) ([]reading, error) {
			r, err := s.Latest(ctx, "s1")
			if err != nil {
				return nil, err
			}
			return utc([]reading{r}), nil
		}, all[len(all)-1:]))
	})
}

// faultsTimeSeriesFirstUse: the first AddMany of a TimeSeries creates
// its collection (and, before MongoDB 6.3, its index) and inserts; broken
// at each command and called again, the collection is a time-series
// collection with the index {meta, at}, whose creation a fault after the
// create does not lose, and every reading is stored: once where the fault
// struck the creation, once or twice where it struck the insert (its
// godoc: an insert with driver-generated ids that may have applied is
// not exact to send again).
func faultsTimeSeriesFirstUse(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		mongotest.Require(t, patterns.FeatureTimeSeries)
		if p == portable {
			t.Skip("skipped: the portable plan lacks time-series collections (TestTimeSeriesUnsupported covers it)")
		}
		op := slices.Concat(points("s1", 0, 1, 2), points("s2", 60))
		faults.Run(t, faults.New(t), faults.Case[*opState]{
			Prepare: func(*testing.T, *mongo.Database) *opState { return &opState{} },
			Op: func(ctx context.Context, db *mongo.Database, s *opState) error {
				err := faultTimeSeries(db, p).AddMany(ctx, op)
				s.errs = append(s.errs, err)
				return err
			},
			Check: func(t *testing.T, db *mongo.Database, s *opState) {
				ctx := context.Background()
				specs, err := db.ListCollectionSpecifications(ctx, bson.D{{Key: "name", Value: "readings"}})
				require.NoError(t, err)
				require.Len(t, specs, 1)
				require.Equal(t, "timeseries", specs[0].Type)
				cur, err := db.Collection("readings").Indexes().List(ctx)
				require.NoError(t, err)
				var ixs []struct {
					Key bson.D `bson:"key"`
				}
				require.NoError(t, cur.All(ctx, &ixs))
				require.True(t, slices.ContainsFunc(ixs, func(ix struct {
					Key bson.D `bson:"key"`
				}) bool {
					return len(ix.Key) == 2 && ix.Key[0].Key == "meta" && ix.Key[1].Key == "at"
				}), "the index {meta, at}: %v", ixs)
				most := 1
				if err := s.errs[0]; err != nil && !strings.Contains(err.Error(), "create time-series collection") {
					most = 2
				}
				for sensor, rs := range bySensor(op) {
					got := map[time.Time]int{}
					for _, r := range utc(collect(t, faultTimeSeries(db, p).Range(ctx, sensor, at(0), at(2*time.Hour)))) {
						got[r.At]++
					}
					for _, r := range rs {
						require.True(t, got[r.At] >= 1 && got[r.At] <= most, "sensor %s: reading at %v stored %d times (at most %d)", sensor, r.At, got[r.At], most)
					}
				}
			},
		})
	})
}

// faultTimeSeries is a TimeSeries on db taking the path p.
func faultTimeSeries(db *mongo.Database, p bucket.Plan) *bucket.TimeSeries[string, reading] {
	ts, err := bucket.NewTimeSeries[string, reading](db, timeSeriesConfig(config(0)))
	if err != nil {
		panic(err)
	}
	bucket.ForceTimeSeriesPlan(ts, p)
	return ts
}

// TestFaultsAddManyResendRefused: a bucket holds a reading; the first
// call tops it up with two, and its update is kept and then never
// reaches the server (the call's deadline passes first): both readings
// of unknown outcome. The retry sends the top-up again, and the server
// refuses it with an error other than a duplicate key (the bucket's
// measurements are not an array for that moment, as a statement timeout
// or a failover would refuse it): the refusal proves only that this send
// did not apply, so the readings stay of unknown outcome, not failed.
// Then the kept first send reaches the server late, and applies; a third
// call of the same points stores nothing more: each reading once.
func TestFaultsAddManyResendRefused(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		before, op := points("s1", 0), points("s1", 10, 11)
		prepareStore(t, db, p, before)

		// The first call's update: kept, then held until its deadline
		// passed, so that the driver never writes it to the connection.
		var kept bson.Raw
		var once atomic.Bool
		c := mongotest.Connect(t, mongotest.URI(), &event.CommandMonitor{Started: func(ctx context.Context, e *event.CommandStartedEvent) {
			if e.CommandName != "update" || !once.CompareAndSwap(false, true) {
				return
			}
			kept = slices.Clone(e.Command)
			<-ctx.Done()
		}}, nil)
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := faultStore(c.Database(db.Name()), p).AddMany(cctx, op)
		cancel()
		pe, ok := errors.AsType[*bucket.PartialError](err)
		require.True(t, ok, "the first call: %v", err)
		require.Equal(t, []int{0, 1}, pe.Unknown)
		require.Empty(t, pe.Failed)
		require.NotNil(t, kept)
		checkExactly(t, db, bySensor(before))

		// The retry's resend, refused.
		coll := db.Collection("readings")
		var bk bson.Raw
		require.NoError(t, coll.FindOne(ctx, bson.D{}).Decode(&bk))
		_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: bk.Lookup("_id")}}, bson.D{{Key: "$set", Value: bson.D{{Key: "measurements", Value: "not an array"}}}})
		require.NoError(t, err)
		err = faultStore(db, p).AddMany(ctx, op)
		pe, ok = errors.AsType[*bucket.PartialError](err)
		require.True(t, ok, "the retry: %v", err)
		require.Equal(t, []int{0, 1}, pe.Unknown, "a refused resend leaves the outcome unknown: %v", err)
		require.Empty(t, pe.Failed, "a refused resend is not a failure: the first send may still apply")
		_, err = coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: bk.Lookup("_id")}}, bson.D{{Key: "$set", Value: bson.D{{Key: "measurements", Value: bk.Lookup("measurements")}}}})
		require.NoError(t, err)

		// The first send, late.
		var cmd bson.D
		for _, e := range mustElements(t, kept) {
			switch e.Key() {
			case "lsid", "$db", "txnNumber", "$clusterTime", "$readPreference", "maxTimeMS":
			default:
				cmd = append(cmd, bson.E{Key: e.Key(), Value: e.Value()})
			}
		}
		var res struct {
			N int `bson:"n"`
		}
		require.NoError(t, db.RunCommand(ctx, cmd).Decode(&res))
		require.Equal(t, 1, res.N, "the late first send applied")

		require.NoError(t, faultStore(db, p).AddMany(ctx, op), "the third call")
		checkExactly(t, db, bySensor(before, op))
	})
}

// mustElements returns the elements of a document.
func mustElements(t *testing.T, doc bson.Raw) []bson.RawElement {
	t.Helper()
	els, err := doc.Elements()
	require.NoError(t, err)
	return els
}

// TestFaultsAddManyUnderDeadlines: 8 writers, each with a Buckets of its
// own, add readings of 3 series into one collection, every call with a
// deadline of 1 to 20 ms (longer with each attempt, so that every call
// ends), each call retried with the same points until it succeeds, as
// AddMany's godoc allows: every reading ends stored exactly once, but for
// the godoc's second exception (checkStoredOnceButLateUpserts), and every
// bucket agrees with its measurements.
func TestFaultsAddManyUnderDeadlines(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		const writers, perCall = 8, 5
		calls := mongotest.Scale(30, 4)
		db := mongotest.DB(t)
		prepareStore(t, db, p, nil)
		sensors := []string{"s1", "s2", "s3"}
		var all []bucket.Point[string, reading]
		var mu sync.Mutex
		var attempts, failures atomic.Int64
		faults.Concurrently(t, writers, func(w int) string { return fmt.Sprintf("writer_%d", w) }, func(t *testing.T, w int) {
			s := faultStore(db, p)
			rng := rand.New(rand.NewPCG(uint64(w), 20))
			for i := range calls {
				var pts []bucket.Point[string, reading]
				for j := range perCall {
					n := (i*writers+w)*perCall + j
					sensor := sensors[rng.IntN(len(sensors))]
					pts = append(pts, bucket.Point[string, reading]{Meta: sensor, Value: readingAt(at(time.Duration(n)*time.Minute), n)})
				}
				for attempt := 0; ; attempt++ {
					deadline := time.Duration(1+rng.IntN(20)) * time.Millisecond * time.Duration(1+attempt/4)
					ctx, cancel := context.WithTimeout(context.Background(), deadline)
					err := s.AddMany(ctx, pts)
					cancel()
					attempts.Add(1)
					if err == nil {
						break
					}
					failures.Add(1)
					require.ErrorContains(t, err, "bucket: AddMany: ")
					require.Less(t, attempt, 200, "a call that never succeeds: %v", err)
				}
				mu.Lock()
				all = append(all, pts...)
				mu.Unlock()
			}
		})
		mongotest.Detail(t, "%d calls, %d attempts, %d of them failed", writers*calls, attempts.Load(), failures.Load())
		checkStoredOnceButLateUpserts(t, db, bySensor(all))
	})
}

// checkStoredOnceButLateUpserts is checkExactly for calls retried after
// their deadlines, with the one exception of AddMany's godoc that no
// DeleteBefore is needed for: "a one-measurement upsert after two lost
// races that the server runs only after the retry has read" stores its
// measurement again. Such an upsert is the only statement that can apply
// more than once (no guard on its id): so an AddMany statement's id may
// appear more than once among the buckets' writes, and a reading may be
// stored c > 1 times only as the measurement of such a statement, applied
// c times, every copy in a bucket its id wrote to; one reading per
// statement. Every other reading is stored exactly once.
func checkStoredOnceButLateUpserts(t *testing.T, db *mongo.Database, want map[string][]reading) {
	t.Helper()
	bks := storedBuckets(t, db)
	applied := map[bson.ObjectID]int{}
	once := slices.Clone(bks) // each statement's id once, for checkBuckets
	for i, b := range bks {
		for _, id := range b.Writes {
			applied[id]++
		}
		once[i].Writes = slices.Compact(slices.SortedFunc(slices.Values(b.Writes), func(x, y bson.ObjectID) int { return bytes.Compare(x[:], y[:]) }))
	}
	checkBuckets(t, once, faultCap, time.Hour)
	type copyOf struct {
		sensor string
		r      reading
	}
	copies := map[copyOf][]storedBucket{} // a bucket once per copy it holds
	for _, b := range bks {
		for _, r := range utc(b.Points) {
			copies[copyOf{b.Meta, r}] = append(copies[copyOf{b.Meta, r}], b)
		}
	}
	explained := map[bson.ObjectID]bool{}
	for sensor, rs := range want {
		for _, r := range rs {
			in := copies[copyOf{sensor, r}]
			require.NotEmpty(t, in, "sensor %s: %v not stored", sensor, r)
			delete(copies, copyOf{sensor, r})
			if len(in) == 1 {
				continue
			}
			// The id of a statement applied len(in) times that wrote to
			// each bucket holding a copy, as often as it holds copies.
			var by bson.ObjectID
			for id, n := range applied {
				if n == len(in) && !explained[id] && writesAll(in, id) {
					by = id
					break
				}
			}
			require.False(t, by.IsZero(), "sensor %s: %v stored %d times, not by one statement applied as often (AddMany's godoc admits only a late one-measurement upsert)", sensor, r, len(in))
			explained[by] = true
			mongotest.Detail(t, "sensor %s: %v stored %d times by the late one-measurement upsert %s", sensor, r, len(in), by.Hex())
		}
	}
	require.Empty(t, copies, "readings no call stored")
	for id, n := range applied {
		require.True(t, n == 1 || explained[id], "statement %s applied %d times without storing a reading as often", id.Hex(), n)
	}
}

// writesAll reports whether the statement id wrote to each bucket of in
// (a bucket listed once per copy it holds of one reading) at least as
// often as it holds copies.
func writesAll(in []storedBucket, id bson.ObjectID) bool {
	for _, b := range in {
		held, wrote := 0, 0
		for _, c := range in {
			if c.ID == b.ID {
				held++
			}
		}
		for _, w := range b.Writes {
			if w == id {
				wrote++
			}
		}
		if wrote < held {
			return false
		}
	}
	return true
}
