package doctor

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/patterns"
)

func values(vs ...any) []bson.RawValue {
	out := make([]bson.RawValue, len(vs))
	for i, v := range vs {
		t, b, err := bson.MarshalValue(v)
		if err != nil {
			panic(err)
		}
		out[i] = bson.RawValue{Type: t, Value: b}
	}
	return out
}

func TestMonotonicity(t *testing.T) {
	var ids, shuffled, dates []any
	for i := range 50 {
		ids = append(ids, bson.NewObjectIDFromTimestamp(epochTest.Add(time.Duration(i)*time.Minute)))
		shuffled = append(shuffled, fmt.Sprintf("user-%02d", (i*37)%50))
		dates = append(dates, bson.NewDateTimeFromTime(epochTest.Add(-time.Duration(i)*time.Minute)))
	}
	kind, corr, why := monotonicity(keyField{Path: "_id", Dir: 1}, values(ids...), 0.7)
	require.Equal(t, "monotonic", kind)
	require.Equal(t, 1.0, corr)
	require.Contains(t, why, "ObjectIds")

	kind, corr, _ = monotonicity(keyField{Path: "at", Dir: 1}, values(dates...), 0.7)
	require.Equal(t, "monotonic", kind, "decreasing values are monotonic too")
	require.Equal(t, -1.0, corr)

	kind, corr, _ = monotonicity(keyField{Path: "u", Dir: 1}, values(shuffled...), 0.7)
	require.Equal(t, "not monotonic", kind)
	require.Less(t, corr, 0.7)

	kind, _, _ = monotonicity(keyField{Path: "_id", Kind: "hashed"}, values(ids...), 0.7)
	require.Equal(t, "not monotonic", kind)
	kind, _, _ = monotonicity(keyField{Path: "a", Dir: 1}, values(1, 1, 1, 1), 0.7)
	require.Equal(t, "unknown", kind, "one value")
	kind, _, _ = monotonicity(keyField{Path: "a", Dir: 1}, values(1, 2), 0.7)
	require.Equal(t, "unknown", kind, "too few documents")
}

func TestRanksAndCorrelation(t *testing.T) {
	require.Equal(t, []float64{0, 2, 2, 2, 4}, rankOf(values(1, 5, int64(5), 5.0, "a")), "ties share their mean rank; numbers by value; strings after numbers")
	r, ok := pearson([]float64{1, 2, 3, 4}, []float64{2, 4, 6, 8})
	require.True(t, ok)
	require.InDelta(t, 1, r, 1e-12)
	_, ok = pearson([]float64{1, 2, 3}, []float64{5, 5, 5})
	require.False(t, ok)
	require.Negative(t, compareValues(bson.RawValue{Type: bson.TypeNull}, values(0)[0]), "null sorts before numbers")
	require.Negative(t, compareValues(values(bson.NewObjectID())[0], values(true)[0]))
	three, err := bson.ParseDecimal128("3")
	require.NoError(t, err)
	require.Zero(t, compareValues(values(three)[0], values(3)[0]), "decimals compare with other numbers by value")
}

func TestTargeting(t *testing.T) {
	ranged := []keyField{{Path: "customerId", Dir: 1}, {Path: "createdAt", Dir: 1}}
	hashed := []keyField{{Path: "customerId", Kind: "hashed"}}
	for _, tc := range []struct {
		name   string
		filter bson.D
		key    []keyField
		want   string
	}{
		{"equality on every field", d("customerId", "c1", "createdAt", 5), ranged, TargetOneShard},
		{"equality on a prefix", d("customerId", "c1"), ranged, TargetSomeShards},
		{"range on the first field", d("customerId", d("$gt", "c")), ranged, TargetSomeShards},
		{"no first field", d("createdAt", 5), ranged, TargetScatterGather},
		{"$in on the first field", d("customerId", d("$in", bson.A{"a", "b"}), "createdAt", 1), ranged, TargetSomeShards},
		{"hashed equality", d("customerId", "c1"), hashed, TargetOneShard},
		{"hashed range", d("customerId", d("$gte", "c")), hashed, TargetScatterGather},
		{"nothing", d(), hashed, TargetScatterGather},
	} {
		sh, err := shapeOf(tc.filter, nil)
		require.NoError(t, err)
		got, why := targeting(sh, tc.key)
		require.Equal(t, tc.want, got, tc.name)
		require.NotEmpty(t, why)
	}
	sh, err := shapeOf(d("customerId", d("$gte", "c")), d("customerId", 1))
	require.NoError(t, err)
	got, _ := targeting(sh, ranged)
	require.Equal(t, TargetSomeShards, got, "a range on a field the query also sorts on still targets")
}

func TestKeyValues(t *testing.T) {
	key := []keyField{{Path: "a.b", Dir: 1}, {Path: "c", Dir: 1}}
	kv := &keyValues{counts: map[string]*ValueCount{}}
	for _, doc := range []bson.D{
		d("a", d("b", 1), "c", "x"),
		d("a", d("b", int64(1)), "c", "x"), // another BSON type: another value, as MongoDB compares bytes of the key
		d("a", d("b", 1), "c", "x"),
		d("c", "y"),
		d("a", bson.A{d("b", 1)}, "c", "z"),
	} {
		raw, err := bson.Marshal(doc)
		require.NoError(t, err)
		kv.addDoc(raw, key)
	}
	require.Equal(t, 5, kv.docs)
	require.Equal(t, 1, kv.arrays)
	require.Equal(t, 1, kv.missing)
	require.Len(t, kv.counts, 3)
	require.Len(t, kv.first, 4)
}

func TestParseShardKey(t *testing.T) {
	k, err := ParseShardKey([]byte(`{"collection": "orders", "key": {"customerId": 1, "createdAt": 1.0}}`))
	require.NoError(t, err)
	require.Equal(t, `orders {"customerId":1,"createdAt":1.0}`, k.String())
	_, err = ParseShardKey([]byte(`{"collection": "events", "key": {"deviceId": "hashed"}}`))
	require.NoError(t, err)
	for _, bad := range []string{
		`{"collection": "o"}`, `{"key": {"a": 1}}`, `{"collection": "o", "key": {}}`,
		`{"collection": "o", "key": {"a": -1}}`, `{"collection": "o", "key": {"a": "text"}}`,
		`{"collection": "o", "key": {"a": "hashed", "b": "hashed"}}`, `{"collection": "o", "key": {"$a": 1}}`,
		`{"collection": "o", "key": {"a": 1}, "unique": true}`, `not json`,
	} {
		_, err := ParseShardKey([]byte(bad))
		require.ErrorIs(t, err, patterns.ErrInvalid, bad)
	}
}

func FuzzParseShardKey(f *testing.F) {
	f.Add(`{"collection": "orders", "key": {"customerId": 1, "createdAt": 1}}`)
	f.Add(`{"collection": "events", "key": {"deviceId": "hashed"}}`)
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseShardKey([]byte(s))
		if err != nil {
			require.ErrorIs(t, err, patterns.ErrInvalid)
			return
		}
		fields, err := k.fields()
		require.NoError(t, err)
		require.NotEmpty(t, fields)
		_, why := targeting(shape{}, fields)
		require.NotEmpty(t, why)
	})
}

var epochTest = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
