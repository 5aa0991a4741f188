package bucket_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/bucket"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// TestAttackAddManyInReadNumericTypes: AddMany's read of the buckets with
// room, since 2a311e9, asks for the series written to in the same windows
// with one branch {<meta>: {$in: metas}, start: {$in: starts}, count:
// <room>} (commands.go openFilter), where it sent an equality per series.
//
// Promises: bucket/addmany.go (windowKey): "the series by [bsonid.Key] of
// its meta, so that equal numbers of different types, at any depth of the
// meta, are one series, as they are to the server"; AddMany's godoc,
// "Without other writers on its windows, AddMany sends one find and
// exactly one write per bucket it puts measurements in" and "N
// measurements of one window make at most ceil(N/Cap) + (writers - 1)
// buckets, as with Add, because a window holds at most one bucket with
// room per writer"; commands.go sameWindows: "exactly the pairs written
// to".
//
// Reference: MongoDB compares embedded documents field by field, numbers
// by value (manual, "Comparison/Sort Order": "MongoDB treats some types
// as equivalent for comparison purposes. For instance, numeric types
// undergo conversion before comparison"), and $in "selects the documents
// where the value of a field equals any value in the specified array"
// (manual, $in): the same equality. FerretDB 2.7 agrees for the equality
// ({m: {s: 7.0}} finds {s: int32 7}) but its $in compares the numbers
// inside a document by type: {m: {$in: [{s: 7.0}, "zz"]}} finds nothing
// (probed here, 2026-12-02). So the one-branch read misses the bucket
// with room of a series given with a number of another type than the one
// stored, as soon as another series is written in the same window, and
// AddMany opens a second bucket with room in that window (one writer),
// which the per-series equality read found. The single-series row is the
// control: its read is still an equality. Seen on FerretDB 2.7 without
// the indexes (with them its planner answered from the compound index
// on this small collection, and the rows passed); FerretDB 1.24 passes.
func TestAttackAddManyInReadNumericTypes(t *testing.T) {
	rows := []struct {
		name          string
		stored, given any
		other         bool // another series written in the same window
	}{
		{"document int32 vs double, one series (equality)", bson.D{{Key: "s", Value: int32(7)}}, bson.D{{Key: "s", Value: 7.0}}, false},
		{"document int32 vs double, with another series ($in)", bson.D{{Key: "s", Value: int32(7)}}, bson.D{{Key: "s", Value: 7.0}}, true},
		{"document int64 vs int32, with another series ($in)", bson.D{{Key: "s", Value: int64(7)}}, bson.D{{Key: "s", Value: int32(7)}}, true},
		{"array in a document, with another series ($in)", bson.D{{Key: "t", Value: bson.A{int32(1), "x"}}}, bson.D{{Key: "t", Value: bson.A{1.0, "x"}}}, true},
	}
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		for _, row := range rows {
			t.Run(row.name, func(t *testing.T) {
				ctx := context.Background()
				db := mongotest.DB(t)
				s, err := bucket.New[any, reading](db, config(10))
				require.NoError(t, err)
				bucket.ForcePlan(s, p)
				// No indexes: Buckets.Indexes' godoc gives them for speed only
				// (bucket/buckets.go:118-142: "the server finds the buckets with
				// room in the index alone"), and with {meta, start, count} FerretDB
				// 2.7 answers the $in from the index, which compares by value; a
				// plan that filters the documents (no index, a lossy bitmap scan,
				// the {start: 1} index) compares by type.
				_ = patterns.EnsureIndexes
				require.NoError(t, s.Add(ctx, row.stored, readingAt(at(10*time.Minute), 1)))
				pts := []bucket.Point[any, reading]{{Meta: row.given, Value: readingAt(at(20*time.Minute), 2)}}
				if row.other {
					pts = append(pts, bucket.Point[any, reading]{Meta: "other", Value: readingAt(at(30*time.Minute), 3)})
				}
				c := mongotest.NewCounter(t, db)
				require.NoError(t, s.AddMany(ctx, pts))
				mongotest.Detail(t, "AddMany sent %v", c.Commands())
				cur, err := db.Collection("readings").Find(ctx, bson.D{{Key: "meta", Value: row.stored}})
				require.NoError(t, err)
				var bks []bson.Raw
				require.NoError(t, cur.All(ctx, &bks))
				var counts []int32
				for _, b := range bks {
					counts = append(counts, b.Lookup("count").Int32())
				}
				t.Logf("buckets of the series (one window, cap 10): counts %v", counts)
				require.Equal(t, []int32{2}, counts, "one writer, 2 measurements of one window, cap 10: one bucket (the read must find the bucket with room of the series the server compares equal)")
			})
		}
	})
}
