package versioning

import (
	"context"
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/errs"
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
// between these steps is read again. Between the steps a reader may see the
// migrated document without the update; never the update applied to an
// old shape.
//
// Errors that leave the document untouched: [patterns.ErrInvalid] for a
// bad id, an empty update, a field that is not an operator, an operator
// whose value is not a document, one given twice, an operator that touches
// the version or revision field (the repository owns them), or Upsert;
// [patterns.ErrNotFound]; [ErrNewerSchema]; [ErrMigration]. After 4
// attempts that each met a changed document, [patterns.ErrConflict]: the
// document may have been migrated, the update was not applied. A pipeline
// needs [patterns.FeaturePipelineUpdates] (MongoDB 4.2+): on a server
// lacking it, Update returns [patterns.ErrUnsupported] naming it (the
// capability is detected once per client and cached).
func (r *Repo[T]) Update(ctx context.Context, id any, update any, opts ...options.Lister[options.UpdateOneOptions]) error {
	if err := r.update(ctx, id, update, opts); err != nil {
		return r.errorf("Update", id, err)
	}
	return nil
}

func (r *Repo[T]) update(ctx context.Context, id, update any, opts []options.Lister[options.UpdateOneOptions]) error {
	if err := patterns.ValidateID(id); err != nil {
		return err
	}
	stamped, pipeline, err := stampUpdate(update, r.field, r.revField, int32(r.current), bson.NewObjectID())
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
	if pipeline {
		srv, err := patterns.Capabilities(ctx, r.coll.Database().Client())
		if err != nil {
			return err
		}
		if err := srv.Require(patterns.FeaturePipelineUpdates); err != nil {
			return err
		}
	}
	return r.guarded(ctx, id, func() (bool, error) {
		res, err := r.coll.UpdateOne(ctx, r.currentFilter(id), stamped, opts...)
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

// stampUpdate checks an update and adds the version and revision to it.
// For a document of operators, it returns a bson.D whose $set (the user's,
// extended, or a new one at the end) also sets both fields; for a pipeline
// (pipeline is true), a bson.A with a final $set stage that sets them,
// which wins whatever the earlier stages did. It refuses, wrapping
// [patterns.ErrInvalid], what is described on [Repo.Update].
func stampUpdate(update any, field, revField string, version int32, rev bson.ObjectID) (stamped any, pipeline bool, err error) {
	if update == nil {
		return nil, false, errs.Invalid("update is nil")
	}
	typ, data, err := bson.MarshalValue(update)
	if err != nil {
		return nil, false, fmt.Errorf("%w: encode the update %T: %v", patterns.ErrInvalid, update, err)
	}
	stamp := bson.D{{Key: field, Value: version}, {Key: revField, Value: rev}}
	switch typ {
	case bson.TypeArray:
		stages, err := bson.Raw(data).Values()
		if err != nil {
			return nil, false, fmt.Errorf("%w: the update pipeline: %v", patterns.ErrInvalid, err)
		}
		if len(stages) == 0 {
			return nil, false, errs.Invalid("the update pipeline is empty")
		}
		// The driver encodes each element of a pipeline as a document of
		// its own: the stages go as documents (bson.Raw), which it can
		// encode alone, not as bson.RawValue, which it cannot.
		out := make(bson.A, 0, len(stages)+1)
		for i, s := range stages {
			doc, ok := s.DocumentOK()
			if !ok {
				return nil, false, errs.Invalid("stage %d of the update pipeline is a BSON %s, not a document", i, s.Type)
			}
			out = append(out, doc)
		}
		return append(out, bson.D{{Key: "$set", Value: stamp}}), true, nil
	case bson.TypeEmbeddedDocument:
	default:
		return nil, false, errs.Invalid("update is a BSON %s: want a document of update operators or a pipeline", typ)
	}
	ops, err := bson.Raw(data).Elements()
	if err != nil {
		return nil, false, fmt.Errorf("%w: the update: %v", patterns.ErrInvalid, err)
	}
	if len(ops) == 0 {
		return nil, false, errs.Invalid("update is empty")
	}
	out := make(bson.D, 0, len(ops)+1)
	hasSet := false
	for _, op := range ops {
		name, val := op.Key(), op.Value()
		if !strings.HasPrefix(name, "$") {
			return nil, false, errs.Invalid("update field %q is not an update operator; use Replace to replace a document", name)
		}
		if val.Type != bson.TypeEmbeddedDocument {
			return nil, false, errs.Invalid("update operator %s takes a document, not a BSON %s", name, val.Type)
		}
		for _, prev := range out {
			if prev.Key == name {
				return nil, false, errs.Invalid("update operator %s appears twice", name)
			}
		}
		args, err := val.Document().Elements()
		if err != nil {
			return nil, false, fmt.Errorf("%w: update operator %s: %v", patterns.ErrInvalid, name, err)
		}
		var fields bson.D
		for _, a := range args {
			paths := []string{a.Key()}
			if to, ok := a.Value().StringValueOK(); ok && name == "$rename" {
				paths = append(paths, to)
			}
			for _, p := range paths {
				if p == field || strings.HasPrefix(p, field+".") || p == revField || strings.HasPrefix(p, revField+".") {
					return nil, false, errs.Invalid("update operator %s touches %q: the repository sets the version and revision fields", name, p)
				}
			}
			if name == "$set" {
				fields = append(fields, bson.E{Key: a.Key(), Value: a.Value()})
			}
		}
		if name == "$set" {
			hasSet = true
			out = append(out, bson.E{Key: name, Value: append(fields, stamp...)})
			continue
		}
		out = append(out, bson.E{Key: name, Value: val})
	}
	if !hasSet {
		out = append(out, bson.E{Key: "$set", Value: stamp})
	}
	return out, false, nil
}
