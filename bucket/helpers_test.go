package bucket_test

import (
	"bytes"
	"context"
	"iter"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/bucket"
	"github.com/mongopatterns/mongopatterns/internal/dial"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// reading is the measurement of the tests: a temperature (double) and a
// humidity (int64), so both numeric kinds are summarised.
type reading struct {
	At   time.Time `bson:"at"`
	Temp float64   `bson:"temp"`
	Hum  int64     `bson:"hum"`
}

// base is the start of the tests' series, on an hour.
var base = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// at returns base plus d.
func at(d time.Duration) time.Time { return base.Add(d) }

// reading i of a series: temperatures are multiples of 0.25 and humidities
// integers, so every sum is exact in any order and the two paths of
// Summaries can be compared with Equal.
func readingAt(t time.Time, i int) reading {
	return reading{At: t, Temp: float64(i%97)/4 - 5, Hum: int64(i % 41)}
}

func config(cap int) bucket.Config {
	return bucket.Config{Collection: "readings", TimeField: "at", ValueFields: []string{"temp", "hum"}, Window: time.Hour, Cap: cap}
}

// portable is the plan of a server without optional features.
var portable = bucket.PlanFor(mongotest.Portable())

// newBuckets returns a bucket store taking the path p on a fresh
// database, with its indexes.
func newBuckets(t *testing.T, p bucket.Plan, cfg bucket.Config) (*bucket.Buckets[string, reading], *mongo.Database) {
	t.Helper()
	db := mongotest.DB(t)
	return newBucketsOn(t, db, p, cfg), db
}

// newBucketsOn returns a bucket store taking the path p on db, with its
// indexes.
func newBucketsOn(t *testing.T, db *mongo.Database, p bucket.Plan, cfg bucket.Config) *bucket.Buckets[string, reading] {
	t.Helper()
	s, err := bucket.New[string, reading](db, cfg)
	require.NoError(t, err)
	bucket.ForcePlan(s, p)
	require.NoError(t, patterns.EnsureIndexes(context.Background(), s.Indexes()...))
	return s
}

// collect drains an iterator, failing on the first error.
func collect[V any](t *testing.T, seq iter.Seq2[V, error]) []V {
	t.Helper()
	var out []V
	for v, err := range seq {
		require.NoError(t, err)
		out = append(out, v)
	}
	return out
}

// firstErr returns the first error an iterator yields.
func firstErr[V any](seq iter.Seq2[V, error]) error {
	for _, err := range seq {
		if err != nil {
			return err
		}
	}
	return nil
}

// utc normalises the times of readings read back (the driver decodes
// dates in the local zone).
func utc(rs []reading) []reading {
	for i := range rs {
		rs[i].At = rs[i].At.UTC()
	}
	return rs
}

// inRange returns the readings with from <= At < to, in time order.
func inRange(rs []reading, from, to time.Time) []reading {
	var out []reading
	for _, r := range rs {
		if !r.At.Before(from) && r.At.Before(to) {
			out = append(out, r)
		}
	}
	slices.SortStableFunc(out, func(a, b reading) int { return a.At.Compare(b.At) })
	return out
}

// summarise is Summaries computed the obvious way over the raw readings.
func summarise(rs []reading, from, to time.Time, step time.Duration) []bucket.Summary {
	byStep := map[time.Time]*bucket.Summary{}
	for _, r := range inRange(rs, from, to) {
		start := from.Add(r.At.Sub(from) / step * step)
		s := byStep[start]
		if s == nil {
			s = &bucket.Summary{Start: start, End: minTime(start.Add(step), to), Values: map[string]bucket.Stats{
				"temp": {Min: math.Inf(1), Max: math.Inf(-1)}, "hum": {Min: math.Inf(1), Max: math.Inf(-1)},
			}}
			byStep[start] = s
		}
		s.Count++
		for f, v := range map[string]float64{"temp": r.Temp, "hum": float64(r.Hum)} {
			st := s.Values[f]
			st.Min, st.Max, st.Sum = min(st.Min, v), max(st.Max, v), st.Sum+v
			s.Values[f] = st
		}
	}
	var out []bucket.Summary
	for _, s := range byStep {
		for f, st := range s.Values {
			st.Mean = st.Sum / float64(s.Count)
			s.Values[f] = st
		}
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b bucket.Summary) int { return a.Start.Compare(b.Start) })
	return out
}

// storedBucket is a bucket document as stored.
type storedBucket struct {
	ID      bson.ObjectID   `bson:"_id"`
	Meta    string          `bson:"meta"`
	Start   time.Time       `bson:"start"`
	First   time.Time       `bson:"first"`
	Last    time.Time       `bson:"last"`
	Count   int             `bson:"count"`
	Points  []reading       `bson:"measurements"`
	Writes  []bson.ObjectID `bson:"writes"`
	Summary map[string]struct {
		Min, Max, Sum float64
	} `bson:"summary"`
}

func storedBuckets(t *testing.T, db *mongo.Database) []storedBucket {
	t.Helper()
	cur, err := db.Collection("readings").Find(context.Background(), bson.D{})
	require.NoError(t, err)
	var out []storedBucket
	require.NoError(t, cur.All(context.Background(), &out))
	return out
}

// checkBuckets checks the invariants of every bucket: within the cap, the
// count equal to its number of measurements, first and last their extreme
// times, every measurement in the bucket's window, a summary equal to
// what its measurements give, and the ids of the AddMany statements that
// wrote to it each once (a statement applies once), no more of them than
// measurements.
func checkBuckets(t *testing.T, bks []storedBucket, cap int, window time.Duration) {
	t.Helper()
	for _, b := range bks {
		require.LessOrEqual(t, b.Count, cap, "bucket %s holds more than the cap", b.ID.Hex())
		require.Len(t, b.Points, b.Count, "bucket %s: count and measurements disagree", b.ID.Hex())
		require.LessOrEqual(t, len(b.Writes), b.Count, "bucket %s: more statements than measurements", b.ID.Hex())
		require.Len(t, slices.Compact(slices.SortedFunc(slices.Values(b.Writes), func(x, y bson.ObjectID) int { return bytes.Compare(x[:], y[:]) })), len(b.Writes), "bucket %s: a statement applied twice", b.ID.Hex())
		first, last := b.Points[0].At, b.Points[0].At
		temp := struct{ Min, Max, Sum float64 }{math.Inf(1), math.Inf(-1), 0}
		hum := temp
		for _, p := range b.Points {
			require.False(t, p.At.Before(b.Start) || !p.At.Before(b.Start.Add(window)), "bucket %s: %v outside its window %v", b.ID.Hex(), p.At, b.Start)
			first, last = minTime(first, p.At), maxTime(last, p.At)
			temp.Min, temp.Max, temp.Sum = min(temp.Min, p.Temp), max(temp.Max, p.Temp), temp.Sum+p.Temp
			h := float64(p.Hum)
			hum.Min, hum.Max, hum.Sum = min(hum.Min, h), max(hum.Max, h), hum.Sum+h
		}
		require.True(t, first.Equal(b.First) && last.Equal(b.Last), "bucket %s: first/last", b.ID.Hex())
		require.Equal(t, temp, b.Summary["temp"], "bucket %s: temp summary", b.ID.Hex())
		require.Equal(t, hum, b.Summary["hum"], "bucket %s: hum summary", b.ID.Hex())
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// statements counts the statements a client sends to one database: each
// document of an insert, each statement of an update or a delete, each
// find, aggregate and getMore; and the update statements refused with a
// duplicate key (the top-ups of AddMany that lost their room). On a
// server without patterns.FeatureBatchedUpdates every update statement is
// a command of its own, so there they are the update commands too.
type statements struct {
	db string
	mu sync.Mutex
	// writes and reads since the last reset; refused: update statements
	// refused with a duplicate key.
	writes, reads, refused int
}

// newStatementsDB connects a client of its own to the server in use (as
// mongotest connects its clients) that counts the statements sent to a
// fresh database, and returns that database through it.
func newStatementsDB(t *testing.T) (*mongo.Database, *statements) {
	t.Helper()
	name := mongotest.DB(t).Name() // dropped when the test ends
	c := &statements{db: name}
	monitor := &event.CommandMonitor{
		Started: func(_ context.Context, e *event.CommandStartedEvent) {
			if e.DatabaseName != name {
				return
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			switch e.CommandName {
			case "insert":
				c.writes += arrayLen(e.Command.Lookup("documents"))
			case "update":
				c.writes += arrayLen(e.Command.Lookup("updates"))
			case "delete":
				c.writes += arrayLen(e.Command.Lookup("deletes"))
			case "find", "aggregate", "getMore":
				c.reads++
			}
		},
		Succeeded: func(_ context.Context, e *event.CommandSucceededEvent) {
			if e.DatabaseName != name || e.CommandName != "update" {
				return
			}
			arr, _ := e.Reply.Lookup("writeErrors").ArrayOK()
			vals, _ := arr.Values()
			c.mu.Lock()
			defer c.mu.Unlock()
			for _, v := range vals {
				if code, ok := v.Document().Lookup("code").AsInt64OK(); ok && code == 11000 {
					c.refused++
				}
			}
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client, _, err := dial.Connect(ctx, mongotest.URI(), func() *options.ClientOptions {
		return options.Client().SetMonitor(monitor).SetTimeout(2 * time.Minute)
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	return client.Database(name), c
}

func arrayLen(v bson.RawValue) int {
	arr, _ := v.ArrayOK()
	vals, _ := arr.Values()
	return len(vals)
}

// reset forgets the statements counted so far.
func (c *statements) reset() {
	c.mu.Lock()
	c.writes, c.reads, c.refused = 0, 0, 0
	c.mu.Unlock()
}

// counts returns the statements counted since the last reset.
func (c *statements) counts() (writes, reads, refused int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes, c.reads, c.refused
}
