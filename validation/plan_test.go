package validation_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/validation"
)

func TestPlanFor(t *testing.T) {
	full := validation.Plan{Validators: true, FullSchema: true, CreateWithValidator: true}
	want := map[string]validation.Plan{
		"MongoDB 8 replica set": full,
		"MongoDB 6 standalone":  full,
		// collMod and create with a validator pass through mongos.
		"MongoDB 6.0 mongos":            full,
		"MongoDB 7.0 mongos":            full,
		"MongoDB 7.1 mongos at FCV 7.0": full,
		"MongoDB 7.1 mongos at FCV 7.1": full,
		"MongoDB 8.0 mongos at FCV 7.0": full,
		"MongoDB 8.0 mongos at FCV 8.0": full,
		"FerretDB 2.7":                  {Validators: true},
		"FerretDB 1.24":                 {},
		"other":                         {},
	}
	known := mongotest.KnownServers()
	require.Len(t, known, len(want))
	for name, srv := range known {
		require.Equal(t, want[name], validation.PlanFor(srv), name)
	}
}
