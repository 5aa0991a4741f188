package outlier

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
)

func TestPlanFor(t *testing.T) {
	native := plan{serverSizeLimit: true, pullByCondition: true, pipelineUpdates: true, arrayFilters: true}
	portable := plan{}
	want := map[string]plan{
		"MongoDB 8 replica set": native,
		"MongoDB 6 standalone":  native,
		// FerretDB 2.x refuses updates past 16 MiB (its own code, which
		// srverr.TooLarge knows) and has $pull conditions and pipeline
		// updates, and arrayFilters.
		"FerretDB 2.7": native,
		// FerretDB 1.x stores a document past 16 MiB and reads a $pull
		// condition as a whole element, both silently.
		"FerretDB 1.24": portable,
		// A server the library does not recognise is trusted with nothing.
		"other": portable,
	}
	// A mongos takes the shards' path; the FCV changes nothing the
	// package uses.
	for _, name := range mongotest.Mongos() {
		want[name] = native
	}
	known := mongotest.KnownServers()
	require.Len(t, known, len(want), "a plan for every known server")
	for name, srv := range known {
		require.Equal(t, want[name], planFor(srv), name)
	}
	require.Equal(t, native, planFor(mongotest.Native()))
	require.Equal(t, portable, planFor(mongotest.Portable()))
}
