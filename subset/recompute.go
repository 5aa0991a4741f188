package subset

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/internal/obs"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// parentState is what a recomputation reads from a parent: the revision
// and the ids in the subset, and on a plan that measures, the parent's
// size without them.
type parentState struct {
	rev      int64
	hasRev   bool            // a stamped revision (see unstamped): false until the first recomputation stamps the parent
	ids      []bson.RawValue // the ids in the subset, in its order
	held     map[string]bool // bsonid.Key of ids
	notArray bool            // the subset field holds something other than an array, or is absent (a projection of <field>.<idField> leaves out a null)
	rest     int             // plan.measure: the parent's size less its subset and revision elements
	count    int64           // the count field
	hasCount bool            // false until the first recomputation with a count field
	pushed   bson.RawValue   // plan.push: the push field (Config.PushedField); the zero value when absent
}

// holds reports whether the subset holds the item with the given id (the
// same id to the server: 7 is 7.0).
func (s parentState) holds(id bson.RawValue) bool { return s.held[bsonid.Key(id)] }

// readParent reads the parent that filter matches (one findOne): its
// revision and the ids in its subset (the whole parent, when p.measure).
// No match gives patterns.ErrNotFound.
func (r *Repo[P, I]) readParent(ctx context.Context, p plan, filter bson.D) (parentState, error) {
	opts := options.FindOne()
	if proj := r.cmd.parentState(p); proj != nil {
		opts.SetProjection(proj)
	}
	raw, err := r.findParent(ctx, filter, opts)
	if err != nil {
		return parentState{}, err
	}
	return r.decodeParent(raw)
}

// announceParent is the push plan's read of the parent, in the
// incarnation inc, by a recomputation that a push made start again: one
// findAndModify (retried after a transient failure) that sets the push
// field to true (commands.announce), so that no push lands until a
// compare-and-set, and returns the parent's state as readParent does,
// and true. When no parent of that incarnation matches (deleted, and
// maybe created again) it announces nothing: it reads the parent as
// readParent does (one command more) and returns false.
func (r *Repo[P, I]) announceParent(ctx context.Context, p plan, parentID any, inc int64) (parentState, bool, error) {
	raw, err := write(ctx, func() (bson.Raw, error) {
		return r.parents.FindOneAndUpdate(ctx, r.cmd.inIncarnation(parentID, inc), r.cmd.announce(), r.cmd.announced(p)).Raw()
	})
	if errors.Is(err, mongo.ErrNoDocuments) {
		st, err := r.readParent(ctx, p, r.cmd.parent(parentID))
		return st, false, err
	}
	if err != nil {
		return parentState{}, false, fmt.Errorf("read the parent: %w", err)
	}
	patterns.OperationFrom(ctx).Affected(1) // as the stamp: a findAndModify wrote the parent
	st, err := r.decodeParent(raw)
	return st, err == nil, err
}

// findParent reads the parent that filter matches (one findOne, with
// opts): errNoParent when none does.
func (r *Repo[P, I]) findParent(ctx context.Context, filter bson.D, opts *options.FindOneOptionsBuilder) (bson.Raw, error) {
	patterns.OperationFrom(ctx).Sent(1)
	raw, err := r.parents.FindOne(ctx, filter, opts).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, errNoParent
	}
	if err != nil {
		return nil, fmt.Errorf("read the parent: %w", err)
	}
	return raw, nil
}

// decodeParent reads the parentState of a parent as read (the
// projection of parentState, or the whole parent when measuring).
func (r *Repo[P, I]) decodeParent(raw bson.Raw) (parentState, error) {
	var st parentState
	st.rest = len(raw)
	if v, err := raw.LookupErr(r.cfg.RevisionField); err == nil {
		st.rest -= elemSize(r.cfg.RevisionField, len(v.Value))
		// Stamped: an int64 in [minStamp, maxStamp); anything else is
		// stamped first (see unstamped).
		if n, ok := v.Int64OK(); ok && n >= minStamp && n < maxStamp {
			st.rev, st.hasRev = n, true
		}
	}
	if r.cfg.CountField != "" {
		if v, err := raw.LookupErr(r.cfg.CountField); err == nil {
			st.rest -= elemSize(r.cfg.CountField, len(v.Value))
			st.count, st.hasCount = v.AsInt64OK()
		}
	}
	if v, err := raw.LookupErr(r.cfg.PushedField); err == nil {
		st.pushed = v
	}
	v, err := raw.LookupErr(r.cfg.Field)
	if err != nil {
		st.notArray = true
		return st, nil
	}
	st.rest -= elemSize(r.cfg.Field, len(v.Value))
	arr, ok := v.ArrayOK()
	if !ok {
		st.notArray = true
		return st, nil
	}
	vals, err := arr.Values()
	if err != nil {
		return st, fmt.Errorf("the parent's %s: %w", r.cfg.Field, err)
	}
	st.held = make(map[string]bool, len(vals))
	for _, v := range vals {
		if doc, ok := v.DocumentOK(); ok {
			if id, err := doc.LookupErr(r.cfg.IDField); err == nil {
				st.ids = append(st.ids, id)
				st.held[bsonid.Key(id)] = true
			}
		}
	}
	return st, nil
}

// errStamped is what stamp returns when its filter matched nothing:
// another recomputation stamped the parent first, or it is gone.
var errStamped = errors.New("the parent has a stamped revision, or is gone")

// stamp gives the parent, which has no stamped revision (no
// recomputation has written it since it was created), a revision that
// names its incarnation, newIncarnation(), and returns its state as
// stamped: one findAndModify, filtered on a revision missing, null or
// below every stamp (see unstamped) and retried after a transient
// failure, which returns the whole parent (FerretDB 1.x implements no
// projection in findAndModify; the stamp is once per parent). From then
// on the compare-and-sets of recomputations match that incarnation alone:
// a parent deleted and created again (unstamped, or with another stamp)
// matches none of them. Without it, a compare-and-set of a parent read
// without a revision, or with the one the application created it with,
// would match a parent created again meanwhile, and write into it the
// items read from the deleted one. It returns errStamped when the filter
// matches nothing.
func (r *Repo[P, I]) stamp(ctx context.Context, p plan, parentID any) (parentState, error) {
	raw, err := write(ctx, func() (bson.Raw, error) {
		return r.parents.FindOneAndUpdate(ctx, r.cmd.unstamped(parentID), r.cmd.stamp(p, newIncarnation(), bson.NewObjectID()), stamped).Raw()
	})
	if errors.Is(err, mongo.ErrNoDocuments) {
		return parentState{}, errStamped
	}
	if err != nil {
		return parentState{}, fmt.Errorf("stamp the parent's revision: %w", err)
	}
	patterns.OperationFrom(ctx).Affected(1)
	return r.decodeParent(raw)
}

// stamped are the options of the stamp: the parent as updated. The
// driver reads them, never changes them, so one value serves every call.
var stamped = options.FindOneAndUpdate().SetReturnDocument(options.After)

// ensureStamped returns st when it is stamped; otherwise it stamps the
// parent (one findAndModify) and returns its state as stamped, reading it
// again (one find) when another call stamped it first, until it reads a
// stamped parent: patterns.ErrConflict after maxAttempts parents created
// again meanwhile, patterns.ErrNotFound for none.
func (r *Repo[P, I]) ensureStamped(ctx context.Context, p plan, parentID any, st parentState) (parentState, error) {
	for attempt := 1; !st.hasRev; attempt++ {
		if attempt > maxAttempts {
			return parentState{}, fmt.Errorf("the parent was created again under %d stamps; call Rebuild: %w", maxAttempts, patterns.ErrConflict)
		}
		got, err := r.stamp(ctx, p, parentID)
		if errors.Is(err, errStamped) {
			got, err = r.readParent(ctx, p, r.cmd.parent(parentID))
		}
		if err != nil {
			return parentState{}, err
		}
		st = got
	}
	return st, nil
}

// errRecreated is what a recomputation bound to an incarnation returns
// when it reads the parent in another: the parent it read was deleted
// and created again.
var errRecreated = errors.New("the parent was deleted and created again")

// incarnation returns the incarnation of a stamped parent, its revision's
// stamp (the revision less its low 32 bits, see newIncarnation), and 0
// for a parent without a stamped revision.
func (s parentState) incarnation() int64 {
	if !s.hasRev {
		return 0
	}
	return s.rev &^ (minStamp - 1)
}

// newIncarnation returns a random multiple of 2^32 from 2^32 to 2^62, the
// revision a parent is stamped with: the low 32 bits count its
// recomputations, the others tell it from a parent of the same _id
// deleted before (two incarnations meet one in 2^30).
func newIncarnation() int64 { return (1 + rand.Int64N(1<<30)) << 32 }

// top reads the parent's first Cap items in the configured order: one
// find on the index of Indexes, in a single batch.
func (r *Repo[P, I]) top(ctx context.Context, parentID any) ([]bson.Raw, error) {
	top, err := r.findItems(ctx, r.cmd.items(parentID), r.cmd.firstN(r.cfg.Cap))
	if err != nil {
		return nil, fmt.Errorf("read the first %d items: %w", r.cfg.Cap, err)
	}
	return top, nil
}

// findItems sends one find to the items collection and reads all it
// matches (every getMore counted with the find, as a command of the
// operation of ctx); it returns an empty slice, not nil, when nothing
// matches.
func (r *Repo[P, I]) findItems(ctx context.Context, filter bson.D, opts ...options.Lister[options.FindOptions]) ([]bson.Raw, error) {
	op := patterns.OperationFrom(ctx)
	op.Sent(1)
	cur, err := r.items.Find(ctx, filter, opts...)
	if err != nil {
		return nil, err
	}
	found := []bson.Raw{}
	if err := obs.All(ctx, op, cur, &found); err != nil {
		return nil, err
	}
	return found, nil
}

// recompute sets the parent's subset to the first Cap items of the items
// collection, with a compare-and-set on the revision; st is the parent as
// read before, and fresh says whether st was read after the change the
// caller made to the items. With inc (an incarnation, see
// parentState.incarnation) it writes that incarnation alone, and returns
// errRecreated when it reads the parent in another (deleted and created
// again: an Add's items must not go into a parent it never read); with
// inc 0 it follows the parent through its re-creations, recomputing the
// one it finds. Each attempt sends a find and an update
// (retried after a transient failure); a lost race adds a readParent. It
// returns patterns.ErrNotFound when the parent is gone and
// patterns.ErrTooLarge when the subset would take the parent past 16 MiB
// (measured here on a plan that measures, refused by the server
// otherwise).
//
// Only recomputations move the revision (a push leaves it alone), each by
// one, from the value it read. So the loop stops as soon as one that must
// have seen the change has succeeded: once the revision has moved two
// past the first value read after the change (floor). The write that made
// it floor+2 was guarded by floor+1, which was written after that read, so
// it read the parent, and then the items, after the change; and what it
// wrote is the first Cap items as it read them, merged (on the push plan)
// with what was pushed since. So a caller sends at most two
// compare-and-sets after a fresh read (three after a stale one), however
// many writers compete and however many pushes arrive, and one more
// after a push that left the subset full in its window (casFilter: it
// may have sorted out an item the find did not read): that failure leaves the revision as it was, and the
// recomputation announces itself at its next read (announceParent, one
// command more), from which on no push lands until a compare-and-set
// (which moves the revision and ends the announcement), so that no push
// makes it start again. maxAttempts only
// guards against writers that move the revision otherwise.
func (r *Repo[P, I]) recompute(ctx context.Context, p plan, parentID any, st parentState, fresh bool, inc int64) error {
	floor := int64(-1) // the first revision read after the change
	if fresh && st.hasRev {
		floor = st.rev
	}
	announced := false // st was read by announceParent
	for attempt := 1; ; attempt++ {
		if inc != 0 && st.incarnation() != inc {
			return errRecreated
		}
		if !st.hasRev {
			var err error
			if st, err = r.ensureStamped(ctx, p, parentID, st); err != nil {
				return err
			}
			if floor < 0 || st.incarnation() != floor&^(minStamp-1) {
				floor = st.rev // read after the change, as every read here
			}
		}
		top, err := r.top(ctx, parentID)
		if err != nil {
			return err
		}
		if p.measure {
			if size := st.rest + elemSize(r.cfg.Field, arraySize(top)) + elemSize(r.cfg.RevisionField, 8) + r.countSize(); size > patterns.MaxDocumentSize {
				return errs.TooLarge("with its first %d items the parent would be %d bytes", len(top), size)
			}
		}
		n, err := r.countItems(ctx, parentID)
		if err != nil {
			return err
		}
		var stale []bson.RawValue
		if p.push {
			stale = st.stale(r.cfg.IDField, top)
		}
		update := r.cmd.recomputation(p, top, stale, n, bson.NewObjectID())
		res, err := write(ctx, func() (*mongo.UpdateResult, error) {
			return r.parents.UpdateOne(ctx, r.cmd.casFilter(p, parentID, st, announced), update)
		})
		if err != nil {
			return fmt.Errorf("set the subset: %w", err)
		}
		if res.MatchedCount == 1 {
			return nil
		}
		patterns.OperationFrom(ctx).Lost()
		if attempt == maxAttempts {
			return fmt.Errorf("the subset changed under %d compare-and-sets; call Rebuild: %w", attempt, patterns.ErrConflict)
		}
		prev := st
		if announced {
			st, announced, err = r.announceParent(ctx, p, parentID, prev.incarnation())
		} else {
			st, err = r.readParent(ctx, p, r.cmd.parent(parentID))
		}
		if err != nil {
			return err
		}
		if !announced && p.push && st.hasRev && st.rev == prev.rev {
			// The revision as read: a push since the read left the
			// subset full (casFilter). Announced, the
			// recomputation holds pushes off from its read on.
			if st, announced, err = r.announceParent(ctx, p, parentID, st.incarnation()); err != nil {
				return err
			}
		}
		switch {
		case !st.hasRev: // created again: stamped at the next attempt (or, bound to inc, errRecreated)
		case floor < 0 || st.incarnation() != floor&^(minStamp-1): // or created again, and stamped
			floor = st.rev
		case st.rev >= floor+2:
			return nil
		}
	}
}

// countItems counts the parent's items for the count field (one
// aggregate, served by the index of Indexes), when there is one; it
// sends nothing otherwise.
func (r *Repo[P, I]) countItems(ctx context.Context, parentID any) (int64, error) {
	if r.cfg.CountField == "" {
		return 0, nil
	}
	patterns.OperationFrom(ctx).Sent(1)
	n, err := r.items.CountDocuments(ctx, r.cmd.items(parentID))
	if err != nil {
		return 0, fmt.Errorf("count the items: %w", err)
	}
	return n, nil
}

// countSize is the size of the count element, 0 without a count field.
func (r *Repo[P, I]) countSize() int {
	if r.cfg.CountField == "" {
		return 0
	}
	return elemSize(r.cfg.CountField, 8)
}

// stale returns the ids the subset held when st was read that top does
// not hold: the elements a merge drops.
func (s parentState) stale(idField string, top []bson.Raw) []bson.RawValue {
	inTop := make(map[string]bool, len(top))
	for _, d := range top {
		if id, err := d.LookupErr(idField); err == nil {
			inTop[bsonid.Key(id)] = true
		}
	}
	out := []bson.RawValue{}
	for _, id := range s.ids {
		if !inTop[bsonid.Key(id)] {
			out = append(out, id)
		}
	}
	return out
}
