package extref

import (
	"context"

	"github.com/mongopatterns/mongopatterns/internal/lazy"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// plan is what the repository does on its server, decided once from the
// server's features (see [planFor]). Every branch on the server reads one
// of its fields.
type plan struct {
	// arrayFilters: an array target syncs with one updateMany whose array
	// filter picks the source's copies ([patterns.FeatureArrayFilters]);
	// otherwise with the portable path (read the documents, rewrite the
	// stale copies by index). Update refuses an arrayFilters option
	// without it.
	arrayFilters bool
	// batchedUpdates: the portable path rewrites up to BatchSize documents
	// per update command; otherwise one per command
	// ([patterns.FeatureBatchedUpdates]).
	batchedUpdates bool
	// transactions: Update runs the source's update and the copies'
	// updates in one transaction ([patterns.FeatureTransactions]).
	transactions bool
	// projectUpdate: Update's findAndModify returns only the copied fields
	// ([patterns.FeatureFindAndModifyProjection]), else the whole
	// document.
	projectUpdate bool
	// pipelineUpdates: Update accepts an update pipeline
	// ([patterns.FeaturePipelineUpdates]).
	pipelineUpdates bool
	// changeStreams: Watch can open a change stream
	// ([patterns.FeatureChangeStreams]).
	changeStreams bool
	// keylessWrites: a findAndModify by _id alone is accepted on a source
	// sharded on another key ([patterns.FeatureWritesWithoutShardKey]), so
	// Update reads no shard-key values first; otherwise, with
	// Config.ShardKey, it does.
	keylessWrites bool
}

// planFor returns the plan for srv, from its features alone.
func planFor(srv *patterns.Server) plan {
	return plan{
		arrayFilters:    srv.Has(patterns.FeatureArrayFilters),
		batchedUpdates:  srv.Has(patterns.FeatureBatchedUpdates),
		transactions:    srv.Has(patterns.FeatureTransactions),
		projectUpdate:   srv.Has(patterns.FeatureFindAndModifyProjection),
		pipelineUpdates: srv.Has(patterns.FeaturePipelineUpdates),
		changeStreams:   srv.Has(patterns.FeatureChangeStreams),
		keylessWrites:   srv.Has(patterns.FeatureWritesWithoutShardKey),
	}
}

// portable reports whether the copies at path sync through the portable
// path: copies in array elements on a server without arrayFilters.
func (p plan) portable(path copyPath) bool { return path.array != "" && !p.arrayFilters }

// perCommand is how many documents the portable path rewrites per update
// command, for a batch size of batch.
func (p plan) perCommand(batch int) int {
	if p.batchedUpdates {
		return batch
	}
	return 1
}

// decision is the repository's plan with the server it was made for, which
// errors name.
type decision struct {
	plan
	server string
}

// unsupported returns the error of an operation that needs f, which the
// server lacks.
func (d decision) unsupported(f patterns.Feature) error {
	return &patterns.UnsupportedError{Feature: f, Server: d.server}
}

// decide returns the repository's decision, made on first use from
// [patterns.Capabilities] (two commands to the admin database, once per
// client); a failed detection is not kept.
func (r *Ref[S]) decide(ctx context.Context) (decision, error) {
	return lazy.Decide(ctx, &r.decided, r.db.Client(), func(srv *patterns.Server) decision {
		return decision{plan: planFor(srv), server: srv.String()}
	})
}

// Path names the plan for a [patterns.Hook]. Writes without the shard
// key are left out: no server is detected to have them (see
// [patterns.FeatureWritesWithoutShardKey]).
func (p plan) Path() (string, []patterns.Feature) {
	return lazy.Path(
		lazy.Use{Feature: patterns.FeatureArrayFilters, Relies: p.arrayFilters},
		lazy.Use{Feature: patterns.FeatureBatchedUpdates, Relies: p.batchedUpdates},
		lazy.Use{Feature: patterns.FeatureTransactions, Relies: p.transactions},
		lazy.Use{Feature: patterns.FeatureFindAndModifyProjection, Relies: p.projectUpdate},
		lazy.Use{Feature: patterns.FeaturePipelineUpdates, Relies: p.pipelineUpdates},
		lazy.Use{Feature: patterns.FeatureChangeStreams, Relies: p.changeStreams},
	)
}
