package outlier

import (
	"context"
	"fmt"
	"iter"
	"math"
	"reflect"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/obs"
	"github.com/mongopatterns/mongopatterns/internal/txn"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// overflowItems is an overflow document decoded for reading.
type overflowItems[I any] struct {
	Items []I `bson:"items"`
}

// Get returns the parent and all its items in append order: the embedded
// ones, then those of the overflow documents by seq. P is decoded from the
// parent as stored (if P has a field for the array, it holds only the
// embedded items); the returned slice is the merged list, a copy: P's
// field and the slice share no memory. The embedded items are decoded
// once: when P has a field of type []I for the array, the slice starts as
// a copy of it.
//
// Cost: 1 command (findOne) when the flag is false, 2 when it is true
// (findOne, then one find of the overflow documents sorted by seq, asking
// for as many as the parent's tail hint says there are in its first reply,
// which the server caps at 16 MiB; a larger overflow adds a getMore per
// 16 MiB). It loads every item: for a huge outlier, stream with
// [Repo.Items]. It is the same on every server.
//
// Between its two commands, appends and removals may run: the result holds
// every item appended before Get began and not removed, the parent as of
// the first command and the overflow as of the second (which may include
// items appended in between). The flag is written before the overflow, so
// no overflow item is missed; a missing parent is [patterns.ErrNotFound].
// A [Repo.Delete] of the parent between the two commands is not a missing
// parent: Get returns the parent as its first command read it, and the
// overflow that is left when the second runs (none, once the Delete
// ended).
// On an error (a getMore that fails after the first batch included) it
// returns no items, never some of them: it is safe to call again.
func (r *Repo[P, I]) Get(ctx context.Context, parentID any) (_ P, _ []I, err error) {
	ctx, op := r.start(ctx, "Get")
	defer op.Finish(&err)
	var p P
	if err := txn.Refuse(ctx); err != nil {
		return p, nil, pkg.Wrap("Get", err)
	}
	if err := validParent("Get", parentID); err != nil {
		return p, nil, err
	}
	parent, err := r.findParent(ctx, parentID, nil)
	if err != nil {
		return p, nil, fail("Get", parentID, err)
	}
	if err := bson.Unmarshal(parent, &p); err != nil {
		return p, nil, fail("Get", parentID, err)
	}
	items, ok := r.embeddedOf(&p)
	if !ok { // P has no field that holds them: decode them
		if items, err = r.decodeEmbedded(parent); err != nil {
			return p, nil, fail("Get", parentID, err)
		}
	}
	if !r.flagged(parent) {
		return p, items, nil
	}
	// The tail hint says how many documents there are (seqs 0..tail, and
	// maybe tail+1 being opened): ask for them all in the first reply.
	tail, _ := parent.Lookup(r.cfg.TailField).AsInt64OK()
	op.Sent(1)
	cur, err := r.overflow.Find(ctx, overflowFilter(parentID), options.Find().
		SetSort(overflowOrder).SetProjection(overflowItemsProjection).SetBatchSize(int32(min(tail+2, math.MaxInt32))))
	if err != nil {
		return p, nil, fail("Get", parentID, err)
	}
	defer obs.Close(context.WithoutCancel(ctx), op, cur)
	for obs.Next(ctx, op, cur) {
		var doc overflowItems[I]
		if err := cur.Decode(&doc); err != nil {
			return p, nil, fail("Get", parentID, err)
		}
		items = append(items, doc.Items...)
	}
	if err := cur.Err(); err != nil {
		return p, nil, fail("Get", parentID, err) // not the items read so far
	}
	return p, items, nil
}

// Items streams the parent's items in append order without loading them
// all: the embedded ones (one findOne reading the array and the flag),
// then, when the flag is true, the overflow documents through one find
// sorted by seq on the {parent, seq} index, with a batch size of
// Config.BatchSize documents, decoded one document at a time, on every
// server. An overflow of d documents costs 1 + ceil(d/BatchSize) commands
// (the find, then a getMore per batch, and sometimes one more getMore
// that finds the cursor exhausted). Memory is bounded by the parent and
// one batch, not by the number of items.
//
// Building the iterator sends nothing; each range runs the reads again.
// An error (a missing parent is [patterns.ErrNotFound]) is yielded once,
// with the zero I, and ends the iteration. Stopping early while the
// cursor is open sends one killCursors. What a concurrent writer's steps
// look like is as for [Repo.Get], except that the overflow is read batch
// by batch: an item removed or appended while they are read may or may
// not be seen. Each item is yielded at most once, whatever others rewrite
// meanwhile: a cursor may return a document again after it was rewritten
// (FerretDB 2.x does), so Items skips any overflow document whose seq is
// not past the last one it yielded; the seq of a document never changes
// and the cursor is sorted by it, so a repeat always has a seq already
// passed, and dropping it needs no memory.
func (r *Repo[P, I]) Items(ctx context.Context, parentID any) iter.Seq2[I, error] {
	return func(yield func(I, error) bool) {
		ctx, op := r.start(ctx, "Items")
		var err error
		defer op.Finish(&err)
		var zero I
		if err = txn.Refuse(ctx); err != nil {
			err = pkg.Wrap("Items", err)
			yield(zero, err)
			return
		}
		if err = validParent("Items", parentID); err != nil {
			yield(zero, err)
			return
		}
		parent, items, err := r.readEmbedded(ctx, parentID, r.embeddedProjection())
		if err != nil {
			err = fail("Items", parentID, err)
			yield(zero, err)
			return
		}
		for _, it := range items {
			if !yield(it, nil) {
				return
			}
		}
		if !r.flagged(parent) {
			return
		}
		if err = r.overflowItems(ctx, parentID, func(items []I) bool {
			for _, it := range items {
				if !yield(it, nil) {
					return false
				}
			}
			return true
		}); err != nil {
			err = fail("Items", parentID, err)
			yield(zero, err)
		}
	}
}

// overflowItems hands the items of the parent's overflow documents, one
// document at a time in seq order, to use until it returns false, through
// one cursor of Config.BatchSize documents per batch; it skips a document
// the cursor returns again (a seq not past the last one handed over).
func (r *Repo[P, I]) overflowItems(ctx context.Context, parentID any, use func([]I) bool) error {
	op := patterns.OperationFrom(ctx)
	op.Sent(1)
	cur, err := r.overflow.Find(ctx, overflowFilter(parentID), options.Find().
		SetSort(overflowOrder).SetProjection(overflowPageProjection).SetBatchSize(int32(r.cfg.BatchSize)))
	if err != nil {
		return err
	}
	defer obs.Close(context.WithoutCancel(ctx), op, cur)
	last := int64(math.MinInt64)
	for obs.Next(ctx, op, cur) {
		s, ok := cur.Current.Lookup(fSeq).AsInt64OK()
		if !ok {
			return fmt.Errorf("overflow document %v has no integer %s", cur.Current.Lookup("_id"), fSeq)
		}
		if s <= last {
			continue // a rewritten document, returned again
		}
		last = s
		var doc overflowItems[I]
		if err := bson.Unmarshal(cur.Current, &doc); err != nil {
			return err
		}
		if !use(doc.Items) {
			return nil
		}
	}
	return cur.Err()
}

// readEmbedded reads the parent (with the projection, if any) and decodes
// its embedded items.
func (r *Repo[P, I]) readEmbedded(ctx context.Context, parentID any, projection bson.D) (bson.Raw, []I, error) {
	parent, err := r.findParent(ctx, parentID, projection)
	if err != nil {
		return nil, nil, err
	}
	items, err := r.decodeEmbedded(parent)
	return parent, items, err
}

// decodeEmbedded decodes the items of the parent's array.
func (r *Repo[P, I]) decodeEmbedded(parent bson.Raw) ([]I, error) {
	arr, err := r.array(parent)
	if err != nil {
		return nil, err
	}
	var items []I
	if err := (bson.RawValue{Type: bson.TypeArray, Value: arr}).Unmarshal(&items); err != nil {
		return nil, fmt.Errorf("decode the items of field %q: %w", r.cfg.Field, err)
	}
	return items, nil
}

// embeddedOf returns a copy of the items that decoding the parent into p
// put in P's field for them (see [embeddedField]), and false when P has
// no such field: Get then decodes them from the parent itself, which
// would decode them twice.
func (r *Repo[P, I]) embeddedOf(p *P) ([]I, bool) {
	if r.embedded == nil {
		return nil, false
	}
	v := reflect.ValueOf(p).Elem()
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil, false
		}
		v = v.Elem()
	}
	f, err := v.FieldByIndexErr(r.embedded)
	if err != nil { // through a nil embedded pointer
		return nil, false
	}
	return slices.Clone(*f.Addr().Interface().(*[]I)), true
}

// embeddedField returns the index (for reflect's FieldByIndex) of the
// field of P, a struct or a pointer to one, into which bson.Unmarshal
// decodes the parent's array field when that field has the type []I; nil
// if there is none. It asks the decoder itself, with a probe document
// holding one empty item, so that the driver's rules for field names
// (tags, inline structs) are followed exactly.
func embeddedField[P, I any](field string) []int {
	t := reflect.TypeFor[P]()
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	probe, err := bson.Marshal(bson.D{{Key: field, Value: bson.A{bson.D{}}}})
	if err != nil {
		return nil
	}
	v := reflect.New(t)
	if err := bson.Unmarshal(probe, v.Interface()); err != nil {
		return nil
	}
	var found []int
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() || f.Type != reflect.TypeFor[[]I]() {
			continue
		}
		if fv, err := v.Elem().FieldByIndexErr(f.Index); err == nil && fv.Len() == 1 {
			if found != nil {
				return nil // two candidates: do not guess
			}
			found = f.Index
		}
	}
	return found
}

// Count returns the number of the parent's items: 1 command (a findOne
// reading the flag and the ids of the embedded items, not the items) when
// the flag is false, 2 when it is true (plus an aggregate summing the
// counts of the overflow documents, $match and $group with $sum, served by
// the {parent, seq} index), on every server. Between the two, the result
// is as for [Repo.Get]. A missing parent is [patterns.ErrNotFound].
func (r *Repo[P, I]) Count(ctx context.Context, parentID any) (_ int, err error) {
	ctx, op := r.start(ctx, "Count")
	defer op.Finish(&err)
	if err := txn.Refuse(ctx); err != nil {
		return 0, pkg.Wrap("Count", err)
	}
	if err := validParent("Count", parentID); err != nil {
		return 0, err
	}
	parent, err := r.findParent(ctx, parentID, r.countProjection())
	if err != nil {
		return 0, fail("Count", parentID, err)
	}
	arr, err := r.array(parent)
	if err != nil {
		return 0, fail("Count", parentID, err)
	}
	vals, err := arr.Values()
	if err != nil || !r.flagged(parent) {
		return len(vals), fail("Count", parentID, err)
	}
	op.Sent(1)
	cur, err := r.overflow.Aggregate(ctx, countPipeline(parentID))
	if err != nil {
		return 0, fail("Count", parentID, err)
	}
	var sums []struct {
		N int `bson:"n"`
	}
	if err := obs.All(ctx, op, cur, &sums); err != nil {
		return 0, fail("Count", parentID, err)
	}
	n := len(vals)
	for _, s := range sums {
		n += s.N
	}
	return n, nil
}
