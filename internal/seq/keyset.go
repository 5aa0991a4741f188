package seq

import (
	"context"
	"iter"
	"math"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// ByID returns an iterator over the documents of coll that filter
// selects, in pages of at most n documents (0 < n <= 2³¹-1) in _id order,
// each page read by one find sorted by _id with limit n: the first without
// a bound, the next ones after the last _id read ([After]). A document is
// yielded once however others rewrite the collection during the scan (a
// cursor over documents that others update may return one again: FerretDB
// 2.x does, and MongoDB can when an update moves an index entry ahead of
// the cursor). A document inserted, or deleted, during the scan may be
// read or not. The iteration resumes from the last _id after a failed
// page, so a caller that remembers it can restart there.
//
// MongoDB's $gt compares values of one type only, so where the _ids of
// the selected documents have several types (numbers and strings, say), a
// page after the last of one type comes back short; ByID then sends one
// find of the _ids of the types that sort after it ([Beyond]), and goes
// on from there. That find is the one round trip beyond one per page that
// a scan costs, sent only when the last page was read after a bound. The
// filter must not constrain _id, and proj, when given, must keep _id. The
// pages are copies that stay valid after the iteration moves on; an error
// is yielded once, with a nil page, and ends the iteration.
func ByID(ctx context.Context, coll *mongo.Collection, filter, proj bson.D, n int) iter.Seq2[[]bson.Raw, error] {
	return func(yield func([]bson.Raw, error) bool) {
		// A batch one larger than the limit, so that every server sees the
		// cursor is exhausted and no getMore follows (FerretDB 1.x keeps a
		// cursor open after a batch of exactly the limit).
		opts := options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(int64(n)).SetBatchSize(int32(min(n, math.MaxInt32-1) + 1))
		if proj != nil {
			opts.SetProjection(proj)
		}
		f, bounded := filter, false
		var last bson.RawValue
		for {
			page, err := readPage(ctx, coll, f, opts)
			if err != nil {
				yield(nil, err)
				return
			}
			if len(page) > 0 {
				if !yield(page, nil) {
					return
				}
				last = page[len(page)-1].Lookup("_id")
			}
			switch {
			case len(page) == n:
				f, bounded = After(filter, last), true
			case bounded: // short after a bound: the _ids of last's type are read
				f, bounded = Beyond(filter, last), false
			default: // short without a bound: nothing is left
				return
			}
		}
	}
}

func readPage(ctx context.Context, coll *mongo.Collection, filter bson.D, opts *options.FindOptionsBuilder) ([]bson.Raw, error) {
	cur, err := coll.Find(ctx, filter, opts)
	if err != nil {
		return nil, err
	}
	defer cur.Close(context.WithoutCancel(ctx))
	var page []bson.Raw
	for cur.Next(ctx) {
		page = append(page, slices.Clone(cur.Current))
	}
	return page, cur.Err()
}

// After is the filter of the page after the _id last:
// {<filter>, _id: {$gt: last}}.
func After(filter bson.D, last bson.RawValue) bson.D {
	return append(slices.Clip(filter), bson.E{Key: "_id", Value: bson.D{{Key: "$gt", Value: last}}})
}

// Beyond is the filter of the documents whose _id has a type that sorts
// after the type of last in MongoDB's order of BSON types:
// {<filter>, _id: {$not: {$type: [<last's type and the types before it>]}}}.
// It names the types to leave out rather than those to read, so that it
// names only types every server knows (FerretDB 1.x refuses the aliases
// of the deprecated ones and of MinKey). An _id of type MinKey or symbol
// (deprecated) is not supported: it would be read again.
func Beyond(filter bson.D, last bson.RawValue) bson.D {
	var done bson.A
	for _, group := range idTypeOrder {
		done = append(done, group.alias)
		if slices.Contains(group.codes, last.Type) {
			break
		}
	}
	return append(slices.Clip(filter), bson.E{Key: "_id", Value: bson.D{{Key: "$not", Value: bson.D{{Key: "$type", Value: done}}}}})
}

// idTypes are the BSON types of _ids that MongoDB sorts together (numbers
// compare by value), with the $type alias of them all.
type idTypes struct {
	codes []bson.Type
	alias string
}

// idTypeOrder lists the BSON types an _id can have, grouped as MongoDB
// sorts them, in MongoDB's order, as far as FerretDB 1.x knows their $type
// aliases. The types after timestamp (MaxKey, DBPointer, JavaScript code)
// need no alias: Beyond never leaves them out. An _id of type MinKey or
// symbol is not supported (it would be read again). An _id cannot be an
// array, a regular expression or undefined.
var idTypeOrder = []idTypes{
	{[]bson.Type{bson.TypeNull}, "null"},
	{[]bson.Type{bson.TypeInt32, bson.TypeInt64, bson.TypeDouble, bson.TypeDecimal128}, "number"},
	{[]bson.Type{bson.TypeString}, "string"},
	{[]bson.Type{bson.TypeEmbeddedDocument}, "object"},
	{[]bson.Type{bson.TypeBinary}, "binData"},
	{[]bson.Type{bson.TypeObjectID}, "objectId"},
	{[]bson.Type{bson.TypeBoolean}, "bool"},
	{[]bson.Type{bson.TypeDateTime}, "date"},
	{[]bson.Type{bson.TypeTimestamp}, "timestamp"},
}
