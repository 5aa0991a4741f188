package outlier

import (
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// The fields of an overflow document:
//
//	{_id, parent: <parent id>, seq: <int64>, count: <int64>, bytes: <int64>, items: [...]}
//
// seq orders the documents of one parent (unique with parent); count is
// the number of items held (Append raises it, Remove lowers it); bytes is
// the encoded size of the items appended (Remove does not lower it, so it
// is an upper bound) and keeps the document under 16 MiB.
const (
	fParent = "parent"
	fSeq    = "seq"
	fCount  = "count"
	fBytes  = "bytes"
	fItems  = "items"
)

// The command documents the repository sends, built by pure functions so
// that the unit tests pin them exactly (the native ones cannot run on
// FerretDB). Each takes only what varies between calls.

func d(pairs ...any) bson.D {
	out := make(bson.D, 0, len(pairs)/2)
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, bson.E{Key: pairs[i].(string), Value: pairs[i+1]})
	}
	return out
}

// pushParentFilter matches the parent while it is open (flag not true),
// holds at most `at` items (no element at index at) and holds none of the
// items: the atomic guard of a parent push.
func (r *Repo[P, I]) pushParentFilter(parentID any, at int, items []item) bson.D {
	return d(
		"_id", parentID,
		r.cfg.Flag, d("$ne", true),
		r.cfg.Field+"."+strconv.Itoa(at), d("$exists", false),
		r.idPath, d("$nin", ids(items)),
	)
}

// pushParentUpdate appends items to the parent's array.
func (r *Repo[P, I]) pushParentUpdate(items []item) bson.D {
	return d("$push", d(r.cfg.Field, d("$each", raws(items))))
}

// parentStateProjection is what the native path reads of a parent when a
// push fails: the flag, the tail hint and the item ids (the length of the
// array follows from them), not the items.
func (r *Repo[P, I]) parentStateProjection() bson.D {
	return d(r.cfg.Flag, 1, r.cfg.Tail, 1, r.idPath, 1)
}

// openUpdate marks the parent as overflowed and raises its tail hint to
// seq, before the overflow document seq is written.
func (r *Repo[P, I]) openUpdate(seq int64) bson.D {
	return d("$set", d(r.cfg.Flag, true), "$max", d(r.cfg.Tail, seq))
}

// overflowQuery finds the overflow documents of the parent from seq
// onwards (the newest is where room is) and those holding any of the items
// (so that a retried Append does not store them twice). Each branch is
// served by one index of [Repo.Indexes].
func (r *Repo[P, I]) overflowQuery(parentID any, from int64, items []item) bson.D {
	return d("$or", bson.A{
		d(fParent, parentID, fSeq, d("$gte", from)),
		d(fParent, parentID, r.itemsIDPath, d("$in", ids(items))),
	})
}

// overflowQueryProjection reads the bookkeeping and the item ids of the
// documents overflowQuery finds, not the items.
func (r *Repo[P, I]) overflowQueryProjection() bson.D {
	return d(fSeq, 1, fCount, 1, fBytes, 1, r.itemsIDPath, 1)
}

// pushOverflowFilter matches the overflow document seq of the parent while
// it has room for n more items of size bytes (an element overhead
// included) within budget.
func (r *Repo[P, I]) pushOverflowFilter(parentID any, seq int64, n, size, budget int) bson.D {
	return d(
		fParent, parentID,
		fSeq, seq,
		fCount, d("$lte", int64(r.cfg.PerOverflow-n)),
		fBytes, d("$lte", int64(budget-size)),
	)
}

// pushOverflowUpdate appends items of total size bytes to an overflow
// document; as an upsert it creates the document (parent and seq come
// from the filter's equalities).
func pushOverflowUpdate(items []item, size int) bson.D {
	return d(
		"$inc", d(fCount, int64(len(items)), fBytes, int64(size)),
		"$push", d(fItems, d("$each", raws(items))),
	)
}

// overflowOrder sorts a parent's overflow documents in append order.
var overflowOrder = d(fSeq, 1)

// overflowItemsProjection reads only the items of overflow documents.
var overflowItemsProjection = d("_id", 0, fItems, 1)

// countPipeline sums the counts of a parent's overflow documents.
func countPipeline(parentID any) mongo.Pipeline {
	return mongo.Pipeline{
		d("$match", d(fParent, parentID)),
		d("$group", d("_id", nil, "n", d("$sum", "$"+fCount))),
	}
}

// removeParentNative removes the item from the parent's array by a $pull
// condition: one command on MongoDB. FerretDB 1.x reads the condition as an
// exact element and silently removes nothing, hence the portable path.
func (r *Repo[P, I]) removeParentNative(parentID, itemID any) (filter, update bson.D) {
	return d("_id", parentID, r.idPath, itemID),
		d("$pull", d(r.cfg.Field, d(r.cfg.ItemID, itemID)))
}

// removeOverflowNative removes the item from the overflow document holding
// it and lowers its count.
func (r *Repo[P, I]) removeOverflowNative(parentID, itemID any) (filter, update bson.D) {
	return d(fParent, parentID, r.itemsIDPath, itemID),
		d("$pull", d(fItems, d(r.cfg.ItemID, itemID)), "$inc", d(fCount, int64(-1)))
}

// removeParentPortable removes the given elements of the parent's array,
// compared whole (read first: FerretDB matches $pull and $pullAll values
// exactly). The filter also requires the item, so that a removal that lost
// a race matches nothing.
func (r *Repo[P, I]) removeParentPortable(parentID, itemID any, elems bson.A) (filter, update bson.D) {
	return d("_id", parentID, r.idPath, itemID),
		d("$pullAll", d(r.cfg.Field, elems))
}

// removeOverflowPortable removes the given elements, compared whole, from
// the overflow document docID and lowers its count by their number; the
// filter requires the item, so that a removal that lost a race does not
// lower the count again.
func (r *Repo[P, I]) removeOverflowPortable(docID, itemID any, elems bson.A) (filter, update bson.D) {
	return d("_id", docID, r.itemsIDPath, itemID),
		d("$pullAll", d(fItems, elems), "$inc", d(fCount, int64(-len(elems))))
}
