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

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
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
// commitTransaction with write concern majority (whatever the client's),
// so that a committed Update survives a failover. On a replica set,
// readers outside the transaction see the source and its copies change
// together at the commit. On a sharded cluster, when the source and the
// copies live on several shards, only readers with read concern
// "snapshot" are sure of that: a reader at "local" or "majority" may see
// one shard's writes before another's while the commit is under way (the
// MongoDB manual, commitTransaction: Atomicity). An error before the
// commit means nothing was written, and the error says "nothing written";
// a commit that fails without an answer (the connection lost) may have
// applied, and the error says "all written or nothing, unknown which":
// running Update again is the retry of an idempotent update ($set),
// otherwise read the source to decide. The driver retries the commit,
// which it runs detached from ctx's deadline (up to the client's timeout).
//
// A transaction is bounded. MongoDB aborts one that lives past
// transactionLifetimeLimitSeconds (60 s by default) or that grows past
// what its cache holds (a write conflict), both as transient errors, on
// which the driver would run it again for up to 120 s, in vain for a
// source with many copies; its manual advises modifying no more than
// 1,000 documents per transaction. So Update aborts its transaction once
// the copies' updates have matched more than [Config.TransactionLimit]
// documents (checked after each target), and runs it once: after a
// transient failure it does not run it again. In both cases nothing was
// written, and Update takes the non-transactional path below, with its
// gap and [ErrNotSynced]. The cost of that choice is the aborted
// transaction's work: at most one updateMany per target past the limit,
// or one attempt cut short by the server.
//
// Elsewhere (a standalone server, FerretDB, whose transactions are absent
// or silently wrong: see [patterns.FeatureTransactions]) Update sends the
// findAndModify and then syncs as Sync does (no first read of the source:
// the findAndModify returns it). Between the two steps readers see the new
// source with the old copies; if the sync fails, or the process dies in
// that gap, the source keeps its change and the copies stay stale until a
// Sync, Repair or Watch event: the error wraps [ErrNotSynced], the counts
// say what the sync wrote before it (as Sync's do), and Sync(sourceID) is
// the retry. That sync is shared with the concurrent Updates and Syncs of
// the same source through the same Ref, as [Ref.Sync] says: 8 writers
// updating one source send 8 findAndModify and about two syncs. If the findAndModify itself fails without an answer (the
// connection lost, ctx's deadline passed), the source may have changed or
// not (the server may have run it and its reply be lost), and no copy was
// written: the error does not wrap ErrNotSynced, and running Update again
// is the retry of an idempotent update ($set); otherwise read the source
// to decide. A findAndModify that fails with a transient error that
// applied nothing (FerretDB 2.x's "deadlock detected") is sent again, up to
// 5 times, and so are the sync's updates (see [Ref.Sync]).
//
// With [Config.ShardKey] (a source sharded on another key than _id),
// on a server without [patterns.FeatureWritesWithoutShardKey] (MongoDB
// before 7.1 behind mongos, or at an FCV below 7.1 or unknown, and every
// server that is not a mongos),
// Update first reads the key's values (one find by _id, projected on the
// key: on a sharded source it goes to every shard) and filters its
// findAndModify on the _id and those values by equality, so that mongos
// sends it to the one shard that holds the source instead of refusing
// it: one round trip more than above. If the findAndModify then matches
// nothing, another writer changed the key's values (or deleted the
// source) between the two: Update reads them again, up to 5 times, then
// fails with [patterns.ErrConflict], nothing written. Where the server
// has the feature (mongos 7.1+ at FCV 7.1+), the findAndModify by _id alone is
// accepted (a two-phase write) and nothing is read first. The caller's
// update may change a key field: mongos then moves the source to its new
// shard, which the full key in the filter allows. A collation option
// other than {locale: "simple"} is refused with [patterns.ErrInvalid]:
// under it {_id: "ann"} may match a source whose _id is "ANN", and it
// makes the key's string values (and a string _id) useless for targeting
// (mongos refuses such a findAndModify, 61, on a source sharded on
// another key below FCV 7.1, even with [Config.ShardKey]).
//
// Errors: [patterns.ErrInvalid] for a bad id, an update that is not an
// update document (a replacement would drop the source's other fields),
// or the upsert option with [Config.ShardKey] (an upsert's filter needs
// the values of the key of a source that does not exist yet: insert it
// instead; nothing sent); [patterns.ErrNotFound] when no source has that
// id (nothing written), and, with [ErrNotSynced], when the source was
// deleted while its copies were written on the non-transactional path (they
// may hold a value older than its last, as [Ref.Sync] says); an
// [*patterns.UnsupportedError] naming [patterns.FeaturePipelineUpdates] for
// a pipeline, or [patterns.FeatureArrayFilters] for an arrayFilters
// option, on a server without it (nothing sent); [patterns.ErrUnsupported]
// for another option the server answers it does not implement.
func (r *Ref[S]) Update(ctx context.Context, sourceID, update any, opts ...options.Lister[options.FindOneAndUpdateOptions]) (_ []Count, err error) {
	ctx, op := r.start(ctx, "Update")
	defer op.Finish(&err)
	op.Affected(0)
	if err := patterns.ValidateID(sourceID); err != nil {
		return nil, pkg.Wrap("Update", err)
	}
	pipeline, err := validUpdate(update)
	if err != nil {
		return nil, r.fail("Update", sourceID, err)
	}
	given, err := listers.Merged(opts)
	if err == nil {
		err = listers.SimpleCollation(given.Collation)
	}
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
	case given.Upsert != nil && *given.Upsert && r.shardKey != nil:
		return nil, r.fail("Update", sourceID, errs.Invalid("upsert option with config.ShardKey: the filter of an upsert must hold the shard key's values, which a source that does not exist lacks; insert the source instead"))
	}
	opts = append(slices.Clip(opts), sourceUpdate(d.plan, r.proj)) // never into the caller's array
	updateSource := func(ctx context.Context) (copyValue, error) {
		return r.updateSource(ctx, d.plan, sourceID, update, opts)
	}

	if d.transactions {
		counts, err := r.updateInTransaction(ctx, d.plan, updateSource)
		if !errors.Is(err, errLeaveTransaction) {
			if err != nil {
				return nil, r.fail("Update", sourceID, err)
			}
			op.Affected(1 + modified(counts)) // the source and its copies, committed
			return counts, nil
		}
		// The transaction wrote nothing: the non-transactional path.
	}

	var c copyValue
	err = srverr.Retry(ctx, func() (err error) {
		c, err = updateSource(ctx)
		return err
	})
	if err != nil {
		return nil, r.fail("Update", sourceID, err)
	}
	op.Affected(1) // the source; the sync reports the copies it rewrites
	counts, err := r.syncShared(ctx, d.plan, sourceID, bsonid.Key(c.id), &c)
	if err != nil {
		op.SetPartial()
		return counts, r.fail("Update", sourceID, fmt.Errorf("%w (run Sync): %w", ErrNotSynced, err))
	}
	return counts, nil
}

// keyRounds bounds how often Update reads the source's shard-key values
// again because its findAndModify, filtered on the values read, matched
// nothing: another writer changed them in between.
const keyRounds = 5

// updateSource sends Update's findAndModify and returns the copy of the
// source it returns. The filter is the _id, with Config.ShardKey and a
// plan without keylessWrites the _id and the key's values, read first
// (one find by _id); a findAndModify that then matches nothing reads them
// again, since the source may have moved to another key or been deleted,
// up to keyRounds times.
func (r *Ref[S]) updateSource(ctx context.Context, p plan, id, update any, opts []options.Lister[options.FindOneAndUpdateOptions]) (copyValue, error) {
	filter := byID(id)
	op := patterns.OperationFrom(ctx)
	for round := 1; ; round++ {
		if r.shardKey != nil && !p.keylessWrites {
			op.Sent(1)
			doc, err := r.source.FindOne(ctx, filter, r.findKey).Raw()
			if errors.Is(err, mongo.ErrNoDocuments) {
				return copyValue{}, fmt.Errorf("not in %s: %w", r.source.Name(), patterns.ErrNotFound)
			}
			if err != nil {
				return copyValue{}, fmt.Errorf("read the shard key from %s: %w", r.source.Name(), err)
			}
			filter = keyed(id, doc, r.shardKey)
		}
		op.Sent(1)
		raw, err := r.source.FindOneAndUpdate(ctx, filter, update, opts...).Raw()
		switch {
		case errors.Is(err, mongo.ErrNoDocuments) && len(filter) > 1 && round < keyRounds:
			op.Lost() // the shard key's values moved since they were read
			filter = byID(id)
			continue
		case errors.Is(err, mongo.ErrNoDocuments) && len(filter) > 1:
			return copyValue{}, fmt.Errorf("its shard key %v changed between each of %d reads and the update (nothing written): %w", r.shardKey, keyRounds, patterns.ErrConflict)
		case errors.Is(err, mongo.ErrNoDocuments):
			return copyValue{}, fmt.Errorf("not in %s: %w", r.source.Name(), patterns.ErrNotFound)
		case err != nil:
			return copyValue{}, fmt.Errorf("update in %s: %w", r.source.Name(), err)
		}
		_, c, err := r.copyOf(raw)
		return c, err
	}
}

// errTooManyCopies stops a transaction whose updates matched more
// documents than [Config.TransactionLimit].
var errTooManyCopies = errors.New("more copies than a transaction may rewrite")

// errLeaveTransaction is the answer of updateInTransaction when Update
// must take the non-transactional path: its transaction was aborted,
// nothing was written.
var errLeaveTransaction = errors.New("leave the transaction")

// updateInTransaction runs Update's writes in one transaction, committed
// with write concern majority. It returns errLeaveTransaction, with
// nothing written, when the copies' updates matched more than the
// transaction limit, or when an attempt failed with a transient error
// (the driver would run the callback again, for up to 120 s, and a
// transaction past the server's lifetime limit or too large for its
// cache fails that way each time).
func (r *Ref[S]) updateInTransaction(ctx context.Context, p plan, updateSource func(context.Context) (copyValue, error)) ([]Count, error) {
	// The caller's session, if ctx carries one (without a transaction:
	// Update refused one), runs the transaction, so that its commands
	// carry the caller's session as every other command does.
	sess := mongo.SessionFromContext(ctx)
	if sess == nil {
		var err error
		if sess, err = r.db.Client().StartSession(); err != nil {
			return nil, err
		}
		defer sess.EndSession(context.WithoutCancel(ctx))
	}
	committing := false // the last attempt's writes all succeeded: the driver commits next
	began := false      // the first attempt sent a command: the driver commits or aborts it
	attempts := 0
	res, err := sess.WithTransaction(ctx, func(ctx context.Context) (any, error) {
		committing = false
		if attempts++; attempts > 1 {
			return nil, errLeaveTransaction
		}
		began = true
		c, err := updateSource(ctx)
		if err != nil {
			return nil, err
		}
		counts := r.counts()
		if err := r.apply(ctx, p, c, counts, r.txLimit); err != nil {
			if errors.Is(err, errTooManyCopies) {
				return nil, errLeaveTransaction
			}
			return nil, err
		}
		committing = true
		return counts, nil
	}, transactionOptions())
	if began { // its commitTransaction or abortTransaction
		patterns.OperationFrom(ctx).Sent(1)
	}
	switch {
	case err == nil:
		return res.([]Count), nil
	case errors.Is(err, errLeaveTransaction):
		return nil, err
	case committing && (ctx.Err() == nil || err != ctx.Err()):
		// The commit failed; one without an answer may have applied.
		// (With ctx done before it, WithTransaction aborts and returns
		// ctx.Err() itself.)
		return nil, fmt.Errorf("transaction commit (all written or nothing, unknown which): %w", err)
	}
	return nil, fmt.Errorf("transaction (nothing written): %w", err)
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
