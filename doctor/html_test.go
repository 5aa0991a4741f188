package doctor

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
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
	require.Equal(t, 3+2, strings.Count(page, `<rect class="bar`), "one bar per size bucket and per array field")
	require.Equal(t, 1, strings.Count(page, `<rect class="bar over"`), "reviews is over 1,000; no size is over 2 MB")
	require.Contains(t, page, "no documents")
	require.Contains(t, page, "no arrays")
	require.NotContains(t, page, "<script>alert", "names are escaped")
	require.NotContains(t, page, "http://")
	require.NotContains(t, page, "https://", "no external resources")
	require.Contains(t, page, `class="finding" data-sev="warning"`)
}
