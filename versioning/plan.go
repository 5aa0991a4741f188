package versioning

import (
	"github.com/mongopatterns/mongopatterns/internal/lazy"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// plan is how a repository uses its server, decided once per repository
// from the server's features (see [planFor]). Its fields are exported
// for the tests of package versioning_test, which read and build plans
// through the alias in export_test.go; the type itself is not.
type plan struct {
	// BulkMigrate: MigrateAll writes each batch with one unordered
	// bulkWrite ([patterns.FeatureBatchedUpdates]); without it, one
	// replaceOne per document.
	BulkMigrate bool
	// PipelineUpdates: Update takes an aggregation pipeline
	// ([patterns.FeaturePipelineUpdates]); without it, a pipeline is
	// refused with ErrUnsupported before anything is sent.
	PipelineUpdates bool
	// ArrayFilters: Update passes arrayFilters on
	// ([patterns.FeatureArrayFilters]); without it, they are refused with
	// ErrUnsupported before anything is sent.
	ArrayFilters bool
	// ServerSizeLimit: the server refuses an update that would make a
	// document larger than 16 MiB ([patterns.FeatureUpdateSizeLimit]), so
	// Update sends one updateOne filtered on the current version. Without
	// it, Update reads the document, applies the update with a
	// findAndModify guarded on what it read and returning the result, and
	// puts the document it read back when the result passes 16 MiB.
	ServerSizeLimit bool
}

// planFor returns the plan for srv: the native paths where srv has the
// features they need, the portable ones elsewhere.
func planFor(srv *patterns.Server) plan {
	return plan{
		BulkMigrate:     srv.Has(patterns.FeatureBatchedUpdates),
		PipelineUpdates: srv.Has(patterns.FeaturePipelineUpdates),
		ArrayFilters:    srv.Has(patterns.FeatureArrayFilters),
		ServerSizeLimit: srv.Has(patterns.FeatureUpdateSizeLimit),
	}
}

// unsupported is the error for an update that needs f on a server whose
// plan lacks it.
func unsupported(f patterns.Feature) error {
	return &patterns.UnsupportedError{Feature: f, Server: "the server"}
}

// Path names the plan for a [patterns.Hook].
func (p plan) Path() (string, []patterns.Feature) {
	return lazy.Path(
		lazy.Use{Feature: patterns.FeatureBatchedUpdates, Relies: p.BulkMigrate},
		lazy.Use{Feature: patterns.FeaturePipelineUpdates, Relies: p.PipelineUpdates},
		lazy.Use{Feature: patterns.FeatureArrayFilters, Relies: p.ArrayFilters},
		lazy.Use{Feature: patterns.FeatureUpdateSizeLimit, Relies: p.ServerSizeLimit},
	)
}
