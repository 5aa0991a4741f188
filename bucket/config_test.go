package bucket_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/bucket"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

func TestConfigValidation(t *testing.T) {
	db := mongotest.Client().Database("config_validation") // New sends nothing
	with := func(change func(*bucket.Config)) bucket.Config {
		cfg := config(100)
		change(&cfg)
		return cfg
	}
	tests := []struct {
		name            string
		cfg             bucket.Config
		buckets, series bool // valid for New, for NewTimeSeries
	}{
		{"valid", config(100), true, true},
		{"day windows, a TTL, another meta field", with(func(c *bucket.Config) {
			c.Window, c.TTL, c.MetaField = 24*time.Hour, 90*24*time.Hour, "sensor"
		}), true, true},
		{"no value fields", with(func(c *bucket.Config) { c.ValueFields = nil }), true, true},
		{"no collection", with(func(c *bucket.Config) { c.Collection = "" }), false, false},
		{"collection with $", with(func(c *bucket.Config) { c.Collection = "a$b" }), false, false},
		{"system collection", with(func(c *bucket.Config) { c.Collection = "system.views" }), false, false},
		{"no time field", with(func(c *bucket.Config) { c.TimeField = "" }), false, false},
		{"dotted time field", with(func(c *bucket.Config) { c.TimeField = "a.b" }), false, false},
		{"operator value field", with(func(c *bucket.Config) { c.ValueFields = []string{"$temp"} }), false, false},
		{"value field twice", with(func(c *bucket.Config) { c.ValueFields = []string{"temp", "temp"} }), false, false},
		{"time field as a value", with(func(c *bucket.Config) { c.ValueFields = []string{"at"} }), false, false},
		{"meta field is the time field", with(func(c *bucket.Config) { c.MetaField = "at" }), false, false},
		{"meta field is a bucket field", with(func(c *bucket.Config) { c.MetaField = "count" }), false, true},
		{"zero window", with(func(c *bucket.Config) { c.Window = 0 }), false, true},
		{"negative window", with(func(c *bucket.Config) { c.Window = -time.Hour }), false, false},
		{"window below a millisecond", with(func(c *bucket.Config) { c.Window = time.Hour + time.Microsecond }), false, false},
		{"window not in seconds", with(func(c *bucket.Config) { c.Window = 1500 * time.Millisecond }), true, false},
		{"window not in seconds, with a granularity", with(func(c *bucket.Config) {
			c.Window, c.Granularity = 1500*time.Millisecond, bucket.Seconds
		}), true, true},
		{"window of two years", with(func(c *bucket.Config) { c.Window = 2 * 365 * 24 * time.Hour }), true, false},
		{"zero cap", with(func(c *bucket.Config) { c.Cap = 0 }), false, true},
		{"negative cap", with(func(c *bucket.Config) { c.Cap = -1 }), false, true},
		{"cap past 16 MiB", with(func(c *bucket.Config) { c.Cap = 1 << 20 }), false, true},
		{"TTL below a second", with(func(c *bucket.Config) { c.TTL = 1500 * time.Millisecond }), false, false},
		{"negative TTL", with(func(c *bucket.Config) { c.TTL = -time.Hour }), false, false},
		{"TTL past the server's limit", with(func(c *bucket.Config) { c.TTL = 100 * 365 * 24 * time.Hour }), false, false},
		{"unknown granularity", with(func(c *bucket.Config) { c.Granularity = "weeks" }), false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			check := func(err error, ok bool) {
				if ok {
					require.NoError(t, err)
					return
				}
				require.ErrorIs(t, err, patterns.ErrInvalid)
			}
			_, err := bucket.New[string, reading](db, tc.cfg)
			check(err, tc.buckets)
			_, err = bucket.NewTimeSeries[string, reading](db, tc.cfg)
			check(err, tc.series)
		})
	}

	t.Run("nil database", func(t *testing.T) {
		_, err := bucket.New[string, reading](nil, config(100))
		require.EqualError(t, err, "bucket: New: nil database: invalid")
		require.ErrorIs(t, err, patterns.ErrInvalid)
		_, err = bucket.NewTimeSeries[string, reading](nil, config(100))
		require.EqualError(t, err, "bucket: New: nil database: invalid")
	})
	t.Run("measurement types", func(t *testing.T) {
		type textTime struct {
			At string `bson:"at"`
		}
		type textValue struct {
			At   time.Time `bson:"at"`
			Temp string    `bson:"temp"`
		}
		type withMeta struct {
			At   time.Time `bson:"at"`
			Meta string    `bson:"meta"`
		}
		cfg := config(100)
		_, err := bucket.New[string, int](db, cfg)
		require.ErrorIs(t, err, patterns.ErrInvalid, "a measurement must be a document")
		_, err = bucket.New[string, textTime](db, cfg)
		require.ErrorIs(t, err, patterns.ErrInvalid, "the time must be a date")
		_, err = bucket.New[string, textValue](db, cfg)
		require.ErrorIs(t, err, patterns.ErrInvalid, "values must be numbers")
		_, err = bucket.NewTimeSeries[string, withMeta](db, cfg)
		require.ErrorIs(t, err, patterns.ErrInvalid, "the meta field goes beside the measurement's fields")
		_, err = bucket.New[string, *reading](db, cfg)
		require.NoError(t, err, "a pointer to a struct is a document")
		_, err = bucket.New[string, bson.M](db, cfg)
		require.NoError(t, err, "a map is checked at each write")
	})
}

// TestErrorFormat: errors read "bucket: <Operation>: <what>: <cause>".
func TestErrorFormat(t *testing.T) {
	ctx := context.Background()
	db := mongotest.Client().Database("error_format") // nothing is written
	cfg := config(100)
	cfg.TimeField = "a.b"
	_, err := bucket.New[string, reading](db, cfg)
	require.EqualError(t, err, `bucket: New: config.TimeField: field name "a.b" contains '.', which makes it a path; a single field is expected: invalid`)
	cfg = config(0)
	_, err = bucket.New[string, reading](db, cfg)
	require.EqualError(t, err, `bucket: New: Cap 0 is not positive: invalid`)

	s, err := bucket.New[any, reading](db, config(100))
	require.NoError(t, err)
	good := readingAt(at(0), 0)
	nan := good
	nan.Temp = math.NaN()
	err = s.AddMany(ctx, []bucket.Point[any, reading]{{Meta: "s1", Value: good}, {Meta: "s1", Value: good}, {Meta: "s1", Value: good}, {Meta: "s1", Value: nan}})
	require.EqualError(t, err, `bucket: AddMany: point 3: measurement's value field "temp" is NaN; NaN and infinities would poison min, max and sum: invalid`)
	err = s.Add(ctx, bson.M{"$ne": nil}, good)
	require.EqualError(t, err, `bucket: Add: meta of type bson.M: key "$ne" starts with '$', which makes it a query operator: invalid`)
	err = firstErr(s.Range(ctx, "s1", at(time.Hour), at(0)))
	require.ErrorContains(t, err, "bucket: Range: to (")
	require.ErrorIs(t, err, patterns.ErrInvalid)
}
