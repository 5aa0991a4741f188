package extref

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// TestPlanFor: the path each known server gets, from its features.
func TestPlanFor(t *testing.T) {
	all := plan{arrayFilters: true, batchedUpdates: true, transactions: true, projectUpdate: true, pipelineUpdates: true, changeStreams: true}
	keyless := all
	keyless.keylessWrites = true
	want := map[string]plan{
		"MongoDB 8 replica set": all,
		"MongoDB 6 standalone":  {arrayFilters: true, batchedUpdates: true, projectUpdate: true, pipelineUpdates: true},
		// A mongos (4.2+) runs transactions and change streams. From 7.1
		// at an FCV of 7.1+ it would take a findAndModify without the
		// shard key, but a mongos answers getParameter with its binary
		// version (SERVER-100224), so no mongos is known to: Update reads
		// the key values first (Config.ShardKey) on every one.
		"MongoDB 6.0 mongos":            all,
		"MongoDB 7.0 mongos":            all,
		"MongoDB 7.1 mongos at FCV 7.0": all,
		"MongoDB 7.1 mongos at FCV 7.1": all,
		"MongoDB 8.0 mongos at FCV 7.0": all,
		"MongoDB 8.0 mongos at FCV 8.0": all,
		"FerretDB 1.24":                 {},
		// arrayFilters, pipeline updates, findAndModify's projection and
		// multi-statement updates work there; transactions are silently
		// wrong and change streams answer an error.
		"FerretDB 2.7": {arrayFilters: true, batchedUpdates: true, projectUpdate: true, pipelineUpdates: true},
		"other":        {},
	}
	servers := mongotest.KnownServers()
	require.Len(t, servers, len(want), "every known server has a row")
	for name, srv := range servers {
		p, ok := want[name]
		require.True(t, ok, "no row for %s", name)
		require.Equal(t, p, planFor(srv), name)
	}
	require.Equal(t, plan{}, planFor(mongotest.Portable()))
	// A mongos 7.1+ at an FCV of 7.1+ takes a findAndModify without the
	// shard key, but a mongos answers getParameter with its binary version
	// (SERVER-100224): no FCV recorded by WithFCV gives the feature, and
	// Update reads the key values first (Config.ShardKey) on every mongos.
	for _, tc := range []struct {
		version, fcv string
		keyless      bool
	}{{"7.0.2", "7.0", false}, {"7.1.0", "7.0", false}, {"7.1.0", "7.1", false}, {"8.0.4", "7.0", false}, {"8.0.4", "8.0", false}, {"8.0.4", "", false}} {
		hello, err := bson.Marshal(bson.D{{Key: "msg", Value: "isdbgrid"}, {Key: "logicalSessionTimeoutMinutes", Value: int32(30)}})
		require.NoError(t, err)
		build, err := bson.Marshal(bson.D{{Key: "version", Value: tc.version}, {Key: "gitVersion", Value: "0123456789abcdef0123456789abcdef01234567"}, {Key: "storageEngines", Value: bson.A{"wiredTiger"}}})
		require.NoError(t, err)
		srv, err := patterns.NewServer(hello, build)
		require.NoError(t, err)
		if tc.fcv != "" {
			fcv, err := bson.Marshal(bson.D{{Key: "featureCompatibilityVersion", Value: bson.D{{Key: "version", Value: tc.fcv}}}})
			require.NoError(t, err)
			srv, err = srv.WithFCV(fcv)
			require.NoError(t, err)
		}
		require.Equal(t, plan{arrayFilters: true, batchedUpdates: true, transactions: true, projectUpdate: true, pipelineUpdates: true, changeStreams: true, keylessWrites: tc.keyless}, planFor(srv), "%s at FCV %q", tc.version, tc.fcv)
	}
	require.Equal(t, all, planFor(mongotest.Native()))
}

// TestPlanPaths: which targets take the portable path, and how many
// documents it rewrites per command, on each known server.
func TestPlanPaths(t *testing.T) {
	single, array, whole := mustParse(t, "customer"), mustParse(t, "items[].product"), mustParse(t, "authors[]")
	for name, srv := range mongotest.KnownServers() {
		p := planFor(srv)
		require.False(t, p.portable(single), "%s: a single copy is never portable", name)
		require.Equal(t, !p.arrayFilters, p.portable(array), name)
		require.Equal(t, !p.arrayFilters, p.portable(whole), name)
	}
	require.Equal(t, 1, plan{}.perCommand(500), "one statement per command without batched updates")
	require.Equal(t, 500, plan{batchedUpdates: true}.perCommand(500))
}
