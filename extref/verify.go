package extref

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
	"github.com/mongopatterns/mongopatterns/internal/keyset"
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
}

// Verify reads every copy in every target and compares it with its source,
// field by field and with MongoDB's equality (numbers by value, a missing
// field equal to null), the comparison Sync's filters make. It writes
// nothing and returns one report per target, in the order of
// [Config.Targets].
//
// It works in pages of [Config.BatchSize] target documents in _id order,
// with bounded memory: per page one find of the documents after the last
// _id read ({_id: {$gt: last}}, sorted by _id) and one find of their
// sources by _id (none when no copy of the page has an id), plus one find
// per target at the end, of the _ids of other BSON types, when the last
// page was not the first (MongoDB's $gt compares one type only). It reads
// every document whose copy path holds something, so it scans each target
// collection. Each document is counted once, however others rewrite the
// target while Verify reads it (a plain cursor may return a rewritten
// document again: FerretDB 2.x's does). It reads no snapshot: a copy
// written or synced while Verify runs may be counted before or after the
// change, and a document inserted or deleted meanwhile may be counted or
// not. A copy whose source is missing (deleted), or that has no id, is an
// orphan, not stale. It needs no optional feature of the server.
//
// A failed read (a lost connection, ctx's deadline) ends Verify with an
// error and the counts made so far, which are incomplete: a nil error
// comes only with complete reports. Verify writes nothing, so it is safe
// to run again.
func (r *Ref[S]) Verify(ctx context.Context) ([]Report, error) {
	reports, err := r.scan(ctx, false)
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
// follow _id, not a cursor. Orphans are counted and left as
// they are. Repair is safe to run again after any error; with an error, the
// reports are those of Verify so far, and Repaired counts what the syncs
// wrote before it (as Sync's counts do).
func (r *Ref[S]) Repair(ctx context.Context) ([]Report, error) {
	reports, err := r.scan(ctx, true)
	if err != nil {
		return reports, r.fail("Repair", nil, err)
	}
	return reports, nil
}

// scan verifies (and with repair, repairs) every target in turn.
func (r *Ref[S]) scan(ctx context.Context, repair bool) ([]Report, error) {
	reports := make([]Report, len(r.targets))
	for i, t := range r.targets {
		reports[i].Target = t.Target
	}
	for i, t := range r.targets {
		if err := r.scanTarget(ctx, t, i, reports, repair); err != nil {
			return reports, fmt.Errorf("%s: %w", t.Target, err)
		}
	}
	return reports, nil
}

func (r *Ref[S]) scanTarget(ctx context.Context, t target, i int, reports []Report, repair bool) error {
	for batch, err := range keyset.Pages(ctx, t.coll, t.path.withCopies(), r.batch, 0, options.Find().SetProjection(t.path.copiesOnly())) {
		if err == nil {
			err = r.check(ctx, t, i, batch, reports, repair)
		}
		if err != nil {
			return err
		}
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
			case r.staleCopy(cp, src.copy):
				rep.Stale++
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
		out[bsonid.Key(id)] = source{id: bson.RawValue{Type: id.Type, Value: slices.Clone(id.Value)}, copy: c}
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
