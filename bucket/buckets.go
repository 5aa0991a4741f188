package bucket

import (
	"context"
	"reflect"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/internal/lazy"
	"github.com/mongopatterns/mongopatterns/internal/obs"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Buckets is the bucket pattern: the measurements of one series in one
// time window (Config.Window) share a bucket document, up to Config.Cap of
// them, with a summary kept up to date by every write:
//
//	{_id, <meta>: M, start: date, first: date, last: date, count: int32,
//	 measurements: [V, ...], summary: {<value field>: {min, max, sum}},
//	 writes: [ObjectID, ...]}
//
// where writes holds the ids of the [Buckets.AddMany] statements that
// wrote to the bucket, by which a retry knows which applied (a bucket Add
// alone wrote has none).
//
// It works on every server [patterns.Capabilities] knows, MongoDB and
// FerretDB alike; it is safe for concurrent use by several goroutines,
// processes and machines (on FerretDB 1.x only for one client with one
// connection: see [patterns.FeatureConcurrentUpdates]).
type Buckets[M, V any] struct {
	s        *settings
	key      bson.D // the index key of s.bucketKey
	zeroSize int    // the size of a zero V's document, to size AddMany's buffer
	planned  lazy.Value[decided]
}

var _ Store[string, struct{}] = (*Buckets[string, struct{}])(nil)

// New returns a bucket store on the collection cfg.Collection of db. It
// validates cfg, wrapping [patterns.ErrInvalid]: a collection name, time
// field, meta field and value fields that are valid and distinct (the meta
// field not one of the bucket's own fields); a Window that is positive and
// a whole number of milliseconds; a Cap that is positive and whose full
// bucket, estimated from the BSON size of a zero M and a zero V, stays
// within 16 MiB; a V that encodes as a document whose time and value
// fields, where its zero value has them, are a date and numbers.
//
// New sends nothing. The first method call with a context detects the
// server once (two commands to the admin database, cached per client; see
// [patterns.Capabilities]) and decides how Summaries computes and how
// many update statements AddMany sends per command, and refuses a TTL
// where the server has no TTL indexes; nothing else depends on the
// server. Create the indexes of [Buckets.Indexes] before the first write
// ([patterns.EnsureIndexes]).
func New[M, V any](db *mongo.Database, cfg Config) (*Buckets[M, V], error) {
	b, err := newBuckets[M, V](db, cfg)
	return b, pkg.Wrap("New", err)
}

func newBuckets[M, V any](db *mongo.Database, cfg Config) (*Buckets[M, V], error) {
	s, err := newSettings(db, cfg)
	if err != nil {
		return nil, err
	}
	switch {
	case s.window <= 0:
		return nil, errs.Invalid("Window %v is not positive", cfg.Window)
	case s.cap <= 0:
		return nil, errs.Invalid("Cap %d is not positive", s.cap)
	case slices.Contains(reservedFields, s.metaField):
		return nil, errs.Invalid("MetaField %q is one of the bucket's own fields %v", s.metaField, reservedFields)
	}
	zero, err := zeroDocument[V](s)
	if err != nil {
		return nil, err
	}
	var m M
	if size := s.bucketSize(sizeOf(m), len(zero)); size > patterns.MaxDocumentSize {
		return nil, errs.Invalid("Cap %d: a full bucket of zero measurements takes about %d bytes, more than the %d-byte document limit", s.cap, size, patterns.MaxDocumentSize)
	}
	key, err := s.bucketKey()
	if err != nil {
		return nil, err
	}
	return &Buckets[M, V]{s: s, key: key, zeroSize: len(zero)}, nil
}

// zeroDocument encodes the zero V (the zero of the pointed-to type when V
// is a pointer) and checks what it says about V's shape.
func zeroDocument[V any](s *settings) (bson.Raw, error) {
	var zero any = *new(V)
	if t := reflect.TypeFor[V](); t.Kind() == reflect.Pointer {
		zero = reflect.New(t.Elem()).Interface()
	}
	data, err := bson.Marshal(zero)
	if err != nil {
		return nil, errs.Invalid("measurement type %s does not encode as a BSON document: %v", reflect.TypeFor[V](), err)
	}
	raw := bson.Raw(data)
	if rv, err := raw.LookupErr(s.timeField); err == nil && rv.Type != bson.TypeDateTime {
		return nil, errs.Invalid("measurement type %s: time field %q encodes as a BSON %s, not a date", reflect.TypeFor[V](), s.timeField, rv.Type)
	}
	for _, f := range s.valueFields {
		if rv, err := raw.LookupErr(f); err == nil {
			if _, ok := number(rv); !ok {
				return nil, errs.Invalid("measurement type %s: value field %q encodes as a BSON %s, not a number", reflect.TypeFor[V](), f, rv.Type)
			}
		}
	}
	return raw, nil
}

// Indexes returns the indexes the store's queries use:
//
//   - {<meta>: 1, start: 1, count: 1}, for every query on one series. It
//     is in ESR order (equality, sort, range) for each of them. The
//     filter of every write to a bucket, Add's upsert {<meta>: M, start:
//     S, count: {$lt: Cap}} and AddMany's read of the buckets with room
//     (start in a set of window starts), is two equalities then a range
//     on the count: with count in the key, the server finds the buckets
//     with room in the index alone, without fetching the full buckets of
//     a window, of which a small Cap and a long Window make many. Range,
//     Summaries and DeleteSeriesBefore use its prefix: an equality on the
//     meta, then the sort and the range on start. The price is an index
//     entry rewritten by each write (the count changes), small next to
//     the write of the bucket itself. It is not unique, and must not be:
//     once a bucket is full, the next measurement of its window opens
//     another bucket with the same meta and start.
//   - {start: 1}, for DeleteBefore, whose filter names no series: a
//     compound index whose leading field a query does not name is not
//     used, so without it DeleteBefore would scan the collection. A
//     bucket's start never changes, so this index costs one entry per
//     bucket, written once.
//   - when Config.TTL is set, a TTL index on the buckets' last time.
//
// Indexes sends nothing. Create them with [patterns.EnsureIndexes]; on a
// server without TTL indexes, creating the TTL index fails, as every
// method of the store does.
func (b *Buckets[M, V]) Indexes() []patterns.Index {
	ixs := []patterns.Index{
		{Collection: b.s.coll, Model: mongo.IndexModel{Keys: b.key}},
		{Collection: b.s.coll, Model: mongo.IndexModel{Keys: startKey()},
			EveryShard: "DeleteBefore names no series: a sweep of every series, on every shard"},
	}
	if b.s.ttl > 0 {
		ixs = append(ixs, patterns.Index{Collection: b.s.coll, Model: mongo.IndexModel{
			Keys:    ttlKey(),
			Options: options.Index().SetExpireAfterSeconds(int32(b.s.ttl)),
		}})
	}
	return ixs
}

// ready returns the store's plan, deciding it on first use, and refuses a
// configuration the server cannot serve.
func (b *Buckets[M, V]) ready(ctx context.Context) (plan, error) {
	d, err := decide(ctx, &b.planned, b.s.coll.Database().Client(), false)
	if err == nil {
		err = d.checkTTL(b.s)
	}
	return d.plan, err
}

// start starts the operation name of the store for Config.Hook (see
// [obs.Start]).
func (b *Buckets[M, V]) start(ctx context.Context, name string) (context.Context, *patterns.Operation) {
	return obs.Start(ctx, b.s.hook, &b.planned, string(pkg), name, b.s.coll.Database().Name(), b.s.collections)
}

func (b *Buckets[M, V]) observed() bool { return b.s.hook != nil }
