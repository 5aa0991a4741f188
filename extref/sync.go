package extref

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/internal/obs"
	"github.com/mongopatterns/mongopatterns/internal/srverr"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Count is what one sync did to one target, in documents (a document with
// two stale copies of the source in its array counts once).
type Count struct {
	Target   Target
	Matched  int64 // documents holding stale copies when the write ran
	Modified int64 // documents rewritten
}

// errSourceChanging marks the [patterns.ErrConflict] of a Sync whose
// source changed during every round: each of those changes is followed by
// its own sync (or change event), unlike a conflict on the copies.
var errSourceChanging = errors.New("the source kept changing")

const (
	// syncRounds bounds how often Sync writes the copies again because the
	// source changed while it wrote them.
	syncRounds = 8
	// guardRounds bounds how often the portable array path reads again the
	// documents whose array changed between its read and its write.
	guardRounds = 5
)

// Sync writes the source's current fields into every stale copy of the
// source document with _id sourceID, target by target, and returns the
// documents matched and modified per target, in the order of
// [Config.Targets]. Documents whose copies already equal the source are not
// rewritten: each update filters on the copies that differ, field by
// field.
//
// Round trips: one find of the source; per target, one updateMany (with
// arrayFilters for copies in arrays, where the server has
// [patterns.FeatureArrayFilters]); then, if any copy was rewritten, one find
// that reads the source again: 1 + targets commands when nothing was stale,
// 2 + targets otherwise. That last read is what makes concurrent syncs
// converge: a Sync (or Update) that read an older value may write it after
// another wrote a newer one, and no update of the copies can check the
// source, which lives in another collection (a Sync that rewrote nothing
// cannot have done that, so it skips the read). If the read shows the
// source changed while Sync wrote, Sync writes the new value and reads
// again, up to 8 rounds; it then returns an error wrapping
// [patterns.ErrConflict]. If the read finds the source deleted, the value
// Sync wrote may be older than the source's last, which another writer
// put in the copies before Sync overwrote it, and nothing is left to
// tell: Sync returns an error wrapping [patterns.ErrNotFound] that says
// so. So when concurrent Syncs of one source have all returned nil, its
// copies equal the source, or, if it was deleted after them, its last
// value. (A transaction could replace
// the read by its commit, a round trip too, and only on a replica set;
// Update uses one where it can.)
//
// On a server without arrayFilters (FerretDB 1.x), array targets take the
// portable path: one find of every document holding a copy of the source
// (stale or not: FerretDB 1.x cannot select array elements by their
// fields), then in Go the stale copies are rewritten by their array index,
// each guarded by its whole value as read: [Config.BatchSize] documents per
// update command where the server has [patterns.FeatureBatchedUpdates],
// else one per command. A document whose array changed between the read
// and the write (a stale copy moved, even swapped with another copy of the
// same source, removed or rewritten) is not written; it is read and
// written again,
// up to 5 rounds, after which Sync returns an error wrapping
// [patterns.ErrConflict]. Each document is written whole or not at all;
// nothing is written silently wrong. Single-document targets use
// updateMany on every server.
//
// Concurrent Syncs and Updates of one source through one Ref share their
// syncs: one runs at a time per source, and the calls that arrive while
// it runs wait for the next one, which reads the source after all of
// them and serves them all (so N concurrent calls send about two syncs'
// commands, not N, and do not fight over the same target documents: on
// FerretDB 2.x, whose updates of the same documents in different orders
// end in "deadlock detected", that is what lets them all succeed). Each
// returns the counts of the sync that served it, which concurrent calls
// may share; a call whose ctx ends while it waits returns ctx's error
// with nothing written by it, and a sync that fails fails only the call
// that ran it, the others running the next one. Calls through different
// Refs or processes do not share: they converge through the confirming
// read above.
//
// Concurrent readers see the copies change one document at a time, and
// each target after the previous one: a document read between two steps
// may hold the new copy while another holds the old. On FerretDB 1.x the
// promises about concurrent writers hold only for one client with a single
// connection (see [patterns.FeatureConcurrentUpdates]).
//
// Every update Sync sends sets values behind filters, so it is safe to
// repeat: one that fails with a transient error that applied nothing
// (FerretDB 2.x's "deadlock detected") is sent again, up to 5 times (of
// the portable path's bulk write, only the updates that failed so, the
// others counted as applied), and Sync as a whole is safe to run again
// after any error: it writes only the copies that still differ.
//
// Errors: [patterns.ErrInvalid] for a bad id; [patterns.ErrNotFound] when
// the source does not exist, in which case the copies are left as they are
// (removing or rewriting the documents that reference a deleted source is
// the application's decision). If the source is deleted while Sync writes
// the copies, the error wraps [patterns.ErrNotFound] too and says that the
// copies may hold a value older than the source's last (Verify counts
// them as orphans, as every copy of a deleted source). With an
// error, the counts say what was written before it, and what the command
// that failed wrote as far as its reply says (the updates of a bulk write
// that applied beside one that failed): one whose reply was lost (the
// connection broke after the server ran it) is not counted.
func (r *Ref[S]) Sync(ctx context.Context, sourceID any) (_ []Count, err error) {
	ctx, op := r.start(ctx, "Sync")
	defer op.Finish(&err)
	op.Affected(0)
	if err := patterns.ValidateID(sourceID); err != nil {
		return nil, pkg.Wrap("Sync", err)
	}
	counts, err := r.sync(ctx, sourceID)
	if err != nil {
		return counts, r.fail("Sync", sourceID, err)
	}
	return counts, nil
}

// sync is Sync after the id check (Repair calls it with ids read from the
// database).
func (r *Ref[S]) sync(ctx context.Context, id any) ([]Count, error) {
	d, err := r.decide(ctx)
	if err != nil {
		return nil, err
	}
	t, data, err := bson.MarshalValue(id)
	if err != nil {
		return nil, errs.Invalid("id of type %T: %v", id, err)
	}
	return r.syncShared(ctx, d.plan, id, bsonid.Key(bson.RawValue{Type: t, Value: data}), nil)
}

// converge writes c to every target, then, if it wrote anything, reads the
// source again and repeats with the new value until the source stayed as
// written. A round that wrote nothing cannot have put an older value over
// a newer one, so it needs no second read. A source gone at that read may
// have had a newer value, which another writer put in the copies before
// this round wrote c over it: the copies may be older than the source's
// last value, and nothing can tell, so converge says so.
func (r *Ref[S]) converge(ctx context.Context, p plan, id any, c copyValue) ([]Count, error) {
	op := patterns.OperationFrom(ctx)
	total := r.counts()
	for round := 1; ; round++ {
		before := modified(total)
		err := r.apply(ctx, p, c, total, 0)
		op.Affected(modified(total) - before)
		if err != nil || modified(total) == before {
			return total, err
		}
		_, next, err := r.load(ctx, id)
		switch {
		case errors.Is(err, patterns.ErrNotFound):
			return total, fmt.Errorf("deleted while its copies were written, which may hold an older value than its last (orphans now, as Verify counts them): %w", err)
		case err != nil:
			return total, err
		case bytes.Equal(next.raw, c.raw):
			return total, nil
		case round == syncRounds:
			return total, fmt.Errorf("changed during each of %d rounds of writing its copies, which may hold an older value (run Sync again): %w: %w", syncRounds, errSourceChanging, patterns.ErrConflict)
		}
		op.Lost() // the source changed under the copies written: write again
		c = next
	}
}

// modified sums the documents modified over all targets.
func modified(counts []Count) int64 {
	var n int64
	for _, c := range counts {
		n += c.Modified
	}
	return n
}

// counts returns zero counts, one per target.
func (r *Ref[S]) counts() []Count {
	out := make([]Count, len(r.targets))
	for i, t := range r.targets {
		out[i].Target = t.Target
	}
	return out
}

// apply writes c to the stale copies of every target and adds what it did
// to counts. With bound > 0, it stops with [errTooManyCopies] after the
// first target that brings the documents matched past bound.
func (r *Ref[S]) apply(ctx context.Context, p plan, c copyValue, counts []Count, bound int64) error {
	matched := int64(0)
	for i, t := range r.targets {
		var err error
		if p.portable(t.path) {
			err = r.applyPortable(ctx, p, t, c, &counts[i])
		} else {
			err = r.applyMany(ctx, t, c, &counts[i])
		}
		if err != nil {
			return fmt.Errorf("sync %s: %w", t.Target, err)
		}
		if matched += counts[i].Matched; bound > 0 && matched > bound {
			return errTooManyCopies
		}
	}
	return nil
}

// applyMany sends the target's one updateMany.
func (r *Ref[S]) applyMany(ctx context.Context, t target, c copyValue, n *Count) error {
	u := t.paths.syncMany(r.ct, c)
	opts := options.UpdateMany()
	if u.arrayFilters != nil {
		opts.SetArrayFilters(u.arrayFilters)
	}
	var res *mongo.UpdateResult
	op := patterns.OperationFrom(ctx)
	err := srverr.Retry(ctx, func() (err error) {
		op.Sent(1)
		res, err = t.coll.UpdateMany(ctx, u.filter, u.update, opts)
		return err
	})
	if err != nil {
		return err
	}
	n.Matched += res.MatchedCount
	n.Modified += res.ModifiedCount
	return nil
}

// applyPortable syncs an array target without arrayFilters: read the
// documents holding copies, rewrite their stale copies by index with a
// guard on each copy's value as read, and read again the documents whose
// guard failed.
func (r *Ref[S]) applyPortable(ctx context.Context, p plan, t target, c copyValue, n *Count) error {
	var lost int64
	for range guardRounds {
		var err error
		if lost, err = r.portableRound(ctx, p, t, c, n); err != nil || lost == 0 {
			return err
		}
	}
	return fmt.Errorf("%d documents had their %s array changed between read and write in each of %d rounds (run Sync again): %w", lost, t.path.array, guardRounds, patterns.ErrConflict)
}

// portableRound reads every document holding a copy of c and rewrites the
// stale ones, [plan.perCommand] documents per update command; it returns
// how many documents it did not modify (their guards failed).
func (r *Ref[S]) portableRound(ctx context.Context, p plan, t target, c copyValue, n *Count) (lost int64, err error) {
	op := patterns.OperationFrom(ctx)
	op.Sent(1)
	cur, err := t.coll.Find(ctx, t.paths.holders(c), options.Find().
		SetProjection(t.path.arrayOnly()).
		SetBatchSize(int32(r.batch)))
	if err != nil {
		return 0, err
	}
	defer obs.Close(context.WithoutCancel(ctx), op, cur)
	per := p.perCommand(r.batch)
	var models []mongo.WriteModel
	flush := func() error {
		if len(models) == 0 {
			return nil
		}
		matched, modified, err := r.rewriteAll(ctx, t.coll, models)
		n.Matched += matched
		n.Modified += modified
		// A guard passes only on the copies as read, stale, so a document
		// matched and not modified was changed by another writer in
		// between too: read it again, as one not matched.
		lost += int64(len(models)) - modified
		if err == nil {
			for range int64(len(models)) - modified {
				op.Lost() // a guard that another writer moved
			}
		}
		models = models[:0]
		return err
	}
	for obs.Next(ctx, op, cur) {
		arr, ok := lookup(cur.Current, t.path.array).ArrayOK()
		if !ok {
			continue
		}
		id := cur.Current.Lookup("_id")
		id.Value = slices.Clone(id.Value) // the model outlives the cursor's batch
		if filter, update, ok := t.path.rewrite(id, arr, r.ct, c); ok {
			models = append(models, mongo.NewUpdateOneModel().SetFilter(filter).SetUpdate(update))
		}
		if len(models) == per {
			if err := flush(); err != nil {
				return lost, err
			}
		}
	}
	if err := cur.Err(); err != nil {
		return lost, err
	}
	return lost, flush()
}

// rewriteAll sends the portable path's updates of one batch, each an
// updateOne guarded by the copies as read: one updateOne for a single
// document, else one unordered bulk write. It returns the documents
// matched and modified as the replies of the commands it sent say,
// summed, the updates that applied beside one that failed included (the
// driver returns a bulk write's partial result with its exception), so
// that each document rewritten counts once. After a transient failure it
// sends again (srverr.RetryStatements) only the updates that failed with
// a transient error: one that applied would match nothing the second
// time, and be taken for a guard another writer moved (one more read, a
// conflict reported that was not). Another error of an update stops the
// batch with the bulk write's error, the updates that applied counted. A
// command that failed whole with a transient error applied nothing and is
// sent again whole (so is a bulk write the driver split, whose parts that
// applied then match nothing: their guards hold the stale copies).
func (r *Ref[S]) rewriteAll(ctx context.Context, coll *mongo.Collection, models []mongo.WriteModel) (matched, modified int64, err error) {
	op := patterns.OperationFrom(ctx)
	err = srverr.RetryStatements(ctx, len(models), func(todo []int) error {
		op.Sent(1)
		if len(todo) == 1 {
			m := models[todo[0]].(*mongo.UpdateOneModel)
			res, err := coll.UpdateOne(ctx, m.Filter, m.Update)
			if err == nil {
				matched, modified = matched+res.MatchedCount, modified+res.ModifiedCount
			}
			return err
		}
		batch := make([]mongo.WriteModel, len(todo))
		for k, i := range todo {
			batch[k] = models[i]
		}
		res, err := coll.BulkWrite(ctx, batch, unordered)
		if res != nil {
			matched, modified = matched+res.MatchedCount, modified+res.ModifiedCount
		}
		return err
	}, nil, nil)
	return matched, modified, err
}

// unordered are the options of the portable path's bulk writes: the
// driver reads them, never changes them, so one value serves every call.
var unordered = options.BulkWrite().SetOrdered(false)
