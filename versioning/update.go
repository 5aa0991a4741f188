package versioning

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/internal/listers"
	"github.com/mongopatterns/mongopatterns/internal/srverr"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Update applies update to the document id, written against the current
// shape T, and stamps the current version and a new revision. update is a
// document of update operators ({"$set": ...}, {"$inc": ...}) or an
// aggregation pipeline (mongo.Pipeline); options pass through to the
// driver, except Upsert, refused (use Insert), and a collation other
// than {locale: "simple"}, refused: under it {_id: "ann"} may match the
// document "ANN".
//
// The update lands only on the document at the current version, so it
// never applies to a document of another shape: an older one is first
// migrated and written back with the compare-and-set of [Repo.Get]
// (whatever Config.NoWriteBack says), then updated. Between these steps a
// reader may see the migrated document without the update; never the
// update applied to an old shape. Every write is guarded, so each is sent
// again after a transient failure (FerretDB 2.x's deadlock, which applied
// nothing), and a document that changes between the steps is read again.
//
// Commands, on a server that refuses documents past 16 MiB itself
// ([patterns.FeatureUpdateSizeLimit]: MongoDB, FerretDB 2.x): one
// (update) for a document at the current version; four for an older one
// (the update, which matches nothing; a find; the write-back, a
// replaceOne; the update again).
//
// On a server without that limit (FerretDB 1.x, which would store the
// result), the size of the result is checked by the repository: Update
// reads the document (find) and applies the update with a findAndModify
// guarded on the revision it read, which returns the result; two commands
// for a current document, three for an older one (find, write-back,
// findAndModify). If the result passes 16 MiB, Update puts the document it
// read back (a replaceOne guarded on the revision its update stamped, sent
// again if its reply is lost) and returns [patterns.ErrTooLarge]. Until
// then, for one round trip, readers may see the oversized document; and if
// a concurrent writer changes it within that round trip, it is not put
// back (that write would be lost) and the error says that the update
// stays. If the connection fails during the findAndModify, its result is
// lost but the update may have landed: Update reads the document back
// (one more find) and, if the update landed, puts the document back when
// it passed 16 MiB, or succeeds when it did not; if not, it returns the
// connection's error. The read-back and the put-back run even after ctx
// has ended, for at most 30 seconds: they undo a write that must not
// stay, as a rollback would. An update the server is still applying when
// the read-back is answered (the caller's deadline passed first) escapes
// that check.
//
// Errors that leave the document untouched: [patterns.ErrInvalid] for a
// bad id, an empty update, a field that is not an operator, an operator
// whose value is not a document, one given twice, an operator that touches
// the version or revision field (the repository owns them), Upsert, or a
// collation other than the simple one;
// [patterns.ErrNotFound]; [ErrNewerSchema]; [ErrMigration];
// [patterns.ErrTooLarge] when the result would pass 16 MiB, whatever the
// server (on a server without the limit, with the exception said above).
// After 4 attempts that each met a changed document,
// [patterns.ErrConflict]: the document may have been migrated, the update
// was not applied. A pipeline needs [patterns.FeaturePipelineUpdates]
// (MongoDB 4.2+, FerretDB 2.x) and arrayFilters need
// [patterns.FeatureArrayFilters]: on a server lacking them, Update returns
// [patterns.ErrUnsupported] naming the feature, before sending anything
// but the detection of the server (once per client).
//
// A failure of the connection, or the end of ctx, at any step leaves the
// update applied whole or not at all, never to an old shape (the document
// may have been migrated), and returns that error, which claims neither
// outcome. Update is safe to retry: the retry applies the update again,
// so an update that is not idempotent ($inc) counts twice if the failed
// call's had landed.
func (r *Repo[T]) Update(ctx context.Context, id any, update any, opts ...options.Lister[options.UpdateOneOptions]) (err error) {
	ctx, op := r.start(ctx, "Update")
	defer op.Finish(&err)
	if err := patterns.ValidateID(id); err != nil {
		return pkg.Wrap("Update", err)
	}
	if err := r.update(ctx, id, update, opts); err != nil {
		return pkg.Wrap("Update", r.ofDoc(id, err))
	}
	op.Affected(1)
	return nil
}

func (r *Repo[T]) update(ctx context.Context, id, update any, opts []options.Lister[options.UpdateOneOptions]) error {
	rev := bson.NewObjectID()
	stamped, pipeline, err := r.stampUpdate(update, rev)
	if err != nil {
		return err
	}
	uo, err := listers.Merged(opts)
	if err == nil {
		err = listers.SimpleCollation(uo.Collation)
	}
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
	if p.ServerSizeLimit {
		return r.updateOne(ctx, id, stamped, opts)
	}
	return r.updateChecked(ctx, id, stamped, rev, &uo)
}

// updateOne is Update where the server refuses an oversized result: an
// updateOne filtered on the current version; after a miss, the document
// is read, migrated and written back, and the update sent again.
func (r *Repo[T]) updateOne(ctx context.Context, id, stamped any, opts []options.Lister[options.UpdateOneOptions]) error {
	doc := idFilter(id) // the document read after a miss, when there is one
	op := patterns.OperationFrom(ctx)
	return r.guarded(ctx, id, func() (bool, error) {
		var res *mongo.UpdateResult
		err := srverr.Retry(ctx, func() (err error) {
			op.Sent(1)
			res, err = r.coll.UpdateOne(ctx, r.currentFilter(doc), stamped, opts...)
			return err
		})
		return err == nil && res.MatchedCount == 1, err
	}, func(raw bson.Raw) error {
		doc = r.docFilter(raw)
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

// updateChecked is Update where the server does not refuse an oversized
// result: read the document, bring it to the current version, apply the
// update with a findAndModify guarded on what was read and returning the
// result, and put the document read back if the result passes 16 MiB.
func (r *Repo[T]) updateChecked(ctx context.Context, id, stamped any, rev bson.ObjectID, uo *options.UpdateOneOptions) error {
	fo := findAndModifyOptions(uo)
	op := patterns.OperationFrom(ctx)
	for range maxAttempts {
		raw, err := r.findRaw(ctx, id)
		if err != nil {
			return err
		}
		v, err := r.versionOf(raw)
		if err != nil {
			return err
		}
		if v != r.current { // older (migrate it first) or newer (refused)
			_, migrated, err := r.upgrade(raw)
			if err != nil {
				return err
			}
			won, err := r.writeBackDoc(ctx, raw, migrated)
			if err != nil {
				return err
			}
			if !won {
				continue
			}
			raw = migrated
		}
		var after bson.Raw
		err = srverr.Retry(ctx, func() (err error) {
			op.Sent(1)
			after, err = r.coll.FindOneAndUpdate(ctx, r.casFilter(raw), stamped, fo).Raw()
			return err
		})
		switch {
		case errors.Is(err, mongo.ErrNoDocuments):
			op.Lost()
			continue // changed since the read
		case err != nil && !srverr.Refused(err):
			return r.readBack(ctx, raw, rev, err)
		case err != nil:
			return err
		case len(after) > patterns.MaxDocumentSize:
			return r.restore(ctx, raw, rev, len(after))
		}
		return nil
	}
	return conflict()
}

// undoTimeout bounds what Update sends after its findAndModify to keep a
// document past 16 MiB from staying: the read-back of an update whose
// reply was lost, and the put-back. Both run even when the caller's
// context has ended (a write that must not stay is undone, as a
// transaction would be rolled back), for at most this long.
const undoTimeout = 30 * time.Second

// undoContext returns the context of the undo: ctx's values, without its
// cancellation, and a deadline undoTimeout away.
func undoContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), undoTimeout)
}

// readBack handles the findAndModify of an update stamped with rev that
// failed with cause and no answer from the server: the update may have
// landed, and on this path what it stored may be past 16 MiB. It reads
// the document back while it holds rev: absent, the update did not land
// (or a later write replaced it) and cause is returned; present and
// within 16 MiB, the update landed whole and Update succeeds; past 16 MiB,
// the document before is put back, as after any oversized update.
func (r *Repo[T]) readBack(ctx context.Context, before bson.Raw, rev bson.ObjectID, cause error) error {
	uctx, cancel := undoContext(ctx)
	defer cancel()
	patterns.OperationFrom(ctx).Sent(1)
	now, err := r.coll.FindOne(uctx, r.stampedFilter(before, rev)).Raw()
	switch {
	case errors.Is(err, mongo.ErrNoDocuments):
		return cause
	case err != nil:
		return fmt.Errorf("%w; reading the document back to check the size of what the update may have stored failed too: %v", cause, err)
	case len(now) > patterns.MaxDocumentSize:
		return r.restore(ctx, before, rev, len(now))
	}
	return nil
}

// restore puts back the document before that an update stamped with rev
// replaced with one of size bytes, over 16 MiB, unless a write changed it
// since, and returns the error Update reports. A put-back whose reply is
// lost is sent again (its guard makes that safe), up to maxAttempts times.
func (r *Repo[T]) restore(ctx context.Context, before bson.Raw, rev bson.ObjectID, size int) error {
	ctx, cancel := undoContext(ctx)
	defer cancel()
	filter := r.restoreFilter(before, rev)
	_, noRev := before.LookupErr(r.revField)
	var (
		restored bool
		err      error
		lost     bool // a put-back was sent whose outcome is unknown
	)
	for attempt := range maxAttempts {
		if attempt > 0 {
			patterns.OperationFrom(ctx).Retried(err) // its reply was lost
		}
		if restored, err = r.replaceOne(ctx, filter, before); err == nil || srverr.Refused(err) || ctx.Err() != nil {
			break
		}
		lost = true
	}
	switch {
	case err != nil:
		stays := "may stay" // the last put-back's outcome is unknown
		if srverr.Refused(err) {
			stays = "stays"
		}
		return fmt.Errorf("%d bytes after the update, over the %d-byte limit, and putting the previous document back failed, so the update %s: %w: %w",
			size, patterns.MaxDocumentSize, stays, srverr.Classify(err), patterns.ErrTooLarge)
	case !restored && lost && noRev != nil:
		// The put-back may have landed before the reply was lost: without
		// a revision of its own, the document put back cannot be told
		// from a later write.
		return errs.TooLarge("%d bytes after the update, over the %d-byte limit, and the reply to putting the previous document back was lost, so the update may stay",
			size, patterns.MaxDocumentSize)
	case !restored:
		return errs.TooLarge("%d bytes after the update, over the %d-byte limit, and a concurrent write changed the document before the previous one was put back, so the update stays",
			size, patterns.MaxDocumentSize)
	}
	return errs.TooLarge("%d bytes after the update, over the %d-byte limit (the previous document was put back)", size, patterns.MaxDocumentSize)
}

// findAndModifyOptions are the options of Update's findAndModify: those
// the caller gave for the updateOne, and the result returned.
func findAndModifyOptions(uo *options.UpdateOneOptions) *options.FindOneAndUpdateOptionsBuilder {
	fo := options.FindOneAndUpdate().SetReturnDocument(options.After)
	fo.Opts = append(fo.Opts, func(o *options.FindOneAndUpdateOptions) error {
		o.ArrayFilters = uo.ArrayFilters
		o.BypassDocumentValidation = uo.BypassDocumentValidation
		o.Collation = uo.Collation
		o.Comment = uo.Comment
		o.Hint = uo.Hint
		o.Let = uo.Let
		o.Sort = uo.Sort
		return nil
	})
	return fo
}
