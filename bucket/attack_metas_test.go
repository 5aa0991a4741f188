package bucket_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/bucket"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// TestAttackSummariesBySeriesStringSymbol: SummariesBySeries' godoc
// (bucket/summaries.go:104): "Metas are one series when the server
// compares them equal, as for Add, Latest and Summaries". The server
// compares a string and a symbol of the same bytes as equal (manual,
// Comparison/Sort Order: "MongoDB treats some types as equivalent for
// comparison purposes ... Numbers ... Strings and symbols"; server source
// canonicalizeBSONType gives String and Symbol one place and
// compareElementValues compares their bytes; Value::compare in $group
// likewise); keyset's own doc says "as a string and a symbol of the same
// bytes are". One row per expected series.
func TestAttackSummariesBySeriesStringSymbol(t *testing.T) {
	rows := [][]any{
		{"x", bson.Symbol("x")},
		{bson.D{{Key: "a", Value: "y"}}, bson.D{{Key: "a", Value: bson.Symbol("y")}}},
	}
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		s, err := bucket.New[any, reading](db, config(1))
		require.NoError(t, err)
		bucket.ForcePlan(s, p)
		require.NoError(t, patterns.EnsureIndexes(ctx, s.Indexes()...))
		hour := 0
		want := 0
		for _, row := range rows {
			stored := 0
			for _, m := range row {
				r := readingAt(at(time.Duration(hour)*time.Hour+time.Minute), hour)
				hour++
				_, err := db.Collection("readings").InsertMany(ctx, readyBuckets([]bucket.Point[any, reading]{{Meta: m, Value: r}}))
				if mongo.IsNetworkError(err) || err != nil {
					t.Logf("meta %v left out: %v", m, err)
					continue
				}
				stored++
			}
			if stored > 0 {
				want++
			}
		}
		sums := collect(t, s.SummariesBySeries(ctx, at(0), at(time.Duration(hour)*time.Hour)))
		for _, x := range sums {
			t.Logf("series %v: count %d", x.Meta, x.Count)
		}
		require.Len(t, sums, want, "one series per row: a string and a symbol of the same bytes are one value to the server")
	})
}
