package bucket

import (
	"math"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/mongopatterns/mongopatterns/internal/esr"
)

// The filters, updates, projections, pipelines and commands the store
// sends, as pure builders; commands_test.go pins each of them.

// bucketKey is the key of the index that serves every filter on the
// buckets of a series (see [Buckets.Indexes]): {<meta>: 1, start: 1,
// count: 1}, in ESR order: the meta by equality, start sorted on (and
// matched by equality or range), the count by range.
func (s *settings) bucketKey() (bson.D, error) {
	return esr.Key(esr.Equality(s.metaField), esr.Sort(fieldStart, 1), esr.Range(fieldCount))
}

// startKey is the key of the index that serves DeleteBefore, whose
// filter names no series: {start: 1}.
func startKey() bson.D { return bson.D{{Key: fieldStart, Value: 1}} }

// ttlKey is the key of the TTL index on the buckets' last time.
func ttlKey() bson.D { return bson.D{{Key: fieldLast, Value: 1}} }

// addFilter selects a bucket of the series m for the window that starts
// at start with room for one more measurement. On insert the server
// copies its equality fields (meta and start) into the new bucket.
func (s *settings) addFilter(m bson.RawValue, start bson.DateTime) bson.D {
	return bson.D{
		{Key: s.metaField, Value: m},
		{Key: fieldStart, Value: start},
		{Key: fieldCount, Value: s.hasRoom},
	}
}

// topUpFilter selects the bucket id, of the series m and the window that
// starts at start, if it has room for k more measurements and the
// statement write has not written to it. As an upsert it either tops that
// bucket up or, when the bucket lacks the room (or holds write already),
// fails with a duplicate key on _id (the insert it attempts reuses the
// id): the guard never lets a bucket pass the cap, the failure tells
// which statement lost the room to another writer, and the same statement
// sent twice applies once. Should the bucket have been deleted meanwhile,
// the upsert creates it again, with its meta and start, holding the k
// measurements.
func (s *settings) topUpFilter(id bson.RawValue, m bson.RawValue, start bson.DateTime, k int, write bson.ObjectID) bson.D {
	return bson.D{
		{Key: "_id", Value: id},
		{Key: s.metaField, Value: m},
		{Key: fieldStart, Value: start},
		{Key: fieldCount, Value: bson.D{{Key: "$lte", Value: int32(s.cap - k)}}},
		{Key: fieldWrites, Value: bson.D{{Key: "$ne", Value: write}}},
	}
}

// pushUpdate adds measurements to a bucket: push is a measurement (one
// bson.Raw) or {$each: [...]}, sp their summary, write the id of the
// AddMany statement that sends it (nil for Add). The same update pushes
// them (and write to the bucket's writes), adds their number to the count
// and their sums to the sums, and lowers or raises first, last, min and
// max; $push, $inc, $min and $max create the fields they find missing, so
// it also fills a new bucket.
func (s *settings) pushUpdate(push any, sp *span, write *bson.ObjectID) bson.D {
	n := 1 + len(s.summaryPaths)
	elems := make([]bson.E, 3*n) // one allocation for the three documents
	inc, lower, raise := bson.D(elems[:1:n]), bson.D(elems[n:n+1:2*n]), bson.D(elems[2*n:2*n+1])
	inc[0] = bson.E{Key: fieldCount, Value: sp.n}
	lower[0] = bson.E{Key: fieldFirst, Value: sp.first}
	raise[0] = bson.E{Key: fieldLast, Value: sp.last}
	for i, path := range s.summaryPaths {
		inc = append(inc, bson.E{Key: path.sum, Value: sp.sum[i]})
		lower = append(lower, bson.E{Key: path.min, Value: sp.min[i]})
		raise = append(raise, bson.E{Key: path.max, Value: sp.max[i]})
	}
	pushed := bson.D{{Key: fieldPoints, Value: push}}
	if write != nil {
		pushed = append(pushed, bson.E{Key: fieldWrites, Value: *write})
	}
	return bson.D{
		{Key: "$push", Value: pushed},
		{Key: "$inc", Value: inc},
		{Key: "$min", Value: lower},
		{Key: "$max", Value: raise},
	}
}

// each is the $push argument of several measurements, pts a BSON array of
// them.
func each(pts bson.RawValue) bson.D { return bson.D{{Key: "$each", Value: pts}} }

// newBucket is a bucket document holding pts, a BSON array of
// measurements whose summary is sp: what a series of upserts into a new
// bucket would leave, built at once, and encoded here (in one allocation)
// rather than by the driver. Its id is also the id of the AddMany
// statement that inserts it, its only write:
//
//	{_id, <meta>, start, first, last, count,
//	 summary: {<field>: {min, max, sum}, ...}, measurements: [...], writes: [_id]}
func (s *settings) newBucket(id bson.ObjectID, m bson.RawValue, start bson.DateTime, pts bson.RawValue, sp *span) bson.Raw {
	size := 160 + len(s.metaField) + len(m.Value) + len(pts.Value)
	for _, f := range s.valueFields {
		size += 48 + len(f)
	}
	at, doc := bsoncore.AppendDocumentStart(make([]byte, 0, size))
	doc = bsoncore.AppendObjectIDElement(doc, "_id", id)
	doc = bsoncore.AppendValueElement(doc, s.metaField, bsoncore.Value{Type: bsoncore.Type(m.Type), Data: m.Value})
	doc = bsoncore.AppendDateTimeElement(doc, fieldStart, int64(start))
	doc = bsoncore.AppendDateTimeElement(doc, fieldFirst, int64(sp.first))
	doc = bsoncore.AppendDateTimeElement(doc, fieldLast, int64(sp.last))
	doc = bsoncore.AppendInt32Element(doc, fieldCount, sp.n)
	summary, doc := bsoncore.AppendDocumentElementStart(doc, fieldSummary)
	for i, f := range s.valueFields {
		var field int32
		field, doc = bsoncore.AppendDocumentElementStart(doc, f)
		doc = bsoncore.AppendDoubleElement(doc, "min", sp.min[i])
		doc = bsoncore.AppendDoubleElement(doc, "max", sp.max[i])
		doc = bsoncore.AppendDoubleElement(doc, "sum", sp.sum[i])
		doc, _ = bsoncore.AppendDocumentEnd(doc, field)
	}
	doc, _ = bsoncore.AppendDocumentEnd(doc, summary)
	doc = bsoncore.AppendArrayElement(doc, fieldPoints, pts.Value)
	writes, doc := bsoncore.AppendArrayElementStart(doc, fieldWrites)
	doc = bsoncore.AppendObjectIDElement(doc, "0", id)
	doc, _ = bsoncore.AppendArrayEnd(doc, writes)
	doc, _ = bsoncore.AppendDocumentEnd(doc, at)
	return doc
}

// reinsertBucket is the upsert that inserts the bucket doc unless a bucket with
// its _id exists: how a retry of AddMany sends again an insert whose
// outcome it does not know, so that it applies once whether or not the
// first one did (or does, late). Its filter holds the bucket's _id, meta
// and start by equality: the whole of the shard key the package
// documents, {<meta>: "hashed", start: 1}, without which a sharded
// cluster refuses the upsert before 7.1 (61) and sends it to every shard
// from 7.1. The meta and the start of a bucket never change, so they
// narrow nothing the _id does not; the upsert copies them from the filter
// into the bucket it inserts, and the rest of the bucket goes in
// $setOnInsert.
func (s *settings) reinsertBucket(doc bson.Raw) (filter, update bson.D, err error) {
	elems, err := doc.Elements()
	if err != nil {
		return nil, nil, err
	}
	filter = make(bson.D, 0, 3)
	fields := make(bson.D, 0, len(elems)-1)
	for _, e := range elems {
		switch e.Key() {
		case "_id", s.metaField, fieldStart:
			filter = append(filter, bson.E{Key: e.Key(), Value: e.Value()})
		default:
			fields = append(fields, bson.E{Key: e.Key(), Value: e.Value()})
		}
	}
	return filter, bson.D{{Key: "$setOnInsert", Value: fields}}, nil
}

// window is a window of a series and the AddMany statements that may
// have written to its buckets, for [settings.writtenFilter].
type window struct {
	meta   bson.RawValue
	start  bson.DateTime
	writes bson.A // bson.ObjectID
}

// writtenFilter selects the buckets of the given windows to which one of
// their statements wrote: one branch per window, an equality on the meta
// and the start, bounds of the index {<meta>, start, count}, and the
// statements' ids among the bucket's writes.
func (s *settings) writtenFilter(ws []window) bson.D {
	return anyOf(ws, func(w window) bson.D {
		return bson.D{
			{Key: s.metaField, Value: w.meta},
			{Key: fieldStart, Value: w.start},
			{Key: fieldWrites, Value: bson.D{{Key: "$in", Value: w.writes}}},
		}
	})
}

// writesProjection is what a retry of AddMany reads of a bucket its
// statements may have written to.
func writesProjection() bson.D { return bson.D{{Key: fieldWrites, Value: 1}} }

// windows are windows that AddMany writes to, each in every one of some
// series: a set of series written to in the same windows, so that one
// branch of its read covers them (see [sameWindows]).
type windows struct {
	metas  bson.A // bson.RawValue
	starts bson.A // bson.DateTime
}

// openFilter selects the buckets with room of the given windows: one
// branch per set of series written to in the same windows, each the set
// of its metas (an equality for one), a set of window starts and a range
// on the count, all bounds of the index {<meta>, start, count}. A live
// ingest writes every series in the same window or two: one branch, where
// a branch per series cost FerretDB 2.7 twice the time for ten series.
func (s *settings) openFilter(sets []windows) bson.D {
	return anyOf(sets, func(w windows) bson.D {
		var meta any = bson.D{{Key: "$in", Value: w.metas}}
		if len(w.metas) == 1 {
			meta = w.metas[0]
		}
		return bson.D{
			{Key: s.metaField, Value: meta},
			{Key: fieldStart, Value: bson.D{{Key: "$in", Value: w.starts}}},
			{Key: fieldCount, Value: s.hasRoom},
		}
	})
}

// anyOf is the filter of the branch of each item: the branch itself for
// one item, their $or for more.
func anyOf[T any](items []T, branch func(T) bson.D) bson.D {
	if len(items) == 1 {
		return branch(items[0])
	}
	or := make(bson.A, len(items))
	for i, item := range items {
		or[i] = branch(item)
	}
	return bson.D{{Key: "$or", Value: or}}
}

// openProjection is what AddMany reads of a bucket with room.
func (s *settings) openProjection() bson.D {
	return bson.D{{Key: s.metaField, Value: 1}, {Key: fieldStart, Value: 1}, {Key: fieldCount, Value: 1}}
}

// overlapFilter selects the buckets of the series that may hold
// measurements in [from, to): a bucket of window start s holds times in
// [s, s+Window), so s lies in (from-Window, to); its first and last times
// narrow it further. The equality on the meta and the range on start are
// bounds of the index {<meta>, start, count}.
func (s *settings) overlapFilter(r read) bson.D {
	return append(s.seriesFilter(r.meta), s.windowOverlap(r)...)
}

// windowOverlap selects the buckets, of every series, that may hold
// measurements in [from, to), as overlapFilter does for one series: the
// range on start is the bound of the index {start: 1}.
func (s *settings) windowOverlap(r read) bson.D {
	return bson.D{
		{Key: fieldStart, Value: bson.D{{Key: "$gt", Value: r.from - bson.DateTime(s.window)}, {Key: "$lt", Value: r.to}}},
		{Key: fieldFirst, Value: bson.D{{Key: "$lt", Value: r.to}}},
		{Key: fieldLast, Value: bson.D{{Key: "$gte", Value: r.from}}},
	}
}

// byMetaThenStart sorts buckets by series, then window start: the order
// of the index {<meta>, start, count}.
func (s *settings) byMetaThenStart() bson.D {
	return bson.D{{Key: s.metaField, Value: 1}, {Key: fieldStart, Value: 1}}
}

// seriesFilter selects the buckets (or, in a time-series collection, the
// measurements) of the series m: the equality that leads the index.
func (s *settings) seriesFilter(m bson.RawValue) bson.D {
	return bson.D{{Key: s.metaField, Value: m}}
}

// windowFilter selects the buckets of one window of the series m: a
// prefix of the index {<meta>, start, count}.
func (s *settings) windowFilter(m bson.RawValue, start bson.DateTime) bson.D {
	return bson.D{{Key: s.metaField, Value: m}, {Key: fieldStart, Value: start}}
}

// newestFirst sorts buckets by window start, newest first: the index
// {<meta>, start, count} read backwards.
func newestFirst() bson.D { return bson.D{{Key: fieldStart, Value: -1}} }

// newestByTime sorts the measurements of a time-series collection newest
// first: the index {<meta>: 1, <time>: 1} read backwards.
func (s *settings) newestByTime() bson.D { return bson.D{{Key: s.timeField, Value: -1}} }

// byStart sorts buckets by window start, as the index yields them.
func byStart() bson.D { return bson.D{{Key: fieldStart, Value: 1}} }

// rangeProjection is what Range and Latest read of a bucket.
func rangeProjection() bson.D {
	return bson.D{{Key: fieldStart, Value: 1}, {Key: fieldPoints, Value: 1}}
}

// withoutWrites is what the client path of Summaries reads of a bucket:
// everything but the ids of the statements that wrote its measurements.
func withoutWrites() bson.D { return bson.D{{Key: fieldWrites, Value: 0}} }

// summaryPipeline is the aggregation of Summaries on the server path:
// the rows of rowStages grouped by step, a bucket row by the step of its
// first time.
func (s *settings) summaryPipeline(filter bson.D, g grid) mongo.Pipeline {
	at := bson.D{{Key: "$ifNull", Value: bson.A{"$b.p." + s.timeField, "$b.f"}}}
	return append(s.rowStages(filter, g), s.groupRows(g.stepExpr(at))...)
}

// seriesPipeline is the aggregation of SummariesBySeries on the server
// path (g has one step, [from, to)). It turns each bucket into one row,
// without unwinding its measurements:
//
//   - the first $project gives the bucket's meta m, its count n, w whether
//     its measurements all lie in [from, to), its summary s, and p: when
//     w is false, its measurements in [from, to) (a $filter), else [];
//   - the second, the bucket's share: c measurements; per value field i,
//     sum<i>, min<i> and max<i>, of s when w is true, else of the values
//     in p (the array forms of $sum, $min and $max); and n<i>, how many of
//     the c hold a number there: c when s has the field, else 0, or the
//     values p holds, less one when one is null ($sum, $min and $max skip
//     a null; a value of another type is not a number, and min or max is
//     then not a number either, which [tallyOf] refuses);
//   - $limit of math.MaxInt64 between the two, which drops nothing and
//     streams: FerretDB 2 runs the pipeline faster with it (a window
//     whose buckets all straddle it: 9.2 ms instead of 11.0, median of
//     80 runs), as if it inlined a $project into the one after it,
//     evaluating the $filter once per use of p, and the limit kept the
//     first a stage of its own. (The direct form, one $project whose $let
//     binds w and p once, crashed FerretDB 2.7's PostgreSQL backends:
//     under DocumentDB 0.107 one aborted in aggregate_cursor_first_page,
//     and two that had run it segfaulted in their next command.)
//   - $group by _id keeps one copy of a bucket the server returned twice
//     (a write moved its entry in the index that serves $match: the TTL
//     index on last, or one of the user's), the one with the higher
//     count, the later, which holds the other's measurements and more
//     (n leads, so $max compares the counts first);
//   - the rows with measurements in [from, to) are grouped by meta and
//     sorted by it; [tallyOf] reads the one row of each meta.
//
// A bucket row with c 0 is left out before the grouping: FerretDB 2's
// $min is null over a null (an empty p's min), where MongoDB's skips it.
func (s *settings) seriesPipeline(filter bson.D, g grid) mongo.Pipeline {
	whole := bson.D{{Key: "$and", Value: bson.A{
		bson.D{{Key: "$gte", Value: bson.A{"$" + fieldFirst, g.from}}},
		bson.D{{Key: "$lt", Value: bson.A{"$" + fieldLast, g.to}}},
	}}}
	at := "$$this." + s.timeField
	inWindow := bson.D{{Key: "$and", Value: bson.A{
		bson.D{{Key: "$gte", Value: bson.A{at, g.from}}},
		bson.D{{Key: "$lt", Value: bson.A{at, g.to}}},
	}}}
	ifWhole := func(yes, no any) bson.D { return bson.D{{Key: "$cond", Value: bson.A{"$w", yes, no}}} }
	bucket := bson.D{
		{Key: "n", Value: "$n"},
		{Key: "m", Value: "$m"},
		{Key: "c", Value: ifWhole("$n", bson.D{{Key: "$size", Value: "$p"}})},
	}
	kept := bson.D{{Key: "n", Value: "$n"}, {Key: "m", Value: "$m"}, {Key: "c", Value: "$c"}}
	group := bson.D{
		{Key: "_id", Value: bson.D{{Key: "k", Value: "$b.m"}}},
		{Key: "count", Value: bson.D{{Key: "$sum", Value: "$b.c"}}},
	}
	for i, f := range s.valueFields {
		values := "$p." + f
		for _, kind := range []string{"sum", "min", "max"} {
			col := column(kind, i)
			bucket = append(bucket, bson.E{Key: col, Value: ifWhole("$s."+f+"."+kind, bson.D{{Key: "$" + kind, Value: values}})})
			kept = append(kept, bson.E{Key: col, Value: "$" + col})
			group = append(group, bson.E{Key: col, Value: bson.D{{Key: "$" + kind, Value: "$b." + col}}})
		}
		col := column("n", i)
		bucket = append(bucket, bson.E{Key: col, Value: ifWhole(
			bson.D{{Key: "$cond", Value: bson.A{bson.D{{Key: "$isNumber", Value: "$s." + f + ".sum"}}, "$n", 0}}},
			bson.D{{Key: "$subtract", Value: bson.A{
				bson.D{{Key: "$size", Value: values}},
				bson.D{{Key: "$cond", Value: bson.A{bson.D{{Key: "$in", Value: bson.A{nil, values}}}, 1, 0}}},
			}}},
		)})
		kept = append(kept, bson.E{Key: col, Value: "$" + col})
		group = append(group, bson.E{Key: col, Value: bson.D{{Key: "$sum", Value: "$b." + col}}})
	}
	return mongo.Pipeline{
		{{Key: "$match", Value: filter}},
		{{Key: "$project", Value: bson.D{
			{Key: "m", Value: "$" + s.metaField},
			{Key: "n", Value: "$" + fieldCount},
			{Key: "w", Value: whole},
			{Key: "s", Value: "$" + fieldSummary},
			{Key: "p", Value: bson.D{{Key: "$cond", Value: bson.A{whole, bson.A{}, bson.D{{Key: "$filter", Value: bson.D{
				{Key: "input", Value: "$" + fieldPoints}, {Key: "cond", Value: inWindow},
			}}}}}}},
		}}},
		{{Key: "$limit", Value: int64(math.MaxInt64)}},
		{{Key: "$project", Value: bucket}},
		{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$_id"}, {Key: "b", Value: bson.D{{Key: "$max", Value: kept}}}}}},
		{{Key: "$match", Value: bson.D{{Key: "b.c", Value: bson.D{{Key: "$gt", Value: 0}}}}}},
		{{Key: "$group", Value: group}},
		{{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}},
	}
}

// rowStages are the stages of the summary pipeline before the grouping.
// After $match, each bucket becomes {n, f, w, c, s, p}: n its count, f
// its first time, and either, when its measurements lie in one step and
// in [from, to) (w true), c its count and s its stored summary, or (w
// false) c 1 and p its measurements; one copy of each bucket is kept, in
// b; then the measurements are unwound, only those of the buckets that
// have them (the buckets that straddle a step boundary, from or to), and
// those outside [from, to) dropped. A row is then a bucket (b.s) or a
// measurement (b.p), each counting b.c measurements.
// The row of a bucket matches {b.p: null}: the $max of an expression
// object leaves a missing field out on MongoDB, and makes it null on
// FerretDB 2.
// Only stages and field paths touch the measurements, no per-measurement
// expression: a server evaluates those far more slowly (FerretDB 2
// took 3x the time of this pipeline for windows of mostly whole
// buckets).
func (s *settings) rowStages(filter bson.D, g grid) mongo.Pipeline {
	whole := bson.D{{Key: "$and", Value: bson.A{
		bson.D{{Key: "$gte", Value: bson.A{"$" + fieldFirst, g.from}}},
		bson.D{{Key: "$lt", Value: bson.A{"$" + fieldLast, g.to}}},
		bson.D{{Key: "$eq", Value: bson.A{g.stepExpr("$" + fieldFirst), g.stepExpr("$" + fieldLast)}}},
	}}}
	either := func(ifWhole, otherwise any) bson.D {
		return bson.D{{Key: "$cond", Value: bson.A{whole, ifWhole, otherwise}}}
	}
	// A bucket the server returned twice (a write moved its entry in the
	// index that serves $match) is grouped into one, the copy with the
	// higher count: the later, which holds the other's measurements and
	// more. n leads so that $max compares the counts first.
	return mongo.Pipeline{
		{{Key: "$match", Value: filter}},
		{{Key: "$project", Value: bson.D{
			{Key: "n", Value: "$" + fieldCount},
			{Key: "f", Value: "$" + fieldFirst},
			{Key: "w", Value: whole},
			{Key: "c", Value: either("$"+fieldCount, 1)},
			{Key: "s", Value: either("$"+fieldSummary, "$$REMOVE")},
			{Key: "p", Value: either("$$REMOVE", "$"+fieldPoints)},
		}}},
		{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$_id"}, {Key: "b", Value: bson.D{{Key: "$max", Value: bson.D{
			{Key: "n", Value: "$n"}, {Key: "f", Value: "$f"}, {Key: "w", Value: "$w"}, {Key: "c", Value: "$c"}, {Key: "s", Value: "$s"}, {Key: "p", Value: "$p"},
		}}}}}}},
		{{Key: "$unwind", Value: bson.D{{Key: "path", Value: "$b.p"}, {Key: "preserveNullAndEmptyArrays", Value: true}}}},
		{{Key: "$match", Value: bson.D{{Key: "$or", Value: bson.A{
			bson.D{{Key: "b.p", Value: nil}},
			bson.D{{Key: "b.p." + s.timeField, Value: bson.D{{Key: "$gte", Value: g.from}, {Key: "$lt", Value: g.to}}}},
		}}}}},
	}
}

// groupRows groups the rows of rowStages by key and by w, and sorts the
// groups by key: one group of the buckets' summaries (w true), one of
// the measurements (w false). count is the sum of c; per value field i,
// the sum, min and max of the measurements' values (psum<i>, pmin<i>,
// pmax<i>) or of the buckets' summaries (ssum<i>, smin<i>, smax<i>); and
// n<i> the count of the measurements whose value is a number, which must
// equal count. [tallyOf] adds the two groups of a key up. One group
// holds rows of one kind: FerretDB 2's $min is null over values of which
// one is missing or null, where MongoDB's skips them.
func (s *settings) groupRows(key any) mongo.Pipeline {
	group := bson.D{
		{Key: "_id", Value: bson.D{{Key: "k", Value: key}, {Key: "w", Value: "$b.w"}}},
		{Key: "count", Value: bson.D{{Key: "$sum", Value: "$b.c"}}},
	}
	for i, f := range s.valueFields {
		p, sum := "$b.p."+f, "$b.s."+f+"."
		for _, kind := range []string{"sum", "min", "max"} {
			group = append(group,
				bson.E{Key: column("p"+kind, i), Value: bson.D{{Key: "$" + kind, Value: p}}},
				bson.E{Key: column("s"+kind, i), Value: bson.D{{Key: "$" + kind, Value: sum + kind}}})
		}
		group = append(group, bson.E{Key: column("n", i), Value: bson.D{{Key: "$sum", Value: bson.D{{Key: "$cond", Value: bson.A{
			bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: "$isNumber", Value: p}}, bson.D{{Key: "$isNumber", Value: sum + "sum"}}}}}, "$b.c", 0,
		}}}}}})
	}
	return mongo.Pipeline{
		{{Key: "$group", Value: group}},
		{{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}},
	}
}

// The names of the per-field columns of the summary pipelines: psum0,
// pmin0, pmax0 (of measurements), ssum0, smin0, smax0 (of bucket
// summaries), sum0, min0, max0 (of both, in seriesPipeline), n0 for the
// first value field, and so on. Field indexes, not names, so that no
// user field name can clash.
func column(kind string, i int) string { return kind + strconv.Itoa(i) }

// stepExpr is the start of the step that holds the date t, as an
// aggregation expression: integer arithmetic on dates ($subtract of two
// dates gives milliseconds, of a date and a number a date), so it is
// exact and needs no $dateTrunc.
func (g grid) stepExpr(t any) bson.D {
	return bson.D{{Key: "$subtract", Value: bson.A{t, bson.D{{Key: "$mod", Value: bson.A{
		bson.D{{Key: "$subtract", Value: bson.A{t, g.from}}}, g.step,
	}}}}}}
}

// expiredFilter selects the buckets, of the series meta (of every series
// when meta is nil), whose measurements are all before t. A bucket's
// start is at most its last time, so the range on start adds nothing to
// the match: it is there so that an index leads with it ({<meta>, start,
// ...} for a series, {start: 1} for all).
func (s *settings) expiredFilter(meta *bson.RawValue, t bson.DateTime) bson.D {
	var filter bson.D
	if meta != nil {
		filter = bson.D{{Key: s.metaField, Value: *meta}}
	}
	return append(filter,
		bson.E{Key: fieldStart, Value: bson.D{{Key: "$lt", Value: t}}},
		bson.E{Key: fieldLast, Value: bson.D{{Key: "$lt", Value: t}}})
}

// beforeFilter selects the measurements of a time-series collection, of
// the series meta (of every series when meta is nil), before t.
func (s *settings) beforeFilter(meta *bson.RawValue, t bson.DateTime) bson.D {
	var filter bson.D
	if meta != nil {
		filter = bson.D{{Key: s.metaField, Value: *meta}}
	}
	return append(filter, bson.E{Key: s.timeField, Value: bson.D{{Key: "$lt", Value: t}}})
}

// createCommand creates the time-series collection: bucketed by
// granularity, or by Window (else the server's default), expiring after
// Config.TTL.
func (s *settings) createCommand() bson.D {
	opts := bson.D{{Key: "timeField", Value: s.timeField}, {Key: "metaField", Value: s.metaField}}
	switch {
	case s.granularity != "":
		opts = append(opts, bson.E{Key: "granularity", Value: string(s.granularity)})
	case s.window > 0:
		span := int32(s.window / 1000)
		opts = append(opts, bson.E{Key: "bucketMaxSpanSeconds", Value: span}, bson.E{Key: "bucketRoundingSeconds", Value: span})
	}
	cmd := bson.D{{Key: "create", Value: s.coll.Name()}, {Key: "timeseries", Value: opts}}
	if s.ttl > 0 {
		cmd = append(cmd, bson.E{Key: "expireAfterSeconds", Value: s.ttl})
	}
	return cmd
}

// timeSeriesKey is the key of the index of a time-series collection
// that Range, Summaries and DeleteSeriesBefore use: {<meta>: 1, <time>:
// 1}, in ESR order: the meta by equality, the time sorted on and matched
// by range.
func (s *settings) timeSeriesKey() (bson.D, error) {
	return esr.Key(esr.Equality(s.metaField), esr.Sort(s.timeField, 1))
}

// byName selects a collection in listCollections.
func byName(name string) bson.D { return bson.D{{Key: "name", Value: name}} }

// intervalFilter is the filter of a series' measurements in [from, to)
// in a time-series collection.
func (s *settings) intervalFilter(r read) bson.D {
	return append(s.seriesFilter(r.meta), s.timeFilter(r)...)
}

// byTime sorts measurements of a time-series collection by time.
func (s *settings) byTime() bson.D { return bson.D{{Key: s.timeField, Value: 1}} }

// timeSeriesPipeline is the aggregation of TimeSeries.Summaries.
func (s *settings) timeSeriesPipeline(filter bson.D, g grid) mongo.Pipeline {
	return s.groupMeasurements(filter, g.stepExpr("$"+s.timeField))
}

// timeSeriesSeriesPipeline is the aggregation of
// TimeSeries.SummariesBySeries.
func (s *settings) timeSeriesSeriesPipeline(filter bson.D) mongo.Pipeline {
	return s.groupMeasurements(filter, "$"+s.metaField)
}

// groupMeasurements is $match, then the measurements of a time-series
// collection grouped by key (as {k: key}, the _id that [yieldRows]
// reads) and sorted: count is their number; per value
// field i, the sum, min and max of its values (psum<i>, pmin<i>,
// pmax<i>, as in [settings.groupRows]), and n<i> the count of the
// measurements whose value is a number, which must equal count.
func (s *settings) groupMeasurements(filter bson.D, key any) mongo.Pipeline {
	group := bson.D{{Key: "_id", Value: bson.D{{Key: "k", Value: key}}}, {Key: "count", Value: bson.D{{Key: "$sum", Value: 1}}}}
	for i, f := range s.valueFields {
		v := "$" + f
		group = append(group,
			bson.E{Key: column("psum", i), Value: bson.D{{Key: "$sum", Value: v}}},
			bson.E{Key: column("pmin", i), Value: bson.D{{Key: "$min", Value: v}}},
			bson.E{Key: column("pmax", i), Value: bson.D{{Key: "$max", Value: v}}},
			bson.E{Key: column("n", i), Value: bson.D{{Key: "$sum", Value: bson.D{{Key: "$cond", Value: bson.A{
				bson.D{{Key: "$isNumber", Value: v}}, 1, 0,
			}}}}}})
	}
	return mongo.Pipeline{
		{{Key: "$match", Value: filter}},
		{{Key: "$group", Value: group}},
		{{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}},
	}
}

// timeFilter is the filter of the measurements, of every series, in
// [from, to) in a time-series collection.
func (s *settings) timeFilter(r read) bson.D {
	return bson.D{{Key: s.timeField, Value: bson.D{{Key: "$gte", Value: r.from}, {Key: "$lt", Value: r.to}}}}
}
