package bucket_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/bucket"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// sensorNames names n series.
func sensorNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("s%02d", i)
	}
	return out
}

// minutes returns, for each sensor, the readings at the minutes from..to
// (excluded) of base, in a batch that interleaves the sensors.
func minutes(sensors []string, from, to int) ([]bucket.Point[string, reading], map[string][]reading) {
	var pts []bucket.Point[string, reading]
	want := map[string][]reading{}
	for m := from; m < to; m++ {
		for _, s := range sensors {
			r := readingAt(at(time.Duration(m)*time.Minute), m)
			pts = append(pts, bucket.Point[string, reading]{Meta: s, Value: r})
			want[s] = append(want[s], r)
		}
	}
	return pts, want
}

// checkStored checks that each sensor's readings are stored once each,
// that no bucket holds more than capacity and that every bucket agrees
// with its measurements.
func checkStored(t *testing.T, s *bucket.Buckets[string, reading], db *mongo.Database, capacity int, want map[string][]reading) []storedBucket {
	t.Helper()
	for sensor, rs := range want {
		require.Equal(t, inRange(rs, at(-time.Hour), at(48*time.Hour)), utc(collect(t, s.Range(context.Background(), sensor, at(-time.Hour), at(48*time.Hour)))), "sensor %s: every reading once", sensor)
	}
	bks := storedBuckets(t, db)
	checkBuckets(t, bks, capacity, time.Hour)
	return bks
}

// perWindow counts the buckets of each series' window.
func perWindow(bks []storedBucket) map[string]int {
	out := map[string]int{}
	for _, b := range bks {
		out[b.Meta+" "+b.Start.UTC().Format(time.RFC3339)]++
	}
	return out
}

// TestAddManyStatements: AddMany sends one write statement per bucket it
// puts measurements in, and one find: 1,800 readings of ten series over
// three hours fill 30 buckets of 60 with 30 inserts; and after earlier
// writes left each series a part-full bucket, 1,800 more fill those with
// ten top-ups and 30 new buckets with 30 inserts. Within the bound of
// buckets filled plus series touched on every path; every reading stored
// once, buckets full but for the last of each series.
func TestAddManyStatements(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		ctx := context.Background()
		sensors := sensorNames(10)

		t.Run("new windows", func(t *testing.T) {
			db, c := newStatementsDB(t)
			s := newBucketsOn(t, db, p, config(60))
			pts, want := minutes(sensors, 0, 180)
			require.Len(t, pts, 1800)
			c.reset()
			require.NoError(t, s.AddMany(ctx, pts))
			writes, reads, _ := c.counts()
			mongotest.Detail(t, "1,800 readings in 30 buckets: %d writes, %d reads", writes, reads)
			require.Equal(t, 30, writes, "one insert per bucket")
			require.Equal(t, 1, reads, "one find")
			require.LessOrEqual(t, writes, 30+len(sensors), "buckets filled + series touched")
			require.LessOrEqual(t, writes+reads, 41)
			bks := checkStored(t, s, db, 60, want)
			require.Len(t, bks, 30)
			for _, b := range bks {
				require.Equal(t, 60, b.Count)
			}
		})

		t.Run("topping up", func(t *testing.T) {
			db, c := newStatementsDB(t)
			s := newBucketsOn(t, db, p, config(60))
			earlier, want := minutes(sensors, 0, 20)
			require.NoError(t, s.AddMany(ctx, earlier))
			pts, more := minutes(sensors, 20, 200)
			require.Len(t, pts, 1800)
			for s, rs := range more {
				want[s] = append(want[s], rs...)
			}
			c.reset()
			require.NoError(t, s.AddMany(ctx, pts))
			writes, reads, refused := c.counts()
			mongotest.Detail(t, "1,800 readings topping up 10 buckets and filling 30 more: %d writes, %d reads", writes, reads)
			require.Equal(t, 10+30, writes, "a top-up per part-full bucket, an insert per new bucket")
			require.Equal(t, 1, reads)
			require.Zero(t, refused)
			require.LessOrEqual(t, writes, 40+len(sensors), "buckets filled + series touched")
			bks := checkStored(t, s, db, 60, want)
			require.Len(t, bks, 40, "ceil(200/60) buckets per series: the part-full ones were filled first")
			for _, n := range perWindow(bks) {
				require.Equal(t, 1, n)
			}
		})
	})
}

// TestAddManyConcurrentStatements: four writers store 1,800 readings of
// ten series over three hours (30 windows of 60), each in two AddMany
// calls whose readings interleave with the others' in every window. Every
// reading is stored once, no bucket passes the cap, each window holds at
// most ceil(60/cap) + 3 buckets, and the writes of all calls stay within
// the buckets each call put readings in plus the series each touched.
//
// "contended" makes the room tight (a cap of 20, and more calls of fewer
// readings each), so that calls lose races for the room of the buckets
// they top up: the same guarantees hold, and the statements stay within
// what AddMany's godoc bounds them by.
func TestAddManyConcurrentStatements(t *testing.T) {
	t.Parallel() // beside TestFaults, which waits on its stalls
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		t.Run("1,800 readings", func(t *testing.T) {
			writes, filled, series, _ := concurrentAddMany(t, p, 10, 60, 2)
			require.LessOrEqual(t, writes, filled+series, "buckets filled + series touched, per call")
		})
		t.Run("contended", func(t *testing.T) {
			sensors := mongotest.Scale(10, 3)
			writes, filled, _, groups := concurrentAddMany(t, p, sensors, 20, 3)
			// Each statement that applied filled a bucket of its call's;
			// a call loses at most maxLostRaces races per window, then
			// writes what is left of it one upsert per reading (at most
			// 5 readings per window per call here).
			require.LessOrEqual(t, writes, filled+groups*(2+4))
		})
	})
}

// concurrentAddMany has four writers store the readings of sensors series
// over three hours, one a minute, into buckets of capacity, each writer
// in calls AddMany calls whose readings interleave with the others' in
// every window. It checks what holds on every server and returns the
// write statements, the buckets filled (per call, summed over the calls),
// the series touched and the windows written (likewise).
func concurrentAddMany(t *testing.T, p bucket.Plan, sensors, capacity, calls int) (writes, filled, series, groups int) {
	const writers = 4
	ctx := context.Background()
	names := sensorNames(sensors)
	db, c := newStatementsDB(t)
	s := newBucketsOn(t, db, p, config(capacity))
	c.reset()

	// Call k of writer w holds the readings at the minutes m with
	// m%writers == w and (m/writers)%calls == k, of every sensor; its
	// readings' Hum is its number, to tell which buckets it filled.
	want := map[string][]reading{}
	batches := make([][]bucket.Point[string, reading], writers*calls)
	for m := range 180 {
		call := m%writers*calls + m/writers%calls
		for _, sensor := range names {
			r := readingAt(at(time.Duration(m)*time.Minute), m)
			r.Hum = int64(call)
			batches[call] = append(batches[call], bucket.Point[string, reading]{Meta: sensor, Value: r})
			want[sensor] = append(want[sensor], r)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers*calls)
	for w := range writers {
		wg.Go(func() {
			for k := range calls {
				errs <- s.AddMany(ctx, batches[w*calls+k])
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	writes, reads, refused := c.counts()

	bks := checkStored(t, s, db, capacity, want)
	for window, n := range perWindow(bks) {
		require.LessOrEqual(t, n, (60+capacity-1)/capacity+writers-1, "window %s", window)
	}
	for _, b := range bks {
		calls := map[int64]bool{}
		for _, r := range b.Points {
			calls[r.Hum] = true
		}
		filled += len(calls)
	}
	series, groups = writers*calls*sensors, writers*calls*sensors*3
	mongotest.Detail(t, "%d calls: %d writes (%d refused for lack of room), %d reads; %d buckets, filled %d times", writers*calls, writes, refused, reads, len(bks), filled)
	require.GreaterOrEqual(t, writes-refused, filled, "each write that applied filled a bucket")
	require.LessOrEqual(t, refused, 2*groups, "at most two lost races per window per call")
	return writes, filled, series, groups
}

// lostRaces writes six readings of s1 with Add (a bucket of cap 10 with
// room for 4), then runs AddMany of eight more while another writer (on
// another client) adds one reading to that bucket before each of the first
// n update commands sent, so that AddMany's top-ups lose their room. It
// checks that every reading is stored once in ceil(N/10) buckets, none
// over the cap, and returns the commands AddMany sent (the other writer's
// updates among them).
func lostRaces(t *testing.T, p bucket.Plan, n int) []string {
	ctx := context.Background()
	cfg := config(10)
	s, db := newBuckets(t, p, cfg)
	var rs []reading
	var batch []bucket.Point[string, reading]
	for i := range 14 {
		r := readingAt(at(time.Duration(i)*time.Minute), i)
		rs = append(rs, r)
		if i < 6 {
			require.NoError(t, s.Add(ctx, "s1", r))
			continue
		}
		batch = append(batch, bucket.Point[string, reading]{Meta: "s1", Value: r})
	}
	other, err := bucket.New[string, reading](mongotest.NewClient(t).Database(db.Name()), cfg)
	require.NoError(t, err)
	var sent atomic.Int32
	mongotest.OnCommand(t, db, "update", func(ctx context.Context) {
		if k := int(sent.Add(1)); k <= n {
			r := readingAt(at(time.Duration(50+k)*time.Minute), 50+k)
			require.NoError(t, other.Add(ctx, "s1", r))
			rs = append(rs, r)
		}
	})
	c := mongotest.NewCounter(t, db)
	require.NoError(t, s.AddMany(ctx, batch))
	commands := c.Commands()
	bks := checkStored(t, s, db, 10, map[string][]reading{"s1": rs})
	require.Len(t, bks, (len(rs)+9)/10)
	return commands
}

// TestAddManyLostRace: when another writer takes the room of the bucket
// AddMany tops up between its read and its write, the guard refuses the
// top-up (nothing of it applies) and AddMany reads again and plans again;
// the readings end stored once, no bucket over the cap, as few buckets
// as one writer makes.
func TestAddManyLostRace(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		require.Equal(t, []string{"find", "update", "update", "find", "update", "insert"}, lostRaces(t, p, 1),
			"the top-up of 4 is refused (the other writer's update comes first); then a top-up of the 3 left and a new bucket of 5")
	})
}

// TestAddManyAddsOneByOneAfterTwoLostRaces: after two lost races in one
// window, AddMany stores the rest of that window one upsert per reading,
// as Add does, which cannot lose; the bucket bound of one writer holds.
func TestAddManyAddsOneByOneAfterTwoLostRaces(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		sent := lostRaces(t, p, 2)
		require.Equal(t, []string{"find", "update", "update", "find", "update", "update"}, sent[:6], "two top-ups refused (each after the other writer's update)")
		singles := sent[6:]
		require.NotContains(t, singles, "find")
		require.NotContains(t, singles, "insert")
		if len(singles) > 1 {
			require.Len(t, singles, 8, "one command per upsert")
		}
	})
}

// TestAddManyNumbersInsideMetas: metas that are embedded documents holding
// one number as int32, int64 and a double name one series, to the server
// and to AddMany alike: one call of three readings opens one bucket, two
// calls (of two, then one) fill one, and Range of any of the three metas
// reads all of them. (Decimals are left to bsonid's tests: the embedded
// FerretDB 1.x drops the connection on a query holding one.)
func TestAddManyNumbersInsideMetas(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		ctx := context.Background()
		metas := []bson.M{{"sensor": bson.M{"id": int32(7)}}, {"sensor": bson.M{"id": int64(7)}}, {"sensor": bson.M{"id": 7.0}}}
		pointsOf := func(from int) []bucket.Point[bson.M, reading] {
			out := make([]bucket.Point[bson.M, reading], len(metas))
			for i, m := range metas {
				out[i] = bucket.Point[bson.M, reading]{Meta: m, Value: readingAt(at(time.Duration(from+i)*time.Minute), from+i)}
			}
			return out
		}
		for _, calls := range [][]int{{3}, {2, 1}} {
			db := mongotest.DB(t)
			s, err := bucket.New[bson.M, reading](db, config(10))
			require.NoError(t, err)
			bucket.ForcePlan(s, p)
			require.NoError(t, patterns.EnsureIndexes(ctx, s.Indexes()...))
			pts := pointsOf(0)
			for _, n := range calls {
				require.NoError(t, s.AddMany(ctx, pts[:n]))
				pts = pts[n:]
			}
			n, err := db.Collection("readings").CountDocuments(ctx, bson.D{})
			require.NoError(t, err)
			require.EqualValues(t, 1, n, "calls of %v readings: one series, one bucket", calls)
			for _, m := range metas {
				require.Len(t, collect(t, s.Range(ctx, m, at(0), at(time.Hour))), len(metas), "Range of %v", m)
			}
		}
	})
}

// TestAddManyRetryKeepsWhatDeleteBeforeRemoved: a call tops up a bucket
// (readings 1-3 into the bucket of reading 0) and its insert of a new
// bucket (readings 4 and 5) is cut short: a PartialError, the top-up
// stored, the insert unknown. DeleteBefore then removes the topped-up
// bucket, and the call is retried. The retry stores the insert's readings
// only: it used to find the top-up's bucket gone and send the top-up
// again "as it was", bringing back readings 1-3 that DeleteBefore had
// removed (issue 34). The record of a failed call holds the statements of
// unknown outcome; what it stored is not sent again.
func TestAddManyRetryKeepsWhatDeleteBeforeRemoved(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		ctx := context.Background()
		s, db := newBuckets(t, p, config(4))
		require.NoError(t, s.AddMany(ctx, points("s1", 0)))
		op := points("s1", 1, 2, 3, 4, 5)

		cut, cancel := context.WithCancel(ctx)
		defer cancel()
		var once sync.Once
		mongotest.OnCommand(t, db, "insert", func(context.Context) { once.Do(cancel) })
		err := s.AddMany(cut, op)
		var pe *bucket.PartialError
		require.ErrorAs(t, err, &pe)
		require.Equal(t, []int{3, 4}, pe.Unknown, "the insert's readings")
		require.Empty(t, pe.Failed)

		require.NoError(t, s.DeleteBefore(ctx, at(4*time.Minute)))
		require.NoError(t, s.AddMany(ctx, op), "the retry")
		checkStored(t, s, db, 4, bySensor(points("s1", 4, 5)))
	})
}
