package doctor

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/internal/shard"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// The sources of the shard-key index and time-series rules.
const (
	srcKeyIndex      = "https://www.mongodb.com/docs/v7.0/core/sharding-shard-key-indexes/ (an index on the shard key, or a compound index the key prefixes); mongodb/mongo src/mongo/db/s/shard_key_index_util.cpp isCompatibleWithShardKey (not partial, not sparse, the key a prefix by value: BSONObj::isPrefixOf with SimpleBSONElementComparator, so {a: 2} is no {a: 1}; simple collation), findShardKeyPrefixedIndex (not hidden)"
	srcTimeSeriesKey = "https://www.mongodb.com/docs/v8.0/core/timeseries/timeseries-limitations/ (Sharding, Shard Key Fields: the metaField, its subfields, the timeField ranged and last; the timeField deprecated in 8.0); mongodb/mongo shardsvr_create_collection_command.cpp (5914000: the time field only at the end; 5914001: only the time field or meta field)"
	srcBucketKey     = "mongodb/mongo src/mongo/db/timeseries timeseries_index_schema_conversion_functions.h createBucketsShardKeySpecFromTimeseriesShardKeySpec, and its use in chunk_manager_targeter_test.cpp (meta and its subfields; control.min.<timeField>)"
)

// TestSupportsShardKey: which index supports a shard key, one row per rule.
func TestSupportsShardKey(t *testing.T) {
	k := func(d bson.D) []keyField {
		f, err := ShardKey{Collection: "c", Key: d}.fields()
		require.NoError(t, err)
		return f
	}
	ix := func(d bson.D) indexSpec {
		b, err := bson.Marshal(d)
		require.NoError(t, err)
		key, err := parseKey(b)
		require.NoError(t, err)
		return indexSpec{Name: "i", Key: key}
	}
	ab := bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 1}}
	fr, err := bson.Marshal(bson.D{{Key: "locale", Value: "fr"}})
	require.NoError(t, err)
	simple, err := bson.Marshal(bson.D{{Key: "locale", Value: "simple"}})
	require.NoError(t, err)
	with := func(s indexSpec, edit func(*indexSpec)) indexSpec { edit(&s); return s }
	for _, tc := range []struct {
		name  string
		key   bson.D
		index indexSpec
		want  bool
	}{
		{"the key itself", ab, ix(ab), true},
		{"a compound index the key prefixes", ab, ix(append(ab, bson.E{Key: "c", Value: -1})), true},
		{"a double direction is the same value", ab, ix(bson.D{{Key: "a", Value: 1.0}, {Key: "b", Value: int64(1)}}), true},
		{"a prefix of the key", ab, ix(bson.D{{Key: "a", Value: 1}}), false},
		{"another order", ab, ix(bson.D{{Key: "b", Value: 1}, {Key: "a", Value: 1}}), false},
		{"a descending field", ab, ix(bson.D{{Key: "a", Value: 1}, {Key: "b", Value: -1}}), false},
		{"an ascending field of another value", ab, ix(bson.D{{Key: "a", Value: 2}, {Key: "b", Value: 1}}), false},
		{"an ascending field of a fractional value", ab, ix(bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 0.5}}), false},
		{"another value after the key", bson.D{{Key: "a", Value: 1}}, ix(bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 2}}), true},
		{"a hashed key, its hashed index", bson.D{{Key: "a", Value: "hashed"}}, ix(bson.D{{Key: "a", Value: "hashed"}}), true},
		{"a hashed key, a ranged index", bson.D{{Key: "a", Value: "hashed"}}, ix(bson.D{{Key: "a", Value: 1}}), false},
		{"a ranged key, a hashed index", bson.D{{Key: "a", Value: 1}}, ix(bson.D{{Key: "a", Value: "hashed"}}), false},
		{"a compound hashed key", bson.D{{Key: "a", Value: 1}, {Key: "b", Value: "hashed"}}, ix(bson.D{{Key: "a", Value: 1}, {Key: "b", Value: "hashed"}, {Key: "c", Value: 1}}), true},
		{"sparse", ab, with(ix(ab), func(s *indexSpec) { s.Sparse = true }), false},
		{"partial", ab, with(ix(ab), func(s *indexSpec) { s.Partial = bson.Raw(simple) }), false},
		{"hidden", ab, with(ix(ab), func(s *indexSpec) { s.Hidden = true }), false},
		{"another collation", ab, with(ix(ab), func(s *indexSpec) { s.Collation = fr }), false},
		{"the simple collation spelt out", ab, with(ix(ab), func(s *indexSpec) { s.Collation = simple }), true},
		{"unique is no matter", ab, with(ix(ab), func(s *indexSpec) { s.Unique = true }), true},
	} {
		require.Equal(t, tc.want, supports(tc.index, k(tc.key)), "%s: key %v, index %v (source: %s)", tc.name, tc.key, tc.index.Key, srcKeyIndex)
	}
}

// TestShardKeyIndexFinding: AnalyzeShardKey reports a key no index
// supports, naming the index to create: a warning on a collection that
// holds documents, info on an empty one (shardCollection creates it).
func TestShardKeyIndexFinding(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	_, err := db.Collection("full").InsertMany(ctx, []bson.D{{{Key: "a", Value: 1}, {Key: "b", Value: 2}}, {{Key: "a", Value: 2}, {Key: "b", Value: 3}}})
	require.NoError(t, err)
	require.NoError(t, db.CreateCollection(ctx, "empty"))
	key := bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 1}}
	for _, tc := range []struct {
		coll    string
		index   bson.D // created before the analysis; nil: none
		want    Severity
		message string
	}{
		{"full", nil, Warning, "shardCollection refuses a collection that holds documents without one"},
		{"empty", nil, Info, "shardCollection creates it while the collection is empty"},
		{"full", bson.D{{Key: "a", Value: 1}}, Warning, "shardCollection refuses"},
		{"full", bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 1}, {Key: "c", Value: 1}}, 0, ""},
	} {
		if tc.index != nil {
			_, err := db.Collection(tc.coll).Indexes().CreateOne(ctx, mongo.IndexModel{Keys: tc.index})
			require.NoError(t, err)
		}
		rep, err := AnalyzeShardKey(ctx, db, ShardKey{Collection: tc.coll, Key: key}, Options{})
		require.NoError(t, err)
		var got []Finding
		for _, f := range rep.Findings {
			if f.Rule == RuleShardKeyIndex {
				got = append(got, f)
			}
		}
		if tc.message == "" {
			require.Empty(t, got, "%s with %v (source: %s)", tc.coll, tc.index, srcKeyIndex)
			continue
		}
		require.Len(t, got, 1, "%s with %v (source: %s)", tc.coll, tc.index, srcKeyIndex)
		require.Equal(t, tc.want, got[0].Severity)
		require.Contains(t, got[0].Message, tc.message)
		require.Equal(t, `create the index {"a":1,"b":1} on `+tc.coll+` (a compound index that starts with these fields supports it too; not sparse, partial or hidden, with the simple collation) before shardCollection`, got[0].Remedy)
	}
}

// TestTimeSeriesKeyFindings: the keys a time-series collection can be
// sharded on, one row per rule.
func TestTimeSeriesKeyFindings(t *testing.T) {
	ts := &timeSeries{TimeField: "t", MetaField: "m"}
	for _, tc := range []struct {
		name string
		ts   *timeSeries
		key  bson.D
		want Severity // 0: no finding
	}{
		{"the metaField", ts, bson.D{{Key: "m", Value: 1}}, 0},
		{"the metaField hashed", ts, bson.D{{Key: "m", Value: "hashed"}}, 0},
		{"fields inside the metaField", ts, bson.D{{Key: "m.site", Value: 1}, {Key: "m.unit", Value: 1}}, 0},
		{"the metaField, then the timeField", ts, bson.D{{Key: "m", Value: 1}, {Key: "t", Value: 1}}, Warning},
		{"the timeField alone", ts, bson.D{{Key: "t", Value: 1}}, Warning},
		{"the timeField first", ts, bson.D{{Key: "t", Value: 1}, {Key: "m", Value: 1}}, Critical},
		{"the timeField hashed", ts, bson.D{{Key: "t", Value: "hashed"}}, Critical},
		{"_id", ts, bson.D{{Key: "_id", Value: 1}}, Critical},
		{"another field", ts, bson.D{{Key: "m", Value: 1}, {Key: "v", Value: 1}}, Critical},
		{"a field whose name starts with the metaField's", ts, bson.D{{Key: "mx", Value: 1}}, Critical},
		{"no metaField", &timeSeries{TimeField: "t"}, bson.D{{Key: "m", Value: 1}}, Critical},
		{"not a time-series collection", nil, bson.D{{Key: "v", Value: 1}}, 0},
	} {
		key := ShardKey{Collection: "readings", Key: tc.key}
		fields, err := key.fields()
		require.NoError(t, err)
		got := timeSeriesKeyFindings(key, fields, tc.ts)
		if tc.want == 0 {
			require.Empty(t, got, "%s (source: %s)", tc.name, srcTimeSeriesKey)
			continue
		}
		require.Len(t, got, 1, "%s (source: %s)", tc.name, srcTimeSeriesKey)
		require.Equal(t, RuleShardKeyTimeSeries, got[0].Rule, tc.name)
		require.Equal(t, tc.want, got[0].Severity, "%s: %s (source: %s)", tc.name, got[0].Message, srcTimeSeriesKey)
	}
}

// TestAnalyzeShardKeyOnTimeSeries: AnalyzeShardKey reads the
// collection's time-series fields and refuses a key on another field.
func TestAnalyzeShardKeyOnTimeSeries(t *testing.T) {
	mongotest.Require(t, patterns.FeatureTimeSeries)
	ctx := context.Background()
	db := mongotest.DB(t)
	require.NoError(t, db.CreateCollection(ctx, "readings", options.CreateCollection().SetTimeSeriesOptions(options.TimeSeries().SetTimeField("t").SetMetaField("m"))))
	rep, err := AnalyzeShardKey(ctx, db, ShardKey{Collection: "readings", Key: bson.D{{Key: "v", Value: 1}}}, Options{})
	require.NoError(t, err)
	var got []Finding
	for _, f := range rep.Findings {
		if f.Rule == RuleShardKeyTimeSeries {
			got = append(got, f)
		}
	}
	require.Len(t, got, 1, "%v (source: %s)", rep.Findings, srcTimeSeriesKey)
	require.Equal(t, Critical, got[0].Severity)
	require.Contains(t, got[0].Remedy, `{"m": 1}`)
	rep, err = AnalyzeShardKey(ctx, db, ShardKey{Collection: "readings", Key: bson.D{{Key: "m", Value: 1}}}, Options{})
	require.NoError(t, err)
	for _, f := range rep.Findings {
		require.NotEqual(t, RuleShardKeyTimeSeries, f.Rule, "the metaField is a time-series key: %v", f)
	}
}

// TestShardKeysOfTimeSeries: a sharded time-series collection is listed
// in config.collections as its buckets collection, with the buckets' key;
// the doctor reads it back under the collection's name.
func TestShardKeysOfTimeSeries(t *testing.T) {
	fields := func(doc bson.Raw, meta string) bson.Raw {
		var d bson.D
		require.NoError(t, bson.Unmarshal(doc, &d))
		tf := bson.D{{Key: "timeField", Value: "t"}, {Key: "granularity", Value: "seconds"}, {Key: "bucketMaxSpanSeconds", Value: 3600}}
		if meta != "" {
			tf = append(tf, bson.E{Key: "metaField", Value: meta})
		}
		b, err := bson.Marshal(append(d, bson.E{Key: "timeseriesFields", Value: tf}))
		require.NoError(t, err)
		return b
	}
	docs := []bson.Raw{
		fields(configCollection(t, "shop.system.buckets.readings", bson.D{{Key: "meta", Value: "hashed"}}, false), "m"),
		fields(configCollection(t, "shop.system.buckets.sites", bson.D{{Key: "meta.site", Value: 1}, {Key: "control.min.t", Value: 1}}, false), "m"),
		fields(configCollection(t, "shop.system.buckets.clock", bson.D{{Key: "control.min.t", Value: 1}}, false), ""),
		fields(configCollection(t, "shop.system.buckets.metadata", bson.D{{Key: "meta", Value: 1}}, false), "metadata"),
	}
	keys, err := shardKeysOf("shop", docs)
	require.NoError(t, err)
	require.Equal(t, map[string]shard.Key{
		"readings": {{Path: "m", Hashed: true}},
		"sites":    {{Path: "m.site"}, {Path: "t"}},
		"clock":    {{Path: "t"}},
		"metadata": {{Path: "metadata"}},
	}, keys, "source: %s", srcBucketKey)

	// The declared indexes of a time-series collection are checked against
	// its key (they were not: the key sat under system.buckets.*), and a
	// unique index that starts with _id suits every key (no false 67).
	db := mongotest.Client().Database("shop")
	declared := []patterns.Index{
		{Collection: db.Collection("readings"), Model: mongo.IndexModel{Keys: bson.D{{Key: "m", Value: 1}, {Key: "t", Value: -1}}}},
		{Collection: db.Collection("sites"), Model: mongo.IndexModel{Keys: bson.D{{Key: "t", Value: 1}}}},
		{Collection: db.Collection("readings"), Model: mongo.IndexModel{
			Keys: bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: 1}}, Options: options.Index().SetUnique(true)}},
	}
	fs, err := shardingFindings(shard.Cluster{Version: patterns.Version{Major: 7}, Keys: keys}, "shop", declared)
	require.NoError(t, err)
	require.Len(t, fs, 2, "%v", fs)
	for _, f := range fs {
		require.Equal(t, RuleShardKeyDeclaredQueries, f.Rule, "a unique index that starts with _id is no 67: %v", f)
	}
	require.Equal(t, "sites", fs[0].Collection)
	require.Equal(t, "t", fs[0].Field)
	key, _ := fs[0].Evidence.Get("shardKey")
	require.Equal(t, `{"m.site": 1, "t": 1}`, key)
	require.Equal(t, "_id", fs[1].Field, "queries by _id go to every shard under {m: \"hashed\"}")
}
