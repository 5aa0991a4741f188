package bucket_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/bucket"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// TestTimeSeriesUnsupported: on a server without time-series collections
// (FerretDB 2.x would silently create a plain collection) every method
// refuses, naming the feature, and creates nothing. It runs on every
// server, with the plans of those that lack them.
func TestTimeSeriesUnsupported(t *testing.T) {
	for name, srv := range map[string]*patterns.Server{
		"portable":     mongotest.Portable(),
		"FerretDB 2.7": mongotest.KnownServers()["FerretDB 2.7"],
		"server":       mongotest.Server(),
	} {
		t.Run(name, func(t *testing.T) {
			if srv.Has(patterns.FeatureTimeSeries) {
				t.Skipf("skipped: %s has %s, which TestTimeSeriesCollection covers", srv, patterns.FeatureTimeSeries)
			}
			ctx := context.Background()
			db := mongotest.DB(t)
			s, err := bucket.NewTimeSeries[string, reading](db, config(0))
			require.NoError(t, err)
			bucket.ForceTimeSeriesPlan(s, bucket.PlanFor(srv))
			r := readingAt(at(0), 0)
			for name, err := range map[string]error{
				"Add":                s.Add(ctx, "s1", r),
				"AddMany":            s.AddMany(ctx, []bucket.Point[string, reading]{{Meta: "s1", Value: r}}),
				"Range":              firstErr(s.Range(ctx, "s1", at(0), at(time.Hour))),
				"Summaries":          firstErr(s.Summaries(ctx, "s1", at(0), at(time.Hour), time.Hour)),
				"DeleteBefore":       s.DeleteBefore(ctx, at(0)),
				"DeleteSeriesBefore": s.DeleteSeriesBefore(ctx, "s1", at(0)),
			} {
				ue, ok := errors.AsType[*patterns.UnsupportedError](err)
				require.True(t, ok, "%s: %v", name, err)
				require.Equal(t, patterns.FeatureTimeSeries, ue.Feature, name)
				require.ErrorIs(t, err, patterns.ErrUnsupported, name)
			}
			require.Len(t, s.Indexes(), 1, "the index {meta, at}, which Indexes names without sending anything")
			names, err := db.ListCollectionNames(ctx, bson.D{})
			require.NoError(t, err)
			require.Empty(t, names, "no collection was created")
		})
	}
}

// timeSeriesConfig is config with a granularity where the server cannot
// take the window as a bucket span (before MongoDB 6.3).
func timeSeriesConfig(cfg bucket.Config) bucket.Config {
	if !mongotest.Server().Has(patterns.FeatureTimeSeriesCustomBucketing) {
		cfg.Granularity = bucket.Minutes
	}
	return cfg
}

func TestTimeSeriesCollection(t *testing.T) {
	mongotest.Require(t, patterns.FeatureTimeSeries)
	ctx := context.Background()
	srv := mongotest.Server()

	t.Run("created on first use with the configured options", func(t *testing.T) {
		db := mongotest.DB(t)
		cfg := timeSeriesConfig(config(0))
		cfg.TTL = 90 * 24 * time.Hour
		s, err := bucket.NewTimeSeries[string, reading](db, cfg)
		require.NoError(t, err)
		c := mongotest.NewCounter(t, db)
		want := []string{"create", "insert"}
		if !srv.Has(patterns.FeatureTimeSeriesCustomBucketing) {
			want = []string{"create", "createIndexes", "insert"}
		}
		require.Equal(t, want, c.Count(func() { require.NoError(t, s.Add(ctx, "s1", readingAt(at(0), 0))) }))
		require.Equal(t, []string{"insert"}, c.Count(func() { require.NoError(t, s.Add(ctx, "s1", readingAt(at(time.Minute), 1))) }))

		specs, err := db.ListCollectionSpecifications(ctx, bson.D{{Key: "name", Value: "readings"}})
		require.NoError(t, err)
		require.Len(t, specs, 1)
		require.Equal(t, "timeseries", specs[0].Type)
		var o struct {
			TimeSeries struct {
				TimeField            string `bson:"timeField"`
				MetaField            string `bson:"metaField"`
				Granularity          string `bson:"granularity"`
				BucketMaxSpanSeconds int64  `bson:"bucketMaxSpanSeconds"`
			} `bson:"timeseries"`
			ExpireAfterSeconds int64 `bson:"expireAfterSeconds"`
		}
		require.NoError(t, bson.Unmarshal(specs[0].Options, &o))
		require.Equal(t, "at", o.TimeSeries.TimeField)
		require.Equal(t, "meta", o.TimeSeries.MetaField)
		if cfg.Granularity == "" {
			require.EqualValues(t, 3600, o.TimeSeries.BucketMaxSpanSeconds)
		} else {
			require.Equal(t, string(cfg.Granularity), o.TimeSeries.Granularity)
		}
		require.EqualValues(t, 90*24*3600, o.ExpireAfterSeconds)

		again, err := bucket.NewTimeSeries[string, reading](db, cfg)
		require.NoError(t, err)
		require.NoError(t, again.Add(ctx, "s1", readingAt(at(2*time.Minute), 2)), "an existing time-series collection is used as it is")
		require.Len(t, collect(t, again.Range(ctx, "s1", at(0), at(time.Hour))), 3)
	})

	t.Run("a plain collection of that name is refused", func(t *testing.T) {
		db := mongotest.DB(t)
		require.NoError(t, db.CreateCollection(ctx, "readings"))
		s, err := bucket.NewTimeSeries[string, reading](db, timeSeriesConfig(config(0)))
		require.NoError(t, err)
		require.ErrorIs(t, s.Add(ctx, "s1", readingAt(at(0), 0)), patterns.ErrInvalid)
		n, err := db.Collection("readings").CountDocuments(ctx, bson.D{})
		require.NoError(t, err)
		require.Zero(t, n)
	})

	t.Run("deletes by time are exact", func(t *testing.T) {
		s, _ := newTimeSeries(t, bucket.PlanFor(srv), config(0))
		s1 := series(t, s, "s1", at(0), 10*time.Minute, 18)
		s2 := series(t, s, "s2", at(0), 10*time.Minute, 18)
		cut := at(time.Hour + 35*time.Minute)
		err := s.DeleteSeriesBefore(ctx, "s1", cut)
		if !srv.Has(patterns.FeatureTimeSeriesDeletes) {
			ue, ok := errors.AsType[*patterns.UnsupportedError](err)
			require.True(t, ok, "%v", err)
			require.Equal(t, patterns.FeatureTimeSeriesDeletes, ue.Feature)
			return
		}
		require.NoError(t, err)
		require.Equal(t, inRange(s1, cut, at(24*time.Hour)), utc(collect(t, s.Range(ctx, "s1", at(0), at(24*time.Hour)))))
		require.Equal(t, inRange(s2, at(0), at(24*time.Hour)), utc(collect(t, s.Range(ctx, "s2", at(0), at(24*time.Hour)))))
		require.NoError(t, s.DeleteBefore(ctx, at(2*time.Hour)))
		require.Equal(t, inRange(s2, at(2*time.Hour), at(24*time.Hour)), utc(collect(t, s.Range(ctx, "s2", at(0), at(24*time.Hour)))))
	})
}
