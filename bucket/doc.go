// Package bucket stores time series with the bucket pattern: instead of one
// document per measurement (a million per sensor per year), the
// measurements of one series in one time window share a bucket document
// (one an hour: 8,760 per sensor per year) that also keeps their count,
// first and last times, and per value field min, max and sum.
//
// # Usage
//
// The calls a service makes, in order (the Example has them whole):
//
//	store, err := bucket.New[string, Reading](db, bucket.Config{
//		Collection: "readings", TimeField: "at", ValueFields: []string{"celsius"},
//		Window: time.Hour, Cap: 120,
//	})
//	err = patterns.EnsureIndexes(ctx, store.Indexes()...) // once, at start-up
//	err = store.Add(ctx, sensorID, reading)               // one upsert
//	err = store.AddMany(ctx, points)                      // one write per bucket it fills
//	for r, err := range store.Range(ctx, sensorID, from, to) { ... }
//	for s, err := range store.Summaries(ctx, sensorID, from, to, time.Hour) { ... }
//
// The sections below give the backends, the guarantees, then how each
// write keeps them.
//
// [Store] is the interface an application depends on. [New] returns the
// bucket backend, [Buckets], which works on every server;
// [NewTimeSeries] returns [TimeSeries], a native time-series collection
// (MongoDB 5.0+), with the same [Config], so that the two can be chosen
// between and compared.
//
// # Writing
//
// [Buckets.Add] is one upsert, one round trip:
//
//	filter: {<meta>: M, start: <window start>, count: {$lt: Cap}}
//	update: {$push: {measurements: V}, $inc: {count: 1, summary.<f>.sum: v},
//	         $min: {first: t, summary.<f>.min: v}, $max: {last: t, summary.<f>.max: v}}
//	upsert: true
//
// The $lt guard keeps every bucket within Cap; concurrent upserts may open
// a second partial bucket for one window, which readers merge. There is no
// unique index on {meta, start}, and there must not be one: once a bucket
// is full, every later upsert of its window would fail with a duplicate
// key.
//
// [Buckets.AddMany] groups its measurements by series and window and
// sends one write per bucket it fills: a guarded $push $each topping up
// each bucket that has room ({_id, <meta>, start, count: {$lte: Cap -
// k}}), and the buckets it opens built whole and inserted, after one find
// of the buckets with room. 1,800 measurements that fill 30 buckets cost
// 30 writes and a read, where Add would send 1,800 upserts; its godoc
// proves the bound and says what concurrent writers cost.
//
// After an error that leaves unknown whether a write applied (a timeout, a
// broken connection), Add may have stored its measurement or not, and
// sending it again may store it twice; AddMany says which measurements
// were stored, were not, or may have been ([PartialError]), and calling it
// again with the same points stores each exactly once: every statement
// writes its id into the bucket it writes to, and the retry reads which
// applied and sends the others again as they were.
//
// Both are safe for concurrent use by several goroutines, processes and
// machines: no bucket passes Cap, and N measurements of a window make at
// most ceil(N/Cap) + (writers - 1) buckets. On FerretDB 1.x this holds
// only for one client with one connection (see
// [patterns.FeatureConcurrentUpdates]).
//
// # The series key
//
// The meta M is matched by equality, so it must not carry query operators:
// a meta that encodes to a document with a '$' key ({"$ne": null}, from a
// request), an array, null, a regular expression or JavaScript is
// rejected with [patterns.ErrInvalid]. Equality on an embedded document
// compares field order too, so the store writes and queries every meta
// with the keys of its documents sorted, at every depth: a struct, a map
// and a bson.D with the same fields name the same series. A program
// querying the collection itself must sort them the same way.
//
// # Reading
//
// [Buckets.Range] streams the measurements of an interval in time order,
// merging the partial buckets of a window. [Buckets.Summaries] gives
// count, sum, min, max and mean per step, from the bucket summaries where
// a bucket lies in one step and from its measurements where it does not:
// in one aggregation where the server has the $group accumulators $min
// and $max (MongoDB, FerretDB 2.x), in the client elsewhere (FerretDB
// 1.x), never a wrong number. [Buckets.SummariesBySeries] gives the same
// numbers for every series over one interval (a fleet view), the same
// way. [Buckets.Latest] gives the newest
// measurement of a series from the buckets of its newest window: one
// find, read backwards on the index.
//
// # Retention
//
// [Buckets.DeleteBefore] and [Buckets.DeleteSeriesBefore] delete the
// buckets whose measurements are all older than a time; Config.TTL has the
// server do it continuously, where it has TTL indexes.
//
// # Storage
//
// A reading {at: date, temp: double, hum: int64} takes 75 bytes as a
// document of its own ({_id, meta, at, temp, hum}) and 52.0 in hourly
// buckets of 60 written by AddMany (BenchmarkAddManyVsInsertOne reports
// both): 1.44x less.
// The layout saves, per measurement, the _id and the meta a document of
// its own repeats (31 bytes here) and, not counted in those bytes, its
// index entries: one entry per bucket in {<meta>, start, count}, not one
// per measurement in {meta, at} and in _id. The rest is the measurement
// itself, 44 bytes, whose field names every measurement repeats, plus 4
// bytes of array element (type, decimal index, NUL) and 4.2 bytes of its
// share of the bucket's own fields (0.5 of them the id of the insert that
// wrote the bucket, by which a retry of AddMany knows it applied). A
// columnar layout (one array per field, times as int32 offsets from
// start) would take about 35 bytes here (2.1x), but not without hurting
// reads or generality: Range would rebuild every document from its
// columns, Summaries would index arrays in parallel, and measurements
// whose fields vary (omitempty, maps) cannot keep columns aligned under
// concurrent writers; storing the time as an offset alone saves 4 bytes
// (1.58x). So the layout stays. MongoDB's time-series collections
// compress closed buckets column by column inside the server:
// [NewTimeSeries] uses them where the server has them.
//
// # Observing
//
// Config.Hook, when set, sees every operation of a store ([patterns.Hook]):
// each call of Add, AddMany, Latest, DeleteBefore and DeleteSeriesBefore,
// and each iteration of Range, Summaries and SummariesBySeries (one that
// yields a bad-input error or nothing, sending nothing, too). It reports
// the collection; the path of the store on its server: for a [Buckets],
// "native" where it relies on the server's summaries, update commands of
// several statements and TTL indexes (the features named), else
// "portable"; for a [TimeSeries], likewise with time-series collections,
// their custom bucketing and their deletes by time; the commands sent
// (the server's detection on first use and a TimeSeries' create of its
// collection included); the documents written: bucket documents inserted,
// updated or deleted by a Buckets, measurement documents by a TimeSeries;
// each write sent again (after FerretDB 2.x's deadlock, or a duplicate key
// on an upsert or insert: see Add and AddMany) as a retry; each top-up of
// AddMany refused because a concurrent writer took its room as a conflict;
// and the outcome. Indexes sends nothing and reports nothing. Nothing
// more is sent with a hook, and a nil Hook costs nothing: no allocation.
//
// # Errors
//
// Bad configuration and bad input wrap [patterns.ErrInvalid], and nothing
// is written; a server lacking a feature a configuration needs gives an
// [*patterns.UnsupportedError] naming it; see each method.
//
// # Sharding
//
// Shard a [Buckets] collection on {meta: "hashed", start: 1}: the upsert
// into the open bucket ({meta, start, count < Cap}) holds the whole key and
// goes to one shard; the hashed meta spreads the series over the shards
// while start, which grows with time, only orders the buckets of one
// series, so that a long series splits into chunks rather than growing
// one jumbo chunk. Range, Summaries and DeleteSeriesBefore name one
// series, a prefix of the key, and go to the shards owning its chunks;
// AddMany's read of the open buckets (the series it writes to, by $in or
// $or), its one insert and its one update command for several series go
// to the shards of each; DeleteBefore names no
// series and goes to every shard (it is idempotent, so a chunk migration
// that makes it miss a bucket is caught by its next run). {meta: 1,
// start: 1} and {meta: "hashed"} target the same commands; a key that
// starts with start (or _id, whose ObjectIDs grow with time) sends every
// new bucket to the last chunk.
//
// On {_id: "hashed"} or any key the upsert does not hold, MongoDB 6.0 and
// 7.0 refuse Add and AddMany's upserts (61, "Failed to target upsert by
// query"); from 7.1 each is a two-phase write to every shard, and every
// read goes to every shard.
//
// A [TimeSeries] collection may be sharded only on its metaField or
// subfields of it (with the timeField last, deprecated in 8.0): {meta: 1},
// or {meta.site: 1} for a document meta; Range and Summaries then go to
// the shards of one series (of one site, on a subfield).
//
// # Sessions and transactions
//
// A context that carries a transaction (mongo.NewSessionContext with a
// session after StartTransaction, or the context of WithTransaction's
// callback) is refused by every operation, with an error wrapping
// [patterns.ErrInvalid], before it sends anything: each operation is its
// own atomic step, or steps with retries of their own, and says what a
// reader sees between them; a transaction would make them one unit that
// a single write conflict aborts. Call them outside the transaction. A
// session without a transaction is joined: every command carries its id.
package bucket

import "github.com/mongopatterns/mongopatterns/internal/errs"

// pkg starts every error of the package.
const pkg errs.Prefix = "bucket"
