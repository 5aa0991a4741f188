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
		"FerretDB 2.7":          {Validators: true},
		"FerretDB 1.24":         {},
		"other":                 {},
	}
	// collMod and create with a validator pass through mongos.
	for _, name := range mongotest.Mongos() {
		want[name] = full
	}
	known := mongotest.KnownServers()
	require.Len(t, known, len(want))
	for name, srv := range known {
		require.Equal(t, want[name], validation.PlanFor(srv), name)
	}
}
