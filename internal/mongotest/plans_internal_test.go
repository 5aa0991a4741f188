package mongotest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/patterns"
)

func TestNeedsNamesTheFeaturesThatMakeThePlan(t *testing.T) {
	type plan struct{ push, tx bool }
	planFor := func(s *patterns.Server) plan {
		return plan{push: s.Has(patterns.FeaturePushModifiers), tx: s.Has(patterns.FeatureTransactions)}
	}
	ferret2 := KnownServers()["FerretDB 2.7"]
	require.Equal(t, string(patterns.FeatureTransactions), needs(planFor, planFor(Native()), ferret2),
		"FerretDB 2 has $push modifiers: only transactions keep it off the native plan")
	require.Equal(t, string(patterns.FeatureTransactions)+", "+string(patterns.FeaturePushModifiers),
		needs(planFor, planFor(Native()), Portable()))
	require.Equal(t, string(patterns.FeaturePushModifiers), needs(planFor, plan{push: true}, Portable()),
		"a plan that only FerretDB 2 takes is named by what FerretDB 2 has")
}
