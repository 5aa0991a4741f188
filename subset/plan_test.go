package subset_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/subset"
)

// TestPlanFor gives each server the library knows the path its features
// allow: the push plan needs $push's modifiers, pipeline updates,
// $sortArray and the server's 16 MiB limit on updates; a server that
// stores oversize updates has its parents measured.
func TestPlanFor(t *testing.T) {
	want := map[string]string{
		"MongoDB 8 replica set": "{push:true measure:false}",
		"MongoDB 6 standalone":  "{push:true measure:false}",
		"FerretDB 2.7":          "{push:true measure:false}",
		"FerretDB 1.24":         "{push:false measure:true}",
		"other":                 "{push:false measure:true}",
	}
	// A mongos: $push modifiers and the 16 MiB limit as a shard's.
	for _, name := range mongotest.Mongos() {
		want[name] = "{push:true measure:false}"
	}
	servers := mongotest.KnownServers()
	require.Len(t, servers, len(want))
	for name, srv := range servers {
		require.Equal(t, want[name], fmt.Sprintf("%+v", subset.PlanFor(srv)), name)
	}
	require.Equal(t, subset.PlanFor(mongotest.KnownServers()["MongoDB 8 replica set"]), subset.PlanFor(mongotest.Native()))
	require.Equal(t, "{push:false measure:true}", fmt.Sprintf("%+v", subset.PlanFor(mongotest.Portable())))
	// A server with the 16 MiB limit but no $sortArray (MongoDB before
	// 5.2): every write recomputes, and the server refuses what would
	// pass 16 MiB.
	require.Equal(t, "{push:false measure:false}", fmt.Sprintf("%+v", subset.PlanFor(mongotest.KnownServers()["FerretDB 2.7"].Without(patterns.FeatureSortArray))))
}
