package patterns_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/patterns"
)

func raw(t *testing.T, d bson.D) bson.Raw {
	t.Helper()
	b, err := bson.Marshal(d)
	require.NoError(t, err)
	return b
}

const sha = "0123456789abcdef0123456789abcdef01234567"

func TestNewServer(t *testing.T) {
	sessions := bson.E{Key: "logicalSessionTimeoutMinutes", Value: int32(30)}
	mongoBuild := func(v string) bson.D {
		return bson.D{{Key: "version", Value: v}, {Key: "gitVersion", Value: sha}, {Key: "storageEngines", Value: bson.A{"wiredTiger"}}}
	}
	all := patterns.AllFeatures()
	without := func(drop ...patterns.Feature) []patterns.Feature {
		var out []patterns.Feature
		for _, f := range all {
			keep := true
			for _, d := range drop {
				keep = keep && f != d
			}
			if keep {
				out = append(out, f)
			}
		}
		return out
	}
	tests := []struct {
		name     string
		hello    bson.D
		build    bson.D
		kind     patterns.Kind
		topology patterns.Topology
		major    int
		ferret   string // FerretDBVersion
		features []patterns.Feature
	}{
		{
			name:  "MongoDB 8 replica set has everything a replica set can have",
			hello: bson.D{{Key: "setName", Value: "rs0"}, sessions}, build: mongoBuild("8.0.4"),
			kind: patterns.KindMongoDB, topology: patterns.ReplicaSet, major: 8, features: without(patterns.FeatureWritesWithoutShardKey),
		},
		{
			name:  "MongoDB 6 standalone has no transactions or change streams",
			hello: bson.D{sessions}, build: mongoBuild("6.0.19"),
			kind: patterns.KindMongoDB, topology: patterns.Standalone, major: 6,
			features: without(patterns.FeatureTransactions, patterns.FeatureChangeStreams,
				patterns.FeatureTimeSeriesCustomBucketing, patterns.FeatureTimeSeriesDeletes, patterns.FeatureWritesWithoutShardKey),
		},
		{
			name:  "MongoDB 7.0 behind mongos refuses writes without the shard key",
			hello: bson.D{{Key: "msg", Value: "isdbgrid"}, sessions}, build: mongoBuild("7.0.2-rc1"),
			kind: patterns.KindMongoDB, topology: patterns.Sharded, major: 7, features: without(patterns.FeatureWritesWithoutShardKey),
		},
		{
			name:  "MongoDB 7.1 behind mongos, its FCV unknown, lacks writes without the shard key",
			hello: bson.D{{Key: "msg", Value: "isdbgrid"}, sessions}, build: mongoBuild("7.1.0"),
			kind: patterns.KindMongoDB, topology: patterns.Sharded, major: 7, features: without(patterns.FeatureWritesWithoutShardKey),
		},
		{
			name:  "MongoDB 4.4 replica set lacks 5.0 features",
			hello: bson.D{{Key: "setName", Value: "rs0"}, sessions}, build: mongoBuild("4.4.29"),
			kind: patterns.KindMongoDB, topology: patterns.ReplicaSet, major: 4,
			features: without(patterns.FeatureTimeSeries, patterns.FeatureDateTrunc,
				patterns.FeatureTimeSeriesCustomBucketing, patterns.FeatureTimeSeriesDeletes, patterns.FeatureSortArray,
				patterns.FeatureWritesWithoutShardKey),
		},
		{
			name:  "replica set without sessions has no transactions",
			hello: bson.D{{Key: "setName", Value: "rs0"}}, build: mongoBuild("8.0.0"),
			kind: patterns.KindMongoDB, topology: patterns.ReplicaSet, major: 8,
			features: without(patterns.FeatureTransactions, patterns.FeatureWritesWithoutShardKey),
		},
		{
			name:  "FerretDB 1.x is recognised by ferretdbVersion and gets nothing",
			hello: bson.D{sessions},
			build: bson.D{{Key: "version", Value: "7.0.42"}, {Key: "gitVersion", Value: sha}, {Key: "ferretdbVersion", Value: "unknown"}, {Key: "storageEngines", Value: bson.A{"sqlite"}}},
			kind:  patterns.KindFerretDB, topology: patterns.Standalone, major: 7, ferret: "unknown",
		},
		{
			// The replies FerretDB v2.7.0 on PostgreSQL 15 + DocumentDB 0.107
			// gave on 2026-12-01.
			name:  "FerretDB 2.x gets what it was measured to do as MongoDB does",
			hello: bson.D{{Key: "isWritablePrimary", Value: true}, {Key: "maxBsonObjectSize", Value: int32(16777216)}, sessions},
			build: bson.D{{Key: "version", Value: "7.0.77"}, {Key: "gitVersion", Value: "unknown"}, {Key: "versionArray", Value: bson.A{int32(7), int32(0), int32(77), int32(0)}},
				{Key: "ferretdb", Value: bson.D{{Key: "version", Value: "v2.7.0"}, {Key: "package", Value: "deb"}}}},
			kind: patterns.KindFerretDB, topology: patterns.Standalone, major: 7, ferret: "v2.7.0",
			features: []patterns.Feature{
				patterns.FeaturePushModifiers, patterns.FeatureArrayFilters, patterns.FeatureTTLIndexes,
				patterns.FeaturePartialIndexes, patterns.FeatureLookup, patterns.FeatureGroupMinMaxAvg,
				patterns.FeaturePipelineUpdates, patterns.FeaturePullConditions, patterns.FeatureUpdateSizeLimit,
				patterns.FeatureFindAndModifyProjection, patterns.FeatureBatchedUpdates,
				patterns.FeatureConcurrentUpdates, patterns.FeatureCreateManyIndexes, patterns.FeatureSortArray,
				patterns.FeatureValidators,
			},
		},
		{
			name:  "a FerretDB major version not measured gets nothing",
			hello: bson.D{sessions},
			build: bson.D{{Key: "version", Value: "8.0.1"}, {Key: "gitVersion", Value: "unknown"}, {Key: "ferretdb", Value: bson.D{{Key: "version", Value: "v3.0.0"}}}},
			kind:  patterns.KindFerretDB, topology: patterns.Standalone, major: 8, ferret: "v3.0.0",
		},
		{
			name:  "a FerretDB 2 without a readable version gets nothing",
			hello: bson.D{sessions},
			build: bson.D{{Key: "version", Value: "7.0.77"}, {Key: "ferretdb", Value: bson.D{{Key: "version", Value: "unknown"}}}},
			kind:  patterns.KindFerretDB, topology: patterns.Standalone, major: 7, ferret: "unknown",
		},
		{
			name:  "an unrecognised server gets nothing",
			hello: bson.D{{Key: "setName", Value: "globaldb"}, sessions},
			build: bson.D{{Key: "version", Value: "4.2.0"}, {Key: "gitVersion", Value: "unknown"}},
			kind:  patterns.KindOther, topology: patterns.ReplicaSet, major: 4,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := patterns.NewServer(raw(t, tc.hello), raw(t, tc.build))
			require.NoError(t, err)
			require.Equal(t, tc.kind, s.Kind)
			require.Equal(t, tc.topology, s.Topology)
			require.Equal(t, tc.major, s.Version.Major)
			require.Equal(t, tc.ferret, s.FerretDBVersion)
			require.Equal(t, tc.features, s.Features())
			for _, f := range all {
				err := s.Require(f)
				if s.Has(f) {
					require.NoError(t, err)
					continue
				}
				require.ErrorIs(t, err, patterns.ErrUnsupported)
				var ue *patterns.UnsupportedError
				require.ErrorAs(t, err, &ue)
				require.Equal(t, f, ue.Feature)
				require.Contains(t, err.Error(), string(f), "the error names the feature")
				require.Contains(t, err.Error(), s.Kind.String(), "the error names the server")
			}
		})
	}
}

func TestVersionAtLeast(t *testing.T) {
	s, err := patterns.NewServer(raw(t, bson.D{}), raw(t, bson.D{{Key: "version", Value: "6.0.19-ent"}}))
	require.NoError(t, err)
	v := s.Version
	require.Equal(t, patterns.Version{Major: 6, Minor: 0, Patch: 19, Raw: "6.0.19-ent"}, v)
	require.True(t, v.AtLeast(6, 0))
	require.True(t, v.AtLeast(5, 9))
	require.False(t, v.AtLeast(6, 1))
	require.False(t, v.AtLeast(7, 0))
}

func TestServerString(t *testing.T) {
	sessions := bson.E{Key: "logicalSessionTimeoutMinutes", Value: int32(30)}
	for _, tc := range []struct {
		hello, build bson.D
		want         string
	}{
		{bson.D{{Key: "setName", Value: "rs0"}, sessions},
			bson.D{{Key: "version", Value: "8.0.4"}, {Key: "gitVersion", Value: sha}, {Key: "storageEngines", Value: bson.A{"wiredTiger"}}},
			"MongoDB 8.0.4 (replica set)"},
		{bson.D{sessions},
			bson.D{{Key: "version", Value: "7.0.77"}, {Key: "gitVersion", Value: "unknown"}, {Key: "ferretdb", Value: bson.D{{Key: "version", Value: "v2.7.0"}}}},
			"FerretDB v2.7.0 (emulates MongoDB 7.0.77, standalone)"},
		{bson.D{sessions},
			bson.D{{Key: "version", Value: "7.0.42"}, {Key: "ferretdbVersion", Value: "unknown"}},
			"FerretDB 1.x (emulates MongoDB 7.0.42, standalone)"},
		{bson.D{sessions},
			bson.D{{Key: "version", Value: "7.0.42"}, {Key: "ferretdbVersion", Value: "v1.24.2"}},
			"FerretDB v1.24.2 (emulates MongoDB 7.0.42, standalone)"},
		{bson.D{sessions},
			bson.D{{Key: "version", Value: "7.0.77"}, {Key: "ferretdb", Value: bson.D{{Key: "version", Value: "unknown"}}}},
			"FerretDB (version unknown) (emulates MongoDB 7.0.77, standalone)"},
		{bson.D{{Key: "setName", Value: "globaldb"}},
			bson.D{{Key: "version", Value: "4.2.0"}},
			"other 4.2.0 (replica set)"},
	} {
		s, err := patterns.NewServer(raw(t, tc.hello), raw(t, tc.build))
		require.NoError(t, err)
		require.Equal(t, tc.want, s.String())
	}
}

func TestServerWithout(t *testing.T) {
	s, err := patterns.NewServer(raw(t, bson.D{{Key: "setName", Value: "rs0"}}),
		raw(t, bson.D{{Key: "version", Value: "8.0.4"}, {Key: "gitVersion", Value: sha}, {Key: "storageEngines", Value: bson.A{"wiredTiger"}}}))
	require.NoError(t, err)
	w := s.Without(patterns.FeatureArrayFilters, patterns.FeatureLookup)
	require.False(t, w.Has(patterns.FeatureArrayFilters))
	require.False(t, w.Has(patterns.FeatureLookup))
	require.True(t, w.Has(patterns.FeaturePushModifiers))
	require.True(t, s.Has(patterns.FeatureArrayFilters), "the original keeps its features")
	require.Equal(t, s.String(), w.String())
}

// TestServerWithFCV: WithFCV records the FCV of a getParameter reply
// (the older version during an upgrade) and grants no feature: a mongos
// answers its binary version (SERVER-100224), so even a reply of 7.1+
// on a mongos 7.1+ does not give FeatureWritesWithoutShardKey (see
// TestFCVReadFromMongos).
func TestServerWithFCV(t *testing.T) {
	mongos := bson.D{{Key: "msg", Value: "isdbgrid"}, {Key: "logicalSessionTimeoutMinutes", Value: int32(30)}}
	for _, tc := range []struct {
		hello              bson.D
		version, fcv       string
		target             string // an upgrade or a downgrade under way
		want               bool
		fcvMajor, fcvMinor int
	}{
		{mongos, "7.0.2", "7.0", "", false, 7, 0},
		{mongos, "7.1.0", "7.0", "", false, 7, 0},
		{mongos, "7.1.0", "7.1", "", false, 7, 1},
		{mongos, "8.0.4", "7.0", "", false, 7, 0},
		{mongos, "8.0.4", "7.0", "8.0", false, 7, 0}, // upgrading: the older
		{mongos, "8.0.4", "8.0", "", false, 8, 0},
		{bson.D{{Key: "setName", Value: "rs0"}}, "8.0.4", "8.0", "", false, 8, 0}, // not sharded
	} {
		s, err := patterns.NewServer(raw(t, tc.hello), raw(t, bson.D{{Key: "version", Value: tc.version}, {Key: "gitVersion", Value: sha}, {Key: "storageEngines", Value: bson.A{"wiredTiger"}}}))
		require.NoError(t, err)
		require.False(t, s.Has(patterns.FeatureWritesWithoutShardKey), "%s: unknown FCV", tc.version)
		fcv := bson.D{{Key: "version", Value: tc.fcv}}
		if tc.target != "" {
			fcv = append(fcv, bson.E{Key: "targetVersion", Value: tc.target})
		}
		w, err := s.WithFCV(raw(t, bson.D{{Key: "featureCompatibilityVersion", Value: fcv}, {Key: "ok", Value: 1.0}}))
		require.NoError(t, err)
		require.Equal(t, tc.want, w.Has(patterns.FeatureWritesWithoutShardKey), "%s at FCV %s", tc.version, tc.fcv)
		require.Equal(t, []int{tc.fcvMajor, tc.fcvMinor}, []int{w.FCV.Major, w.FCV.Minor})
		require.False(t, s.Has(patterns.FeatureWritesWithoutShardKey), "the original is unchanged")
	}
	s, err := patterns.NewServer(raw(t, mongos), raw(t, bson.D{{Key: "version", Value: "8.0.4"}, {Key: "gitVersion", Value: sha}, {Key: "storageEngines", Value: bson.A{"wiredTiger"}}}))
	require.NoError(t, err)
	_, err = s.WithFCV(raw(t, bson.D{{Key: "ok", Value: 1.0}}))
	require.Error(t, err)
}
