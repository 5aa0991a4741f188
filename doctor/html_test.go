package doctor

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
)

func TestWriteHTMLIsSelfContainedWithCharts(t *testing.T) {
	r := Report{
		Database: "shop", Server: "MongoDB 8.0.4 (replica set)",
		Findings: []Finding{{Rule: RuleUnboundedArray, Severity: Warning, Collection: "<script>alert(1)</script>", Field: "reviews",
			Message: "1 of 21 arrays", Evidence: Evidence{{"maxLength", 1500}}, Remedy: "package subset"}},
		Skipped: []Skip{{Rule: RuleUnusedIndex, Reason: "the server refused $indexStats"}},
		Collections: []CollectionSummary{
			{Name: "products", Documents: 21, Sample: Sample{Method: SampleAll, Documents: 21},
				Sizes:  Distribution{Count: 21, Max: 51_800, Buckets: []Bucket{{Lo: 32, Hi: 64, Count: 20}, {Lo: 64, Hi: 128}, {Lo: 32768, Hi: 65536, Count: 1}}},
				Arrays: []ArraySummary{{Path: "reviews", Lengths: Distribution{Count: 21, Max: 1500}}, {Path: "tags", Lengths: Distribution{Count: 3, Max: 4}}}},
			{Name: "empty", Sample: Sample{Method: SampleAll}},
		},
	}
	var b strings.Builder
	require.NoError(t, r.WriteHTML(&b))
	page := b.String()
	require.Equal(t, 2, strings.Count(page, `data-chart="document-sizes"`))
	require.Equal(t, 2, strings.Count(page, `data-chart="array-lengths"`))
	require.Equal(t, 3+5+2, strings.Count(page, `<rect class="bar`), "one bar per size bucket, then empty ones up to the 2 MB limit's, and one per array field")
	require.Equal(t, 1, strings.Count(page, `<rect class="bar over"`), "reviews is over 1,000; no size is over 2 MB")
	require.Contains(t, page, "no documents")
	require.Contains(t, page, "no arrays")
	require.NotContains(t, page, "<script>alert", "names are escaped")
	require.NotContains(t, page, "http://")
	require.NotContains(t, page, "https://", "no external resources")
	require.Contains(t, page, `class="finding" data-sev="warning"`)
}

// TestShardKeyValuesAreForPeople: the shard-key table shows dates, numbers
// and ObjectIds as a person reads them, not in canonical extended JSON
// ({"$date": {"$numberLong": "1735689600000"}}) (issue 22).
func TestShardKeyValuesAreForPeople(t *testing.T) {
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	id, err := bson.ObjectIDFromHex("6b0e5c890745d9678928daa0")
	require.NoError(t, err)
	kv := &keyValues{counts: map[string]*ValueCount{}}
	for _, doc := range []bson.D{
		d("at", at, "n", int32(7), "by", id),
		d("at", at, "n", int32(7), "by", id),
		d("at", at.Add(1500*time.Millisecond), "n", 2.5, "by", "x"),
	} {
		raw, err := bson.Marshal(doc)
		require.NoError(t, err)
		kv.addDoc(raw, key("at", 1, "n", 1, "by", 1))
	}
	var values []string
	a := ShardKeyAnalysis{Collection: "orders", Key: `{"at":1,"n":1,"by":1}`, Documents: 3, Distinct: len(kv.counts)}
	for _, vc := range kv.counts {
		values = append(values, vc.Value)
		a.MostCommon = append(a.MostCommon, *vc)
	}
	require.ElementsMatch(t, []string{`2025-01-01T00:00:00Z, 7, ObjectId("6b0e5c890745d9678928daa0")`, `2025-01-01T00:00:01.5Z, 2.5, "x"`}, values)

	r := Report{Database: "shop", ShardKeys: []ShardKeyAnalysis{a}}
	var b strings.Builder
	require.NoError(t, r.WriteHTML(&b))
	require.Contains(t, b.String(), `<code>2025-01-01T00:00:00Z, 7, ObjectId(&#34;6b0e5c890745d9678928daa0&#34;)</code>: 2`)
	require.NotContains(t, b.String(), "$date")
	require.NotContains(t, b.String(), "$numberInt")

	for _, tc := range []struct {
		v    any
		want string
	}{{int64(1) << 40, "1099511627776"}, {1e21, "1e+21"}, {nil, "null"}, {true, "true"}, {"a\"b", `"a\"b"`}, {d("k", int32(1)), `{"k":1}`}} {
		raw, err := bson.Marshal(d("v", tc.v))
		require.NoError(t, err)
		require.Equal(t, tc.want, humanValue(bson.Raw(raw).Lookup("v")), "%T %v", tc.v, tc.v)
	}
}

// TestSizeChartShowsTheDistanceToTheLimit: documents of 128 B are drawn
// at the left of an axis that runs to the 2 MB limit, whose line stands at
// its place on the scale, not beside the only bar (issue 22).
func TestSizeChartShowsTheDistanceToTheLimit(t *testing.T) {
	small := CollectionSummary{Name: "events", Sizes: Distribution{Count: 20, Max: 130, Buckets: []Bucket{{Lo: 128, Hi: 256, Count: 20}}}}
	ch := sizeChart(small, DefaultDocumentBytes)
	require.Len(t, ch.Bars, 14, "128 B to 2 MB: one bucket per power of two, 2^7 to 2^20")
	require.Equal(t, "20", ch.Bars[0].Value)
	require.Equal(t, "128 B", ch.Bars[0].Label)
	for _, b := range ch.Bars[1:] {
		require.Zero(t, b.H, "only the first bucket holds documents")
	}
	var labels []string
	for _, b := range ch.Bars {
		if b.Label != "" {
			labels = append(labels, b.Label)
		}
	}
	require.Greater(t, len(labels), 3, "the axis is labelled along the way: %v", labels)
	require.NotNil(t, ch.Marker)
	require.Equal(t, "limit 2 MB", ch.Marker.Label)
	last := ch.Bars[len(ch.Bars)-1]
	require.Greater(t, ch.Marker.X1, last.X, "the limit is in the last bucket, 1 MB to 2 MB")
	require.Greater(t, ch.Marker.X1-ch.Bars[0].X, 0.9*float64(chartW-2*padL), "and far from the bar of 128 B")

	big := CollectionSummary{Name: "files", Sizes: Distribution{Count: 2, Max: 5_000_000, Buckets: []Bucket{{Lo: 4_194_304, Hi: 8_388_608, Count: 2}}}}
	ch = sizeChart(big, DefaultDocumentBytes)
	require.Len(t, ch.Bars, 3, "the axis runs down to the limit's bucket too")
	require.NotNil(t, ch.Marker)
	require.True(t, ch.Bars[2].Over)
	require.Less(t, ch.Marker.X1, ch.Bars[2].X)
}
