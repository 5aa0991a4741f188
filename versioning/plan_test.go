package versioning

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
)

func TestPlanFor(t *testing.T) {
	servers := mongotest.KnownServers()
	native := plan{BulkMigrate: true, PipelineUpdates: true, ArrayFilters: true, ServerSizeLimit: true}
	for name, want := range map[string]plan{
		"MongoDB 8 replica set": native,
		"MongoDB 6 standalone":  native,
		// FerretDB 2.7 has pipeline updates, arrayFilters and the 16 MiB
		// limit, not update commands of several statements (not measured):
		// MigrateAll writes one document at a time there.
		"FerretDB 2.7":  {PipelineUpdates: true, ArrayFilters: true, ServerSizeLimit: true},
		"FerretDB 1.24": {},
		"other":         {},
	} {
		srv, ok := servers[name]
		require.True(t, ok, "no known server %q", name)
		require.Equal(t, want, planFor(srv), name)
	}
	require.Len(t, servers, 5, "every known server has its row")
	require.Equal(t, native, planFor(mongotest.Native()))
	require.Equal(t, plan{}, planFor(mongotest.Portable()))
}
