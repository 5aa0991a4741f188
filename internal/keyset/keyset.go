// Package keyset reads documents in the order of their _id, a page per
// find: {_id: {$gt: last}} sorted by _id, with a limit. Unlike one long
// cursor, such a scan returns each document once while others rewrite the
// documents it reads (a cursor may return an updated document again:
// FerretDB 2.x does, and MongoDB can when an update moves a document's
// index entry ahead of the cursor), its memory is bounded by a page, and
// whatever the caller writes between pages is never read again.
package keyset

import (
	"context"
	"iter"
	"math"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/errs"
)

// place is a place in the server's sort order: the BSON types that sort
// there, and the $type alias that names them.
type place struct {
	types []bson.Type
	alias string
}

// order is the server's sort order of the BSON types a scan meets as an
// _id: numbers compare as one type ("number"). These are the types
// FerretDB 1.x can name in $type; an _id of another type (MinKey,
// MaxKey, a symbol, JavaScript code, a DBPointer, which no driver
// generates) stops a scan with an error rather than be skipped in
// silence.
var order = []place{
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

// After returns the condition of the documents whose _id the server
// sorts after last. {_id: {$gt: last}} alone compares values of last's
// type only (numbers count as one type), so the types sorted after it
// are added: {$or: [{_id: {$gt: last}}, {_id: {$type: [...]}}]}. An _id
// of a type outside the order above is an error wrapping
// patterns.ErrInvalid that names the type. It sends nothing.
func After(last bson.RawValue) (bson.D, error) {
	if !Ordered(last.Type) {
		return nil, errs.Invalid("an _id of BSON type %s: a scan in _id order pages past null, numbers, strings, documents, binary data, ObjectIDs, booleans, dates and timestamps only", last.Type)
	}
	gt := bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: last}}}}
	later := TypesAfter(last.Type, 1)
	if len(later) == 0 {
		return gt, nil
	}
	return bson.D{{Key: "$or", Value: bson.A{gt, bson.D{{Key: "_id", Value: bson.D{{Key: "$type", Value: later}}}}}}}, nil
}

// Ordered reports whether t has a place in the order of types this
// package knows (and so whether a scan can continue after a value of t).
func Ordered(t bson.Type) bool { return rank(t) >= 0 }

func rank(t bson.Type) int {
	return slices.IndexFunc(order, func(p place) bool { return slices.Contains(p.types, t) })
}

// TypesAfter returns the $type aliases of the types that the server's
// sort puts after t in direction dir (1 ascending, -1 descending): what
// a range operator, which compares values of one type only, cannot reach
// from a value of type t. t must be [Ordered]. It sends nothing.
func TypesAfter(t bson.Type, dir int) bson.A {
	r := rank(t)
	var out bson.A
	for i, p := range order {
		if (i-r)*dir > 0 {
			out = append(out, p.alias)
		}
	}
	return out
}

// Pages returns an iterator over the documents of coll that match filter
// (nil: all), in ascending _id order, in pages of at most size documents
// (size > 0), and at most limit documents in all (0: no limit). Each page
// is one find: filter for the first, {$and: [filter, After(last)]} for
// the next ones, sorted by _id, with the page's size as limit (and one
// more as batch size), so that the server answers it in one reply (more
// only when the documents pass 16 MiB). A short page is the last; after a full one,
// one more find. opts are the caller's options, sent with every find,
// before the sort, limit and batch size of the page, which win.
//
// The caller may write the documents of a page before asking for the
// next one: the scan never meets them again. Building the iterator sends
// nothing; an error is yielded once, with a nil page, and ends the
// iteration. The documents are copies that stay valid after it moves on.
func Pages(ctx context.Context, coll *mongo.Collection, filter any, size int, limit int64, opts ...options.Lister[options.FindOptions]) iter.Seq2[[]bson.Raw, error] {
	if filter == nil {
		filter = bson.D{}
	}
	return func(yield func([]bson.Raw, error) bool) {
		f, left := filter, limit
		for {
			n := int64(size)
			if limit > 0 {
				n = min(n, left)
			}
			// A batch size one over the limit: FerretDB 1.x keeps the
			// cursor open after a batch the size of the limit, and the
			// driver then sends a getMore that returns nothing.
			page := options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(n).SetBatchSize(int32(min(n+1, math.MaxInt32)))
			docs, err := read(ctx, coll, f, append(slices.Clone(opts), page))
			if err != nil {
				yield(nil, err)
				return
			}
			if len(docs) == 0 || !yield(docs, nil) || int64(len(docs)) < n {
				return
			}
			if left -= int64(len(docs)); limit > 0 && left == 0 {
				return
			}
			after, err := After(docs[len(docs)-1].Lookup("_id"))
			if err != nil {
				yield(nil, err)
				return
			}
			f = bson.D{{Key: "$and", Value: bson.A{filter, after}}}
		}
	}
}

// read returns every document of one find, as copies.
func read(ctx context.Context, coll *mongo.Collection, filter any, opts []options.Lister[options.FindOptions]) ([]bson.Raw, error) {
	cur, err := coll.Find(ctx, filter, opts...)
	if err != nil {
		return nil, err
	}
	defer cur.Close(context.WithoutCancel(ctx))
	var docs []bson.Raw
	for cur.Next(ctx) {
		docs = append(docs, slices.Clone(cur.Current))
	}
	return docs, cur.Err()
}
