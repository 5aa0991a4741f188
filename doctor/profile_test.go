package doctor

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// profileOf profiles documents with the default thresholds, or th.
func profileOf(t *testing.T, docs []bson.D, th ...Thresholds) (*profile, Thresholds) {
	t.Helper()
	var base Thresholds
	if len(th) > 0 {
		base = th[0]
	}
	full, err := base.withDefaults()
	require.NoError(t, err)
	p := newProfile(full)
	for _, doc := range docs {
		raw, err := bson.Marshal(doc)
		require.NoError(t, err)
		require.NoError(t, p.add(raw))
	}
	return p, full
}

func TestProfileMeasuresSizesAndArrays(t *testing.T) {
	big := bson.A{}
	for i := range 1500 {
		big = append(big, d("by", fmt.Sprint(i)))
	}
	docs := []bson.D{
		d("_id", "small", "tags", bson.A{"a", "b"}, "matrix", bson.A{bson.A{1, 2, 3}}),
		d("_id", "big", "reviews", big, "blob", bson.Binary{Data: make([]byte, 2_100_000)}),
	}
	p, th := profileOf(t, docs)
	require.Equal(t, 2, p.docs)
	require.Equal(t, 1, p.docsOver)
	require.Equal(t, "big", p.largest.id)
	require.Equal(t, "blob", p.largest.field)
	require.Equal(t, bson.TypeBinary, p.largest.fieldType)
	require.Equal(t, int64(1500), p.arrays["reviews"].lengths.max)
	require.Equal(t, "big", p.arrays["reviews"].longestID)
	require.Equal(t, int64(3), p.arrays["matrix.$[]"].lengths.max, "arrays of arrays get their own path")
	require.Contains(t, p.levels, "reviews", "documents in arrays are profiled at the array's path")

	fs := arrayFindings("c", p, th)
	require.Len(t, fs, 1)
	require.Equal(t, "reviews", fs[0].Field)
	require.Equal(t, Warning, fs[0].Severity)
	require.Contains(t, fs[0].Remedy, "package subset", "the only array at that path is long: every document's array grows")

	fs = bloatedFindings("c", p, th)
	require.Len(t, fs, 1)
	require.Equal(t, "blob", fs[0].Field)
	require.Contains(t, fs[0].Remedy, "GridFS")
	require.Equal(t, Warning, fs[0].Severity)

	d := p.sizes.distribution()
	require.Equal(t, 2, d.Count)
	require.Equal(t, p.largest.size, d.Max)
	total := 0
	for _, b := range d.Buckets {
		total += b.Count
		require.Less(t, b.Lo, b.Hi)
	}
	require.Equal(t, 2, total)
}

func TestArraySeverityAndRemedyFollowTheEvidence(t *testing.T) {
	var docs []bson.D
	for i := range 30 {
		n := 3
		if i == 0 {
			n = 12_000
		}
		docs = append(docs, d("items", make(bson.A, n)))
	}
	p, th := profileOf(t, docs)
	fs := arrayFindings("c", p, th)
	require.Len(t, fs, 1)
	require.Equal(t, Critical, fs[0].Severity)
	limit, _ := fs[0].Evidence.Get("threshold")
	require.Equal(t, DefaultArrayLengthCritical, limit)
	require.Contains(t, fs[0].Remedy, "package outlier", "one document in thirty is an outlier")
}

func TestStemAndValueLikeKeys(t *testing.T) {
	for key, want := range map[string]string{
		"attr_color": "attr_", "attr-size": "attr-", "attrColor": "attr", "sensor12": "sensor",
		"name": "", "_id": "", "createdAt": "created", "a1b2": "a", "x": "", "é_x": "é_",
	} {
		require.Equal(t, want, stem(key), key)
	}
	for _, k := range []string{"2024-01-31", "20240131", "2024-01", "2024-01-31T10:00:00Z", "12", "-3.5",
		"65f0c7e2a1b2c3d4e5f60718", "0f8fad5b-d9cb-469f-a165-70867728950e", "bob@example.com", "deadbeefdeadbeef"} {
		require.True(t, looksLikeValue(k), k)
	}
	for _, k := range []string{"name", "createdAt", "attr_color", "sku", "v2", "2024abc", "item_12", "abcdef"} {
		require.False(t, looksLikeValue(k), k)
	}
}

func TestDynamicFieldNames(t *testing.T) {
	var attrs []bson.D
	for i := range 40 {
		attrs = append(attrs, d("name", "x", fmt.Sprintf("attr_%c%d", 'a'+i%26, i), i))
	}
	var ordinary []bson.D // 50 fields present in every document
	for i := range 40 {
		doc := d()
		for f := range 50 {
			doc = append(doc, bson.E{Key: fmt.Sprintf("field_%d", f), Value: i + f})
		}
		ordinary = append(ordinary, doc)
	}
	var i18n []bson.D // 24 languages, 2 per document
	langs := []string{"en", "fr", "de", "it", "es", "pt", "nl", "sv", "da", "fi", "pl", "cs", "sk", "hu", "ro", "bg", "el", "et", "lv", "lt", "sl", "hr", "ga", "mt"}
	for i := range 60 {
		i18n = append(i18n, d("title_"+langs[i%24], "t", "title_"+langs[(i+7)%24], "u"))
	}
	byDay := d()
	for i := range 31 {
		byDay = append(byDay, bson.E{Key: fmt.Sprintf("2026-01-%02d", i+1), Value: i})
	}
	var optional []bson.D // a polymorphic catalog: 12 optional fields, most documents hold most
	for i := range 40 {
		doc := d("sku", i)
		for f := range 12 {
			if (i+f)%4 != 0 {
				doc = append(doc, bson.E{Key: fmt.Sprintf("spec_%d", f), Value: f})
			}
		}
		optional = append(optional, doc)
	}
	for _, tc := range []struct {
		name  string
		docs  []bson.D
		field string // "" for no finding
	}{
		{"forty documents with one attr_* key each", attrs, "attr_*"},
		{"fifty fields in every document", ordinary, ""},
		{"two translations of twenty-four per document", i18n, "title_*"},
		{"a map keyed by dates, nested", []bson.D{d("counts", byDay)}, "counts.*"},
		{"optional fields most documents hold", optional, ""},
		{"few documents", attrs[:5], ""},
	} {
		p, th := profileOf(t, tc.docs)
		fs := dynamicFindings("c", p, th)
		if tc.field == "" {
			require.Empty(t, fs, tc.name)
			continue
		}
		require.Len(t, fs, 1, tc.name)
		require.Equal(t, tc.field, fs[0].Field, tc.name)
		require.Equal(t, RuleDynamicFieldNames, fs[0].Rule)
		require.Contains(t, fs[0].Remedy, "attribute pattern")
	}

	// The parameters are options.
	p, th := profileOf(t, attrs[:10], Thresholds{DynamicKeys: 10})
	require.Len(t, dynamicFindings("c", p, th), 1)
	p, th = profileOf(t, attrs, Thresholds{DynamicKeySpread: 50})
	require.Empty(t, dynamicFindings("c", p, th))
}

func TestTimeSeriesDocuments(t *testing.T) {
	var docs []bson.D
	for i := range 100 {
		docs = append(docs, d("sensor", "s1", "ts", bson.NewDateTimeFromTime(time.Date(2026, 3, 1, 0, i, 0, 0, time.UTC)), "v", float64(i)))
	}
	p, th := profileOf(t, docs, Thresholds{TimeSeriesDocuments: 1000})
	require.Empty(t, timeSeriesFindings("c", 999, p, th), "too few documents")
	fs := timeSeriesFindings("c", 1000, p, th)
	require.Len(t, fs, 1)
	require.Equal(t, "ts", fs[0].Field)
	require.Contains(t, fs[0].Remedy, "package bucket")
	p, th = profileOf(t, docs, Thresholds{TimeSeriesDocuments: 1000, TimeSeriesDocumentBytes: 10})
	require.Empty(t, timeSeriesFindings("c", 1000, p, th), "documents too large")
}

func TestProfileLimitsBoundMemory(t *testing.T) {
	doc := d()
	for i := range maxKeysPerLevel + 10 {
		doc = append(doc, bson.E{Key: fmt.Sprintf("k%d", i), Value: 1})
	}
	p, _ := profileOf(t, []bson.D{doc})
	require.Len(t, p.levels[""].keys, maxKeysPerLevel)
	require.Equal(t, 10, p.untracked)
}

// BenchmarkProfileAdd measures the client-side cost of profiling one
// document with an array of 10,000 small embedded documents (about
// 290 kB), the kind of document the unbounded-array rule exists for.
func BenchmarkProfileAdd(b *testing.B) {
	items := bson.A{}
	for i := range 10_000 {
		items = append(items, d("sku", fmt.Sprintf("sku-%d", i), "qty", i%7, "price", float64(i%50)))
	}
	raw, err := bson.Marshal(d("_id", "big", "name", "order", "items", items))
	require.NoError(b, err)
	th, _ := Thresholds{}.withDefaults()
	p := newProfile(th)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		require.NoError(b, p.add(raw))
	}
}
