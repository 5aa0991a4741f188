package outlier

import (
	"github.com/mongopatterns/mongopatterns/internal/lazy"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// plan is the path a repository takes on its server, decided once (see
// [Repo]) from the server's features.
type plan struct {
	// serverSizeLimit: the server refuses an update that would take a
	// document past 16 MiB ([patterns.FeatureUpdateSizeLimit]), so Append
	// pushes into an open parent without reading it first, guarded on the
	// number of items only, and lets the server refuse a push that does not
	// fit. Without it, Append reads the whole parent to size each push
	// itself, guards the push on the exact number of items it read (so that
	// a concurrent push makes it match nothing and read again), and runs
	// one Append per parent at a time within the repository, so that its
	// own callers do not make each other's pushes miss.
	serverSizeLimit bool
	// pullByCondition: $pull with a condition on the elements works
	// ([patterns.FeaturePullConditions]), so Remove pulls an item by its
	// id in one command. Without it, Remove reads the elements holding the
	// id and pulls them whole with $pullAll.
	pullByCondition bool
	// pipelineUpdates: updates given as a pipeline work
	// ([patterns.FeaturePipelineUpdates]), so Remove takes an item out of
	// an overflow document in one command that lowers the count by the
	// number of copies it pulled, whatever put them there. Without it,
	// Remove reads the document holding the id and pulls its elements
	// whole with $pullAll, lowering the count by their number.
	pipelineUpdates bool
	// arrayFilters: the server has [patterns.FeatureArrayFilters] and
	// checks the 16 MiB limit itself (serverSizeLimit), so Update replaces
	// an item in the parent in one command, by its id, without reading
	// the parent first, and replaces the element it read (in an overflow
	// document, or in the parent after a read) by its value. Without it,
	// Update reads the parent and sets the element by its index, guarded
	// on the array's size too.
	arrayFilters bool
}

// planFor returns the plan for srv. It reads features only: MongoDB and
// FerretDB 2.x have all four, FerretDB 1.x and unrecognised servers none.
func planFor(srv *patterns.Server) plan {
	return plan{
		serverSizeLimit: srv.Has(patterns.FeatureUpdateSizeLimit),
		pullByCondition: srv.Has(patterns.FeaturePullConditions),
		pipelineUpdates: srv.Has(patterns.FeaturePipelineUpdates),
		arrayFilters:    srv.Has(patterns.FeatureArrayFilters) && srv.Has(patterns.FeatureUpdateSizeLimit),
	}
}

// Path names the plan for a [patterns.Hook].
func (p plan) Path() (string, []patterns.Feature) {
	return lazy.Path(
		lazy.Use{Feature: patterns.FeatureUpdateSizeLimit, Relies: p.serverSizeLimit},
		lazy.Use{Feature: patterns.FeaturePullConditions, Relies: p.pullByCondition},
		lazy.Use{Feature: patterns.FeaturePipelineUpdates, Relies: p.pipelineUpdates},
		lazy.Use{Feature: patterns.FeatureArrayFilters, Relies: p.arrayFilters},
	)
}
