package versioning

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
)

func TestPlanFor(t *testing.T) {
	native := plan{BulkMigrate: true, PipelineUpdates: true, ArrayFilters: true, ServerSizeLimit: true}
	want := map[string]plan{
		"MongoDB 8 replica set": native,
		"MongoDB 6 standalone":  native,
		// FerretDB 2.7 has every feature the package uses, update
		// commands of several statements included (probed 2026-12-01):
		// it takes MongoDB's plan.
		"FerretDB 2.7":  native,
		"FerretDB 1.24": {},
		"other":         {},
	}
	// A mongos takes MongoDB's plan; the FCV changes nothing the
	// package uses (Replace and Update name the shard key in their
	// filters, Config.ShardKey, on every version).
	for _, name := range mongotest.Mongos() {
		want[name] = native
	}
	for name, srv := range mongotest.KnownServers() {
		w, ok := want[name]
		require.True(t, ok, "known server %q has no row", name)
		require.Equal(t, w, planFor(srv), name)
		delete(want, name)
	}
	require.Empty(t, want, "rows for servers no longer known")
	require.Equal(t, native, planFor(mongotest.Native()))
	require.Equal(t, plan{}, planFor(mongotest.Portable()))
}
