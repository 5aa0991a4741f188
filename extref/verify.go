package extref

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/internal/keyset"
	"github.com/mongopatterns/mongopatterns/internal/txn"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Report is what [Ref.Verify] or [Ref.Repair] found in one target.
type Report struct {
	Target    Target
	Documents int64 // documents holding at least one copy
	Copies    int64 // copies compared with their source
	Stale     int64 // copies that differed from their source when read
	Orphans   int64 // copies with no id (missing or null) or whose source does not exist
	Repaired  int64 // documents of this target rewritten by Repair's syncs

	// StaleCopies names the first stale copies the scan found, at most
	// [Config.ReportSample] of them ([DefaultReportSample] unless
	// configured), in the scan's order: target documents by _id, the
	// copies of one document in array order (a document is named once
	// per stale copy it holds). Stale counts them all. In Repair's report
	// they are copies that Repair synced: the documents it found stale
	// and repaired (unless their source was deleted before its sync, which
	// leaves them as they were, or during it, which may leave them holding
	// a value older than the source's last: orphans either way, for the
	// next Verify). Repaired may count more documents than
	// were found stale: a sync rewrites its source's stale copies
	// everywhere, in pages and targets not yet scanned too, which the scan
	// then finds fresh; their _ids are not known (an update returns
	// counts only).
	StaleCopies []CopyID
	// OrphanCopies names the first orphan copies the scan found, at most
	// [Config.ReportSample] of them, in the same order as StaleCopies.
	// Orphans counts them all.
	OrphanCopies []CopyID
}

// CopyID names one copy that a [Report] counts. Its ids are the values
// stored, BSON type included, so that a filter finds their documents:
// {_id: c.Document} in the target, and [Ref.Sync](ctx, c.Source) syncs a
// stale copy's source.
type CopyID struct {
	// Document is the _id of the target document that holds the copy.
	Document bson.RawValue
	// Source is the _id of the copy's source, for a stale copy; for an
	// orphan, the id the copy holds: the _id of no source, a BSON null, or
	// nothing (Type 0) when the copy has no id field.
	Source bson.RawValue
}

// String writes the copy's ids as errors name ids: `document 7, source
// 3`, or `document 7, no source id` when the copy has none.
func (c CopyID) String() string {
	if c.Source.Type == 0 {
		return "document " + bsonid.Text(c.Document) + ", no source id"
	}
	return "document " + bsonid.Text(c.Document) + ", source " + bsonid.Text(c.Source)
}

// ScanOptions tunes [Ref.Verify] and [Ref.Repair]; give at most one.
// The zero value, as giving none, reports nothing.
type ScanOptions struct {
	// Progress, when set, is called after each page of target documents
	// (once its copies are compared and, in Repair, its stale sources
	// synced), from the goroutine of the call, with the target documents
	// read so far, every target counted, and the total found holding
	// copies when the scan started (grown if more turn up), as
	// versioning's MigrateOptions.Progress is. Setting it costs one count
	// command per target at the start.
	Progress func(done, total int)
}

// Verify reads every copy in every target and compares it with its source,
// field by field and with MongoDB's equality (numbers by value, a missing
// field equal to null), the comparison Sync's filters make. It writes
// nothing and returns one report per target, in the order of
// [Config.Targets].
//
// It works in pages of [Config.BatchSize] target documents in _id order,
// with bounded memory: per page one find of the documents after the last
// _id read ({_id: {$gt: last}} or of a BSON type sorted after last's, as
// MongoDB's $gt compares one type only; sorted by _id) and one find of
// their sources by _id (none when no copy of the page has an id); the
// scan of a target ends at its first page shorter than BatchSize (an
// empty one when the last is full), after which, unless it is the first,
// one more find reads the greatest _id, and the pages go on when it is of
// a type sorted after timestamps (JavaScript, a DBPointer, MaxKey). Every
// _id is reached, a NaN and a symbol included. It reads
// every document whose copy path holds something, so it scans each target
// collection. Each document is counted once, however others rewrite the
// target while Verify reads it (a plain cursor may return a rewritten
// document again: FerretDB 2.x's does). It reads no snapshot: a copy
// written or synced while Verify runs may be counted before or after the
// change, and a document inserted or deleted meanwhile may be counted or
// not. A copy whose source is missing (deleted), or that has no id, is an
// orphan, not stale. Each report names the first stale and orphan copies
// it found ([Report.StaleCopies], [Report.OrphanCopies]), from the pages
// it read: no command more. It needs no optional feature of the server.
//
// A failed read (a lost connection, ctx's deadline) ends Verify with an
// error and the counts made so far, which are incomplete: a nil error
// comes only with complete reports. Verify writes nothing, so it is safe
// to run again. opts may report progress ([ScanOptions]); more than one
// is refused with [patterns.ErrInvalid], nothing sent.
func (r *Ref[S]) Verify(ctx context.Context, opts ...ScanOptions) (_ []Report, err error) {
	ctx, op := r.start(ctx, "Verify")
	defer op.Finish(&err)
	if err := txn.Refuse(ctx); err != nil {
		return nil, r.fail("Verify", nil, err)
	}
	o, err := scanOptions(opts)
	if err != nil {
		return nil, r.fail("Verify", nil, err)
	}
	reports, err := r.scan(ctx, false, o)
	if err != nil {
		return reports, r.fail("Verify", nil, err)
	}
	return reports, nil
}

// Repair does what [Ref.Verify] does and, after each page, syncs every
// source that has stale copies in it (as [Ref.Sync] does: its copies in
// every target, so a later target's report may find fewer stale copies
// than existed when Repair started). Report.Repaired counts the documents
// those syncs rewrote in each target; with no concurrent writers, a second
// Verify finds no stale copies. Round trips: those of Verify plus those of
// one Sync per source with stale copies. Each document is counted once,
// although the syncs rewrite documents that later pages hold: the pages
// follow _id, not a cursor. Its reports name the first stale copies it
// found ([Report.StaleCopies]), which its syncs repaired: the documents an
// operator can check. Orphans are counted, named and left as they are.
// Repair is safe to run again after any error; with an error, the
// reports are those of Verify so far, and Repaired counts what the syncs
// wrote before it (as Sync's counts do). opts may report progress, as
// Verify's do.
func (r *Ref[S]) Repair(ctx context.Context, opts ...ScanOptions) (_ []Report, err error) {
	ctx, op := r.start(ctx, "Repair")
	defer op.Finish(&err)
	op.Affected(0)
	if err := txn.Refuse(ctx); err != nil {
		return nil, r.fail("Repair", nil, err)
	}
	o, err := scanOptions(opts)
	if err != nil {
		return nil, r.fail("Repair", nil, err)
	}
	reports, err := r.scan(ctx, true, o)
	if err != nil {
		return reports, r.fail("Repair", nil, err)
	}
	return reports, nil
}

// scanOptions returns the one ScanOptions given, or the zero value.
func scanOptions(opts []ScanOptions) (ScanOptions, error) {
	switch len(opts) {
	case 0:
		return ScanOptions{}, nil
	case 1:
		return opts[0], nil
	}
	return ScanOptions{}, errs.Invalid("%d ScanOptions: give at most one", len(opts))
}

// progress is where a scan stands, for ScanOptions.Progress.
type progress struct {
	report      func(done, total int)
	done, total int
}

// page counts n more target documents read and reports them.
func (p *progress) page(n int) {
	if p.report != nil && n > 0 {
		p.done += n
		p.total = max(p.total, p.done)
		p.report(p.done, p.total)
	}
}

// scan verifies (and with repair, repairs) every target in turn.
func (r *Ref[S]) scan(ctx context.Context, repair bool, o ScanOptions) ([]Report, error) {
	reports := make([]Report, len(r.targets))
	for i, t := range r.targets {
		reports[i].Target = t.Target
	}
	prog := progress{report: o.Progress}
	if prog.report != nil {
		op := patterns.OperationFrom(ctx)
		for _, t := range r.targets {
			op.Sent(1)
			n, err := t.coll.CountDocuments(ctx, t.path.withCopies())
			if err != nil {
				return reports, fmt.Errorf("%s: count the documents holding copies: %w", t.Target, err)
			}
			prog.total += int(n)
		}
	}
	for i, t := range r.targets {
		if err := r.scanTarget(ctx, t, i, reports, repair, &prog); err != nil {
			return reports, fmt.Errorf("%s: %w", t.Target, err)
		}
	}
	return reports, nil
}

func (r *Ref[S]) scanTarget(ctx context.Context, t target, i int, reports []Report, repair bool, prog *progress) error {
	for batch, err := range keyset.Pages(ctx, t.coll, t.path.withCopies(), r.batch, 0, options.Find().SetProjection(t.path.copiesOnly())) {
		if err == nil {
			err = r.check(ctx, t, i, batch, reports, repair)
		}
		if err != nil {
			return err
		}
		prog.page(len(batch))
	}
	return nil
}

// check compares one batch of documents of target i with their sources.
func (r *Ref[S]) check(ctx context.Context, t target, i int, batch []bson.Raw, reports []Report, repair bool) error {
	ids := map[string]bson.RawValue{}
	for _, doc := range batch {
		for cp := range t.path.copies(doc) {
			if id := lookup(cp, r.ct.id); !nullish(id) {
				ids[bsonid.Key(id)] = id
			}
		}
	}
	var sources map[string]source
	if len(ids) > 0 {
		var err error
		if sources, err = r.sources(ctx, ids); err != nil {
			return err
		}
	}
	rep := &reports[i]
	staleIDs := map[string]bson.RawValue{}
	for _, doc := range batch {
		held := false
		for cp := range t.path.copies(doc) {
			held = true
			rep.Copies++
			id := lookup(cp, r.ct.id)
			key := bsonid.Key(id)
			src, ok := sources[key]
			switch {
			case !ok || nullish(id):
				rep.Orphans++
				rep.OrphanCopies = r.note(rep.OrphanCopies, doc, id)
			case r.staleCopy(cp, src.copy):
				rep.Stale++
				rep.StaleCopies = r.note(rep.StaleCopies, doc, src.id)
				staleIDs[key] = src.id
			}
		}
		if held {
			rep.Documents++
		}
	}
	if !repair {
		return nil
	}
	for _, id := range staleIDs {
		counts, err := r.sync(ctx, id)
		for j, n := range counts {
			reports[j].Repaired += n.Modified
		}
		if err != nil && !errors.Is(err, patterns.ErrNotFound) {
			return fmt.Errorf("source %s: %w", bsonid.Text(id), err)
		}
	}
	return nil
}

// note appends to list, unless it holds [Config.ReportSample] copies
// already, the copy of doc (a target document of a page) whose source id
// is src, both cloned so that the page can go.
func (r *Ref[S]) note(list []CopyID, doc bson.Raw, src bson.RawValue) []CopyID {
	if len(list) >= r.sample {
		return list
	}
	return append(list, CopyID{Document: clone(doc.Lookup("_id")), Source: clone(src)})
}

// clone returns a copy of v that does not share its bytes (nil for a
// value of no bytes, a null, as the driver's encoder gives it).
func clone(v bson.RawValue) bson.RawValue {
	if len(v.Value) == 0 {
		return bson.RawValue{Type: v.Type}
	}
	return bson.RawValue{Type: v.Type, Value: slices.Clone(v.Value)}
}

// source is a source document as Verify compares it: its _id and its copy.
type source struct {
	id   bson.RawValue
	copy copyValue
}

// sources reads the sources with the given ids in one find, keyed by
// [bsonid.Key] of their _id.
func (r *Ref[S]) sources(ctx context.Context, ids map[string]bson.RawValue) (map[string]source, error) {
	in := make(bson.A, 0, len(ids))
	for _, id := range ids {
		in = append(in, id)
	}
	out := make(map[string]source, len(in))
	err := r.findSources(ctx, in, func(id bson.RawValue, _ S, c copyValue) {
		out[bsonid.Key(id)] = source{id: clone(id), copy: c}
	})
	return out, err
}

// staleCopy reports whether a copy differs from c in a copied field.
func (r *Ref[S]) staleCopy(cp bson.Raw, c copyValue) bool {
	for _, f := range r.ct.fields {
		if stale(lookup(cp, f), c.want(f)) {
			return true
		}
	}
	return false
}
