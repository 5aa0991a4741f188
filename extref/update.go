package extref

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/internal/listers"
	"github.com/mongopatterns/mongopatterns/internal/srverr"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// ErrNotSynced is wrapped by the error of an [Ref.Update] that updated
// the source and then failed to sync its copies, which may be stale:
// Sync(sourceID) is the retry (running the Update again would apply the
// update twice).
var ErrNotSynced = errors.New("updated, but its copies may be stale")

// Update applies update (an update document such as
// {$set: {name: "Ann"}}, or a pipeline where the server has
// [patterns.FeaturePipelineUpdates]) to the source document with _id
// sourceID, then syncs its copies as [Ref.Sync] does, and returns the
// per-target counts. opts pass through to the source's findAndModify
// (arrayFilters, hint, upsert...), except what Update sets itself: it asks
// for the document after the update, projected on the copied fields where
// the server has [patterns.FeatureFindAndModifyProjection] and whole
// elsewhere (a projection in opts is overridden, since it could hide a
// copied field).
//
// Where the server has [patterns.FeatureTransactions] (a MongoDB replica set
// or sharded cluster), the source's update and the copies' updates run in
// one transaction: a findAndModify, one updateMany per target and a
// commitTransaction; readers see the source and its copies change
// together. An error before the commit means nothing was written, and the
// error says "nothing written"; a commit that fails without an answer
// (the connection lost) may have applied, and the error says "all written
// or nothing, unknown which": running Update again is the retry of an
// idempotent update ($set), otherwise read the source to decide. The
// driver retries the transaction on transient errors, and its commit,
// which it runs detached from ctx's deadline (up to the client's timeout).
//
// Elsewhere (a standalone server, FerretDB, whose transactions are absent
// or silently wrong: see [patterns.FeatureTransactions]) Update sends the
// findAndModify and then syncs as Sync does (no first read of the source:
// the findAndModify returns it). Between the two steps readers see the new
// source with the old copies; if the sync fails, or the process dies in
// that gap, the source keeps its change and the copies stay stale until a
// Sync, Repair or Watch event: the error wraps [ErrNotSynced], the counts
// say what the sync wrote before it (as Sync's do), and Sync(sourceID) is
// the retry. If the findAndModify itself fails without an answer (the
// connection lost, ctx's deadline passed), the source may have changed or
// not (the server may have run it and its reply be lost), and no copy was
// written: the error does not wrap ErrNotSynced, and running Update again
// is the retry of an idempotent update ($set); otherwise read the source
// to decide. A findAndModify that fails with a transient error that
// applied nothing (FerretDB 2.x's "deadlock detected") is sent again, up to
// 5 times, and so are the sync's updates (see [Ref.Sync]).
//
// Errors: [patterns.ErrInvalid] for a bad id or an update that is not an
// update document (a replacement would drop the source's other fields);
// [patterns.ErrNotFound] when no source has that id (nothing written); an
// [*patterns.UnsupportedError] naming [patterns.FeaturePipelineUpdates] for
// a pipeline, or [patterns.FeatureArrayFilters] for an arrayFilters
// option, on a server without it (nothing sent); [patterns.ErrUnsupported]
// for another option the server answers it does not implement.
func (r *Ref[S]) Update(ctx context.Context, sourceID, update any, opts ...options.Lister[options.FindOneAndUpdateOptions]) ([]Count, error) {
	if err := patterns.ValidateID(sourceID); err != nil {
		return nil, pkg.Wrap("Update", err)
	}
	pipeline, err := validUpdate(update)
	if err != nil {
		return nil, r.fail("Update", sourceID, err)
	}
	given, err := listers.Merged(opts)
	if err != nil {
		return nil, r.fail("Update", sourceID, err)
	}
	d, err := r.decide(ctx)
	if err != nil {
		return nil, r.fail("Update", sourceID, err)
	}
	switch {
	case pipeline && !d.pipelineUpdates:
		return nil, r.fail("Update", sourceID, fmt.Errorf("update pipeline: %w", d.unsupported(patterns.FeaturePipelineUpdates)))
	case given.ArrayFilters != nil && !d.arrayFilters:
		return nil, r.fail("Update", sourceID, fmt.Errorf("arrayFilters option: %w", d.unsupported(patterns.FeatureArrayFilters)))
	}
	opts = append(slices.Clip(opts), sourceUpdate(d.plan, r.proj)) // never into the caller's array
	updateSource := func(ctx context.Context) (copyValue, error) {
		raw, err := r.source.FindOneAndUpdate(ctx, byID(sourceID), update, opts...).Raw()
		if errors.Is(err, mongo.ErrNoDocuments) {
			return copyValue{}, fmt.Errorf("not in %s: %w", r.source.Name(), patterns.ErrNotFound)
		}
		if err != nil {
			return copyValue{}, fmt.Errorf("update in %s: %w", r.source.Name(), err)
		}
		_, c, err := r.copyOf(raw)
		return c, err
	}

	if d.transactions {
		sess, err := r.db.Client().StartSession()
		if err != nil {
			return nil, r.fail("Update", sourceID, err)
		}
		defer sess.EndSession(context.WithoutCancel(ctx))
		committing := false // the last attempt's writes all succeeded: the driver commits next
		res, err := sess.WithTransaction(ctx, func(ctx context.Context) (any, error) {
			committing = false
			c, err := updateSource(ctx)
			if err != nil {
				return nil, err
			}
			counts := r.counts()
			if err := r.apply(ctx, d.plan, c, counts); err != nil {
				return nil, err
			}
			committing = true
			return counts, nil
		})
		switch {
		case err == nil:
			return res.([]Count), nil
		case committing && (ctx.Err() == nil || err != ctx.Err()):
			// The commit failed; one without an answer may have applied.
			// (With ctx done before it, WithTransaction aborts and returns
			// ctx.Err() itself.)
			return nil, r.fail("Update", sourceID, fmt.Errorf("transaction commit (all written or nothing, unknown which): %w", err))
		}
		return nil, r.fail("Update", sourceID, fmt.Errorf("transaction (nothing written): %w", err))
	}

	var c copyValue
	err = srverr.Retry(ctx, func() (err error) {
		c, err = updateSource(ctx)
		return err
	})
	if err != nil {
		return nil, r.fail("Update", sourceID, err)
	}
	counts, err := r.converge(ctx, d.plan, sourceID, c)
	if err != nil {
		return counts, r.fail("Update", sourceID, fmt.Errorf("%w (run Sync): %w", ErrNotSynced, err))
	}
	return counts, nil
}

// validUpdate accepts an update document whose top-level fields are all
// update operators, or a non-empty pipeline, which it reports.
func validUpdate(u any) (pipeline bool, err error) {
	if u == nil {
		return false, errs.Invalid("update is nil")
	}
	t, data, err := bson.MarshalValue(u)
	if err != nil {
		return false, errs.Invalid("update of type %T cannot be encoded: %v", u, err)
	}
	switch t {
	case bson.TypeEmbeddedDocument:
		elems, err := bson.Raw(data).Elements()
		if err != nil {
			return false, errs.Invalid("update: %v", err)
		}
		if len(elems) == 0 {
			return false, errs.Invalid("update is empty")
		}
		for _, e := range elems {
			if !strings.HasPrefix(e.Key(), "$") {
				return false, errs.Invalid("update field %q is not an update operator (a replacement document would drop the source's other fields)", e.Key())
			}
		}
		return false, nil
	case bson.TypeArray:
		if vals, err := bson.RawArray(data).Values(); err != nil || len(vals) == 0 {
			return true, errs.Invalid("update pipeline is empty or malformed")
		}
		return true, nil
	}
	return false, errs.Invalid("update of type %T encodes as a BSON %s; want an update document or a pipeline", u, t)
}
