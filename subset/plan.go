package subset

import (
	"github.com/mongopatterns/mongopatterns/internal/lazy"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// plan is the path a repository takes on its server, decided once from
// the server's features (see the package documentation).
type plan struct {
	// push: Add pushes its items into the subset with one $push of $each,
	// $sort and $slice, which leaves the revision alone, and a
	// recomputation writes the subset with a pipeline update that merges
	// what it read from the items collection with the elements pushed
	// since it read the parent, sorted with $sortArray. The two go
	// together: a push that does not move the revision is safe only
	// against recomputations that keep what was pushed behind their back.
	// It needs [patterns.FeaturePushModifiers],
	// [patterns.FeaturePipelineUpdates] and [patterns.FeatureSortArray],
	// and [patterns.FeatureUpdateSizeLimit], since the server alone knows
	// the size of the parent a push makes. Otherwise every write to a
	// subset is a recomputation that sets it whole (the portable path).
	push bool
	// measure: the server stores an update past 16 MiB silently (it lacks
	// [patterns.FeatureUpdateSizeLimit]), so a recomputation reads the
	// whole parent rather than its revision and subset ids, and refuses
	// to write a parent that would pass [patterns.MaxDocumentSize].
	measure bool
}

// planFor returns the plan for srv.
func planFor(srv *patterns.Server) plan {
	return plan{
		push: srv.Has(patterns.FeaturePushModifiers) && srv.Has(patterns.FeaturePipelineUpdates) &&
			srv.Has(patterns.FeatureSortArray) && srv.Has(patterns.FeatureUpdateSizeLimit),
		measure: !srv.Has(patterns.FeatureUpdateSizeLimit),
	}
}

// Path names the plan for a [patterns.Hook]: native when Add pushes.
func (p plan) Path() (string, []patterns.Feature) {
	return lazy.Path(
		lazy.Use{Feature: patterns.FeaturePushModifiers, Relies: p.push},
		lazy.Use{Feature: patterns.FeaturePipelineUpdates, Relies: p.push},
		lazy.Use{Feature: patterns.FeatureSortArray, Relies: p.push},
		lazy.Use{Feature: patterns.FeatureUpdateSizeLimit, Relies: !p.measure},
	)
}
