package versioning

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/internal/shard"
	"github.com/mongopatterns/mongopatterns/internal/srverr"
	"github.com/mongopatterns/mongopatterns/internal/txn"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Insert inserts v stamped with the current version and a new revision
// (whatever v's own fields of those names hold) and returns its _id, which
// the driver generates when v has none. One command (insert), sent again
// after a transient failure (FerretDB 2.x's deadlock, which applied
// nothing). A duplicate _id is the server's error, as returned by the
// driver. A document larger than 16 MiB is refused with
// [patterns.ErrTooLarge] before anything is sent, on every server (FerretDB
// 1.x would store it). After a failure of the connection the document may
// be stored: a retry with the same _id then reports the duplicate, while
// a value without an _id gets a new one at each call and may be stored
// twice. Give v an _id to make Insert safe to retry.
func (r *Repo[T]) Insert(ctx context.Context, v T) (_ any, err error) {
	ctx, op := r.start(ctx, "Insert")
	defer op.Finish(&err)
	if err := txn.Refuse(ctx); err != nil {
		return nil, pkg.Wrap("Insert", err)
	}
	doc, err := r.encode(v)
	if err != nil {
		return nil, pkg.Wrap("Insert", r.ofValue(doc, err))
	}
	var res *mongo.InsertOneResult
	err = srverr.Retry(ctx, func() (err error) {
		op.Sent(1)
		res, err = r.coll.InsertOne(ctx, doc)
		return err
	})
	if err != nil {
		return nil, pkg.Wrap("Insert", r.ofValue(doc, err))
	}
	op.Affected(1)
	return res.InsertedID, nil
}

// Replace replaces the document id with v, stamped with the current
// version and a new revision. One command (replaceOne), guarded so that a
// document newer than Config.Current is never downgraded: it is refused
// with [ErrNewerSchema]. When nothing matched, one find tells why:
// [patterns.ErrNotFound], [ErrNewerSchema], or a concurrent change, which
// is retried (up to 4 times, then [patterns.ErrConflict]). The guarded
// replaceOne is also sent again after a transient failure (FerretDB 2.x's
// deadlock). A document larger than 16 MiB is refused with
// [patterns.ErrTooLarge] before anything is sent, on every server. A
// failure of the connection leaves the document replaced or not, and
// Replace is safe to retry: the retry replaces it again.
//
// With Config.ShardKey, Replace first reads the document (a find by _id,
// to every shard, as Get's), and the replaceOne carries the key's values
// as read, in its filter and in the replacement: a field of the key that
// v lacks keeps its stored value (mongos targets a replacement by the key
// it holds, a missing field as null, so that without it the replacement
// would match nothing or be refused, 31025), and one that v holds is
// written as v holds it (a changed value moves the document: MongoDB
// accepts it in a retryable write or a transaction only). Two commands,
// then; a miss re-reads the document as without ShardKey.
func (r *Repo[T]) Replace(ctx context.Context, id any, v T) (err error) {
	ctx, op := r.start(ctx, "Replace")
	defer op.Finish(&err)
	if err := txn.Refuse(ctx); err != nil {
		return pkg.Wrap("Replace", err)
	}
	if err := patterns.ValidateID(id); err != nil {
		return pkg.Wrap("Replace", err)
	}
	doc, err := r.encode(v)
	var stored bson.Raw // with Config.ShardKey, the document as last read
	if err == nil && len(r.shardKey) > 0 {
		stored, err = r.findRaw(ctx, id)
	}
	if err == nil {
		err = r.guarded(ctx, id, func() (bool, error) {
			if stored == nil {
				return r.replaceOne(ctx, r.notNewerFilter(idFilter(id)), doc)
			}
			kept, err := shard.KeepValues(doc, stored, r.shardKey)
			if err != nil {
				return false, err
			}
			if len(kept) > patterns.MaxDocumentSize {
				return false, tooLarge(len(kept))
			}
			return r.replaceOne(ctx, r.notNewerFilter(r.docFilter(stored)), kept)
		}, func(raw bson.Raw) error {
			// Not matched: newer, or changed since (retry).
			if v, err := r.versionOf(raw); err == nil && v > r.current {
				return r.newer(v)
			}
			if stored != nil {
				stored = raw
			}
			op.Lost()
			return nil
		})
	}
	if err != nil {
		return pkg.Wrap("Replace", r.ofDoc(id, err))
	}
	op.Affected(1)
	return nil
}

// Delete deletes the document id, whatever its version. One command
// (delete), sent again after a transient failure; [patterns.ErrNotFound]
// when there is none, as for the retry of a Delete whose reply was lost
// when the connection failed (the document was deleted). A delete that
// matched nothing is checked with a find of the id, a second command, and
// sent again while the document is there (FerretDB 2.x answers no match
// for a document that a concurrent update is rewriting, and leaves it);
// after 5 such answers Delete returns [patterns.ErrConflict].
func (r *Repo[T]) Delete(ctx context.Context, id any) (err error) {
	ctx, op := r.start(ctx, "Delete")
	defer op.Finish(&err)
	if err := txn.Refuse(ctx); err != nil {
		return pkg.Wrap("Delete", err)
	}
	if err := patterns.ValidateID(id); err != nil {
		return pkg.Wrap("Delete", err)
	}
	deleted, err := srverr.DeleteOne(ctx, r.coll, idFilter(id))
	if err == nil && !deleted {
		err = notFound()
	}
	if err != nil {
		return pkg.Wrap("Delete", r.ofDoc(id, err))
	}
	op.Affected(1)
	return nil
}

// encode returns v as the document Insert and Replace send: stamped with
// the current version and a new revision, and at most 16 MiB.
func (r *Repo[T]) encode(v T) (bson.Raw, error) {
	raw, err := bson.Marshal(v)
	if err != nil {
		return nil, errs.Invalid("encode %T: %v", v, err)
	}
	doc, err := r.stampDoc(raw, bson.NewObjectID())
	if err != nil {
		return nil, errs.Invalid("encode %T: %v", v, err)
	}
	if len(doc) > patterns.MaxDocumentSize {
		return doc, tooLarge(len(doc))
	}
	return doc, nil
}

// tooLarge is the error for a document of n bytes, over 16 MiB.
func tooLarge(n int) error {
	return errs.TooLarge("%d bytes, over the %d-byte limit", n, patterns.MaxDocumentSize)
}

// ofValue names the document of an Insert when it has an _id, and only
// the collection otherwise.
func (r *Repo[T]) ofValue(doc bson.Raw, err error) error {
	if id, lerr := doc.LookupErr("_id"); lerr == nil {
		return r.ofDoc(id, err)
	}
	return r.ofColl(err)
}
