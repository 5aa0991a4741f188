package bucket_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/bucket"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
)

// TestConcurrentWriters: 4 goroutines write 250 readings each to each of 4
// sensors (4,000 readings; fewer on a slow server, see below), two with
// Add and two with AddMany. Then Range returns every reading exactly once,
// in time order; no bucket holds more than the cap; each bucket's count
// equals its number of measurements and its summary what they give; each window has at most ceil(N/cap) +
// (writers - 1) buckets; and Summaries, on every path the server allows,
// matches a computation over the raw readings.
//
// Each sensor has its own store and collection: FerretDB 1.x filters only
// _id in its storage, so every upsert decodes the whole collection.
// Sensors sharing a collection are covered by TestRange, TestSummaries,
// TestDeleteBeforeKeepsWholeBuckets and TestAddManyConcurrentStatements.
func TestConcurrentWriters(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, testConcurrentWriters)
}

func testConcurrentWriters(t *testing.T, p bucket.Plan) {
	const (
		writers  = 4
		capacity = 25
		batch    = 5 // readings per sensor in one AddMany; perSensor is a multiple
	)
	// Per writer: 250 (4,000 readings in all) where writes are fast, 60
	// (960) on the embedded dev server, which does a few dozen upserts a
	// second and scans the collection for each. What is checked is the
	// same.
	perSensor := mongotest.Scale(250, 60)
	sensors := []string{"s1", "s2", "s3", "s4"}
	ctx := context.Background()
	stores := map[string]*bucket.Buckets[string, reading]{}
	dbs := map[string]*mongo.Database{}
	for _, sensor := range sensors {
		stores[sensor], dbs[sensor] = newBuckets(t, p, config(capacity))
	}

	// Writer w writes the readings at minutes i*writers+w: the writers
	// interleave in every window (60 readings an hour per sensor).
	readingOf := func(w, i int) reading {
		n := i*writers + w
		return readingAt(at(time.Duration(n)*time.Minute), n)
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			batches := map[string][]bucket.Point[string, reading]{}
			for i := range perSensor {
				for _, sensor := range sensors {
					if w%2 == 0 {
						if err := stores[sensor].Add(ctx, sensor, readingOf(w, i)); err != nil {
							errs <- err
							return
						}
						continue
					}
					batches[sensor] = append(batches[sensor], bucket.Point[string, reading]{Meta: sensor, Value: readingOf(w, i)})
				}
				if (i+1)%batch != 0 {
					continue
				}
				for sensor, pts := range batches {
					if err := stores[sensor].AddMany(ctx, pts); err != nil {
						errs <- err
						return
					}
					batches[sensor] = pts[:0]
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	mongotest.Detail(t, "%d readings by %d writers in %v on %s", writers*perSensor*len(sensors), writers, time.Since(start), mongotest.Server())

	var want []reading
	for n := range writers * perSensor {
		want = append(want, readingAt(at(time.Duration(n)*time.Minute), n))
	}
	from, to := at(-time.Hour), at(24*time.Hour)
	for _, sensor := range sensors {
		s, db := stores[sensor], dbs[sensor]
		require.Equal(t, want, utc(collect(t, s.Range(ctx, sensor, from, to))), "sensor %s: every reading once, in time order", sensor)

		bks := storedBuckets(t, db)
		checkBuckets(t, bks, capacity, time.Hour)
		perWindow := map[time.Time]int{}
		for _, b := range bks {
			perWindow[b.Start.UTC()]++
		}
		for start, n := range perWindow {
			// A window holds at most 60 readings of a sensor.
			require.LessOrEqual(t, n, (60+capacity-1)/capacity+writers-1, "sensor %s, window %v", sensor, start)
		}
		mongotest.Detail(t, "sensor %s: %d buckets for %d hours", sensor, len(bks), len(perWindow))

		for _, q := range []struct {
			from, to time.Time
			step     time.Duration
		}{
			{from, to, time.Hour},
			{at(30 * time.Minute), at(15 * time.Hour), 90 * time.Minute},
		} {
			require.Equal(t, summarise(want, q.from, q.to, q.step), collect(t, s.Summaries(ctx, sensor, q.from, q.to, q.step)),
				"sensor %s, step %v", sensor, q.step)
		}
	}
}

// TestBucketBound: N readings of one series in one window make at most
// ceil(N/cap) + (writers - 1) buckets, and exactly ceil(N/cap) for one
// writer, whether they come by Add or by AddMany.
func TestBucketBound(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, testBucketBound)
}

func testBucketBound(t *testing.T, p bucket.Plan) {
	const n, capacity = 100, 7
	for _, tc := range []struct {
		writers, batch int // batch: readings per AddMany call; 0: Add
	}{{1, 0}, {4, 0}, {1, 3}, {4, 3}, {4, 11}} {
		name := fmt.Sprintf("%d writers with Add", tc.writers)
		if tc.batch > 0 {
			name = fmt.Sprintf("%d writers with AddMany of %d", tc.writers, tc.batch)
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s, db := newBuckets(t, p, config(capacity))
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for w := range tc.writers {
				wg.Go(func() {
					var batch []bucket.Point[string, reading]
					for i := w; i < n; i += tc.writers {
						r := readingAt(at(time.Duration(i)*time.Second), i)
						if tc.batch == 0 {
							errs <- s.Add(ctx, "s1", r)
							continue
						}
						if batch = append(batch, bucket.Point[string, reading]{Meta: "s1", Value: r}); len(batch) == tc.batch || i+tc.writers >= n {
							errs <- s.AddMany(ctx, batch)
							batch = nil
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			bks := storedBuckets(t, db)
			checkBuckets(t, bks, capacity, time.Hour)
			limit := (n+capacity-1)/capacity + tc.writers - 1
			require.LessOrEqual(t, len(bks), limit)
			if tc.writers == 1 {
				require.Len(t, bks, (n+capacity-1)/capacity)
			}
			require.Len(t, collect(t, s.Range(ctx, "s1", at(0), at(time.Hour))), n)
		})
	}
}
