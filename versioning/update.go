package versioning

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/internal/srverr"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Update applies update to the document id, written against the current
// shape T, and stamps the current version and a new revision. update is a
// document of update operators ({"$set": ...}, {"$inc": ...}) or an
// aggregation pipeline (mongo.Pipeline); options pass through to the
// driver, except Upsert, refused (use Insert).
//
// The update is filtered on the current version, so it never lands on a
// document of another shape. A document at the current version costs one
// command (update). An older one costs four: the update, which matches
// nothing; a find; the write-back of the migrated document with the
// compare-and-set of [Repo.Get] (a replaceOne, whatever
// Config.NoWriteBack says); and the update again. A document that changes
// between these steps is read again. Between the steps a reader may see
// the migrated document without the update; never the update applied to
// an old shape. Every write is guarded, so each is sent again after a
// transient failure (FerretDB 2.x's deadlock, which applied nothing).
//
// Errors that leave the document untouched: [patterns.ErrInvalid] for a
// bad id, an empty update, a field that is not an operator, an operator
// whose value is not a document, one given twice, an operator that touches
// the version or revision field (the repository owns them), or Upsert;
// [patterns.ErrNotFound]; [ErrNewerSchema]; [ErrMigration]. After 4
// attempts that each met a changed document, [patterns.ErrConflict]: the
// document may have been migrated, the update was not applied. A pipeline
// needs [patterns.FeaturePipelineUpdates] (MongoDB 4.2+, FerretDB 2.x) and
// arrayFilters need [patterns.FeatureArrayFilters]: on a server lacking
// them, Update returns [patterns.ErrUnsupported] naming the feature,
// before sending anything but the detection of the server (once per
// client).
func (r *Repo[T]) Update(ctx context.Context, id any, update any, opts ...options.Lister[options.UpdateOneOptions]) error {
	if err := patterns.ValidateID(id); err != nil {
		return pkg.Wrap("Update", err)
	}
	if err := r.update(ctx, id, update, opts); err != nil {
		return pkg.Wrap("Update", r.ofDoc(id, err))
	}
	return nil
}

func (r *Repo[T]) update(ctx context.Context, id, update any, opts []options.Lister[options.UpdateOneOptions]) error {
	rev := bson.NewObjectID()
	stamped, pipeline, err := r.stampUpdate(update, rev)
	if err != nil {
		return err
	}
	uo, err := merged(opts)
	if err != nil {
		return err
	}
	if uo.Upsert != nil && *uo.Upsert {
		return errs.Invalid("upsert: an update cannot create a document at a known version; use Insert")
	}
	p, err := r.plan(ctx)
	if err != nil {
		return err
	}
	if pipeline && !p.PipelineUpdates {
		return unsupported(patterns.FeaturePipelineUpdates)
	}
	if uo.ArrayFilters != nil && !p.ArrayFilters {
		return unsupported(patterns.FeatureArrayFilters)
	}
	return r.updateOne(ctx, id, stamped, opts)
}

// updateOne sends the update filtered on the current version; after a
// miss, the document is read, migrated and written back, and the update
// sent again.
func (r *Repo[T]) updateOne(ctx context.Context, id, stamped any, opts []options.Lister[options.UpdateOneOptions]) error {
	return r.guarded(ctx, id, func() (bool, error) {
		var res *mongo.UpdateResult
		err := srverr.Retry(ctx, func() (err error) {
			res, err = r.coll.UpdateOne(ctx, r.currentFilter(id), stamped, opts...)
			return err
		})
		return err == nil && res.MatchedCount == 1, err
	}, func(raw bson.Raw) error {
		// Not at the current version: bring it there and try again. A
		// lost write-back is fine: the next attempt meets the winner's
		// document.
		_, migrated, err := r.upgrade(raw)
		if err != nil || migrated == nil {
			return err
		}
		_, err = r.writeBackDoc(ctx, raw, migrated)
		return err
	})
}
