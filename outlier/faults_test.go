package outlier

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/faults"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// The fault tests break every multi-step operation of the repository at
// every command it sends (internal/faults: a reset, a timeout or a stall,
// before the command reaches the server or after it ran and before its
// reply arrives), on every plan the server runs, then retry it on a
// healthy connection and check the final state exactly. At the failure
// they also check what the caller saw (an error that a network error or
// a timeout explains, never a sentinel of patterns) and what a reader sees
// at that moment: the invariants of the repository, the items in order.
//
// Each case starts from documents written directly (the parent and its
// overflow documents as Append writes them), so that a case costs a few
// commands to prepare; the healthy run of faults.Run checks that the
// seeded layout passes the same checks as the final one.

// faultParent is the id of the parent every fault case works on.
const faultParent = 1

// layoutOf describes a parent and its overflow documents: the parent's
// embedded items (its array null when nullArray is set, absent when
// noArray is, and the parent then written without flag or tail hint, as
// by other means), its flag,
// and the items of each overflow document by seq. The tail hint is the
// newest document's seq, or staleTail when it is set.
type layoutOf struct {
	embedded  []comment
	nullArray bool
	noArray   bool
	flag      bool
	overflow  [][]comment
	staleTail *int64
}

// ids returns the ids of the items in append order.
func (s layoutOf) ids() []string {
	out := idsOf(s.embedded)
	for _, d := range s.overflow {
		out = append(out, idsOf(d)...)
	}
	return out
}

// seed stores s in db, with the indexes of the repository.
func seed(t *testing.T, db *mongo.Database, cfg Config, s layoutOf) {
	t.Helper()
	ctx := context.Background()
	r := repoOn(db, cfg, PlanFor(mongotest.Portable()))
	require.NoError(t, patterns.EnsureIndexes(ctx, r.Indexes()...))
	parent := bson.D{{Key: "_id", Value: faultParent}, {Key: "title", Value: "p"}}
	switch {
	case s.noArray:
	case s.nullArray:
		parent = append(parent, bson.E{Key: r.cfg.Field, Value: nil})
	default:
		tail := int64(max(len(s.overflow)-1, 0))
		if s.staleTail != nil {
			tail = *s.staleTail
		}
		parent = append(parent,
			bson.E{Key: r.cfg.Field, Value: append(bson.A{}, anys(s.embedded)...)},
			bson.E{Key: r.cfg.FlagField, Value: s.flag},
			bson.E{Key: r.cfg.TailField, Value: tail})
	}
	_, err := r.parents.InsertOne(ctx, parent)
	require.NoError(t, err)
	if len(s.overflow) == 0 {
		return
	}
	docs := make([]any, len(s.overflow))
	for i, items := range s.overflow {
		docs[i] = bson.D{
			{Key: fParent, Value: faultParent}, {Key: fSeq, Value: int64(i)},
			{Key: fCount, Value: int64(len(items))}, {Key: fBytes, Value: int64(itemBytes(t, r.cfg, items))},
			{Key: fItems, Value: append(bson.A{}, anys(items)...)},
		}
	}
	_, err = r.overflow.InsertMany(ctx, docs)
	require.NoError(t, err)
}

func anys(cs []comment) []any {
	out := make([]any, len(cs))
	for i, c := range cs {
		out[i] = c
	}
	return out
}

// itemBytes is what Append counts in an overflow document's bytes for
// items: each item's size with the element overhead of the largest index.
func itemBytes(t testing.TB, cfg Config, items []comment) int {
	n := 0
	for _, c := range items {
		n += elementSize(cfg.OverflowCap-1, len(must(bson.Marshal(c))))
	}
	return n
}

// repoOn builds the repository an operation runs through, from the
// database Op is given (through the faulty client or the healthy one):
// New sends nothing, so each attempt is a process starting afresh.
func repoOn(db *mongo.Database, cfg Config, p Plan) *Repo[post, comment] {
	r, err := New[post, comment](db, cfg)
	if err != nil {
		panic(err) // the configurations of these tests are valid
	}
	ForcePlan(r, p)
	return r
}

// layout is a parent and its overflow documents as stored, read through
// the healthy client.
type layout struct {
	found      bool
	parentSize int
	embedded   []comment
	flag       bool
	tail       int64
	docs       []overflowDoc // by seq
	sizes      []int         // the encoded size of each
}

// ids returns the ids of the items as a merged read orders them.
func (l layout) ids() []string {
	out := idsOf(l.embedded)
	for _, d := range l.docs {
		out = append(out, idsOf(d.Items)...)
	}
	return out
}

func readLayout(t testing.TB, db *mongo.Database, cfg Config) layout {
	t.Helper()
	ctx := context.Background()
	var l layout
	raw, err := db.Collection(cfg.Parents).FindOne(ctx, bson.D{{Key: "_id", Value: faultParent}}).Raw()
	if !errors.Is(err, mongo.ErrNoDocuments) {
		require.NoError(t, err)
		l.found, l.parentSize = true, len(raw)
		if v, err := raw.LookupErr(cfg.Field); err == nil && v.Type != bson.TypeNull {
			require.NoError(t, v.Unmarshal(&l.embedded))
		}
		l.flag, _ = raw.Lookup(cfg.FlagField).BooleanOK()
		l.tail, _ = raw.Lookup(cfg.TailField).AsInt64OK()
	}
	cur, err := db.Collection(cfg.Overflow).Find(ctx, overflowFilter(faultParent), options.Find().SetSort(overflowOrder))
	require.NoError(t, err)
	var raws []bson.Raw
	require.NoError(t, cur.All(ctx, &raws))
	for _, r := range raws {
		var d overflowDoc
		require.NoError(t, bson.Unmarshal(r, &d))
		l.docs, l.sizes = append(l.docs, d), append(l.sizes, len(r))
	}
	return l
}

// checkLayout checks the invariants of a parent and its overflow
// documents. settled: the last write operation succeeded (otherwise an
// Append cut short may have announced, with the flag and the tail hint,
// an overflow document it has not written). packed: no item was removed,
// so every overflow document but the newest is full and counts exactly
// the bytes of its items (removals leave holes and do not lower bytes).
func checkLayout(t testing.TB, cfg Config, l layout, settled, packed bool) {
	t.Helper()
	require.True(t, l.found, "the parent exists")
	require.LessOrEqual(t, len(l.embedded), cfg.Cap, "the parent holds at most Cap items")
	require.LessOrEqual(t, l.parentSize, patterns.MaxDocumentSize)
	budget := overflowBudget(must(encodeID(faultParent)))
	for i, d := range l.docs {
		require.EqualValues(t, i, d.Seq, "the overflow documents are seqs 0, 1, ...")
		require.Equal(t, len(d.Items), d.Count, "seq %d: its count is the number of items it holds", i)
		require.LessOrEqual(t, d.Count, cfg.OverflowCap, "seq %d: at most OverflowCap items", i)
		require.LessOrEqual(t, l.sizes[i], patterns.MaxDocumentSize, "seq %d: at most 16 MiB", i)
		require.LessOrEqual(t, d.Bytes, budget, "seq %d: its bytes within the budget", i)
		if b := itemBytes(t, cfg, d.Items); packed {
			require.Equal(t, b, d.Bytes, "seq %d: its bytes are those of its items", i)
			if i < len(l.docs)-1 {
				require.Equal(t, cfg.OverflowCap, d.Count, "seq %d: documents fill in seq order", i)
			}
		} else {
			require.GreaterOrEqual(t, d.Bytes, b, "seq %d: its bytes bound those of its items", i)
		}
	}
	seen := map[string]bool{}
	for _, id := range l.ids() {
		require.False(t, seen[id], "item %s stored twice", id)
		seen[id] = true
	}
	n := int64(len(l.docs))
	switch {
	case !l.flag:
		require.Empty(t, l.docs, "no overflow document while the flag is false")
		require.Zero(t, l.tail, "no tail hint while the flag is false")
	case settled:
		require.NotZero(t, n, "the flag is true only with overflow")
		require.Equal(t, n-1, l.tail, "the tail hint is the newest document's seq")
	default:
		require.Contains(t, []int64{n - 1, n}, l.tail, "the tail hint is the newest document's seq, or the next one's, announced")
	}
}

// readersSee checks that Get and Count, through the healthy client, see
// exactly the items stored, in order, in the state a failure left. l is
// the layout read at the failure. The command the fault cut off may still
// be running on the server (a client that gives up on a command does not
// stop it: on a loaded server a push lands after the client's deadline),
// so its one write may land while they read: each must see the layout
// read before them (l) or the one read after them.
func readersSee(t testing.TB, db *mongo.Database, cfg Config, l layout) {
	t.Helper()
	ctx := context.Background()
	r := repoOn(db, cfg, PlanFor(mongotest.Server()))
	_, items, err := r.Get(ctx, faultParent)
	require.NoError(t, err)
	n, err := r.Count(ctx, faultParent)
	require.NoError(t, err)
	later := readLayout(t, db, cfg)
	require.Contains(t, [][]string{l.ids(), later.ids()}, idsOf(items), "Get sees the items stored, in order")
	require.Contains(t, []int{len(l.ids()), len(later.ids())}, n, "Count counts the items stored")
}

// sawFault checks what the caller of op saw when the connection broke:
// an error in the package's format that the driver's network error or
// timeout explains, never one of the sentinels of patterns (the operation
// did not find the parent missing, the input invalid...).
func sawFault(t testing.TB, op string, err error) {
	t.Helper()
	faults.Saw(t, fmt.Sprintf("outlier: %s: parent %d: ", op, faultParent), err)
}

// appendFix is the state of one Append fault case.
type appendFix struct {
	t      *testing.T      // the subtest's, for Retry
	db     *mongo.Database // the healthy client's, for the checks
	before []string        // the ids stored before the Append
	err    error           // what the last attempt returned
}

// appendCase appends add to the parent seeded as s, and checks that the
// items come out once each, in order, after those before, with the
// invariants held at the failure and after the retry.
func appendCase(cfg Config, p Plan, s layoutOf, add []comment) faults.Case[*appendFix] {
	cfg, _ = cfg.normalize()
	return faults.Case[*appendFix]{
		Reuse: true,
		Prepare: func(t *testing.T, db *mongo.Database) *appendFix {
			seed(t, db, cfg, s)
			return &appendFix{t: t, db: db, before: s.ids()}
		},
		Op: func(ctx context.Context, db *mongo.Database, f *appendFix) error {
			f.err = repoOn(db, cfg, p).Append(ctx, faultParent, add...)
			return f.err
		},
		Retry: func(ctx context.Context, db *mongo.Database, f *appendFix) error {
			t := f.t
			sawFault(t, "Append", f.err)
			// What a reader sees at the failure: the items before, then
			// the first k of this Append's, in order, and the invariants,
			// the flag perhaps announcing a document not yet written.
			l := readLayout(t, f.db, cfg)
			checkLayout(t, cfg, l, false, true)
			got := l.ids()
			require.GreaterOrEqual(t, len(got), len(f.before))
			require.Equal(t, f.before, got[:len(f.before)], "the items before are intact")
			rest := got[len(f.before):]
			require.LessOrEqual(t, len(rest), len(add))
			require.Equal(t, idsOf(add[:len(rest)]), rest, "a failed Append stored the first of its items, in order")
			readersSee(t, f.db, cfg, l)
			return repoOn(db, cfg, p).Append(ctx, faultParent, add...)
		},
		Check: func(t *testing.T, _ *mongo.Database, f *appendFix) {
			l := readLayout(t, f.db, cfg)
			checkLayout(t, cfg, l, true, true)
			require.Equal(t, append(append([]string(nil), f.before...), idsOf(add)...), l.ids(), "every item once, in append order")
		},
	}
}

// faultCases are the Append cases, on N=3, M=2: each a layout and the
// items an Append adds to it.
var appendFaultCases = []struct {
	name string
	s    layoutOf
	add  []comment
}{
	// One push into an open parent.
	{"open_parent", layoutOf{embedded: comments("c", 0, 1)}, comments("a", 0, 1)},
	// The first item fills the parent, the second closes it (the flag and
	// the tail hint) and opens overflow document 0 (its upsert).
	{"fills_and_overflows", layoutOf{embedded: comments("c", 0, 2)}, comments("a", 0, 2)},
	// A full parent, still open, takes nothing: the item closes it.
	{"closes_full_parent", layoutOf{embedded: comments("c", 0, 3)}, comments("a", 0, 1)},
	// A push into overflow document 0, which has room.
	{"into_overflow", layoutOf{embedded: comments("c", 0, 3), flag: true, overflow: [][]comment{comments("c", 3, 4)}}, comments("a", 0, 1)},
	// Document 0 is full: the item opens document 1.
	{"opens_next", layoutOf{embedded: comments("c", 0, 3), flag: true, overflow: [][]comment{comments("c", 3, 5)}}, comments("a", 0, 1)},
	// Several items across the boundaries: two into the parent, two into
	// document 0, one into document 1.
	{"across", layoutOf{embedded: comments("c", 0, 1)}, comments("a", 0, 5)},
	// A parent whose array is null, or absent, gets one first.
	{"null_array", layoutOf{nullArray: true}, comments("a", 0, 1)},
	{"absent_array", layoutOf{noArray: true}, comments("a", 0, 1)},
}

// TestFaults breaks every multi-step operation of the repository at every
// step: Append (faultsAppend), Remove (faultsRemove), Update
// (faultsUpdate), Delete (faultsDelete), Get, Items, Page and Count
// (faultsReads), side by side, since
// they spend most of their time waiting on stalls.
func TestFaults(t *testing.T) {
	t.Parallel()
	groups := []struct {
		name string
		run  func(t *testing.T)
	}{{"Append", faultsAppend}, {"Remove", faultsRemove}, {"Update", faultsUpdate}, {"Delete", faultsDelete}, {"Reads", faultsReads}}
	faults.Concurrently(t, len(groups), func(i int) string { return groups[i].name }, func(t *testing.T, i int) { groups[i].run(t) })
}

// faultsAppend breaks every Append case at every step, on every plan
// (appendPlans: the optimistic push of the native plan runs here too).
func faultsAppend(t *testing.T) {
	appendPlansAtOnce(t, func(t *testing.T, plan Plan) {
		faults.Concurrently(t, len(appendFaultCases), func(i int) string { return appendFaultCases[i].name }, func(t *testing.T, i int) {
			c := appendFaultCases[i]
			faults.Run(t, faults.New(t), appendCase(small(), plan, c.s, c.add))
		})
	})
}

// seededOverflow is the layout of the Remove, Delete and read cases: a
// parent full and overflowed, document 0 full, document 1 not.
var seededOverflow = layoutOf{
	embedded: comments("c", 0, 3), flag: true,
	overflow: [][]comment{comments("c", 3, 5), comments("c", 5, 6)},
}

// removeFix is the state of one Remove or Delete fault case.
type removeFix struct {
	t   *testing.T
	db  *mongo.Database // the healthy client's, for the checks
	err error
}

// faultsRemove breaks Remove at every step, for an item in the parent
// and one in an overflow document, on every plan. A Remove cut short after
// its write applied is retried into patterns.ErrNotFound, which the retry
// accepts only when the item is gone already.
func faultsRemove(t *testing.T) {
	cfg, _ := small().normalize()
	ids := []string{"c01", "c04"} // in the parent, in overflow document 0
	mongotest.RunPlans(t, PlanFor, func(t *testing.T, plan Plan) {
		faults.Concurrently(t, len(ids), func(i int) string { return ids[i] }, func(t *testing.T, i int) {
			faults.Run(t, faults.New(t), removeCase(cfg, plan, ids[i]))
		})
	})
}

// removeCase removes the item id from the parent seeded as seededOverflow.
func removeCase(cfg Config, plan Plan, id string) faults.Case[*removeFix] {
	want := slicesDelete(seededOverflow.ids(), id)
	return faults.Case[*removeFix]{
		Reuse: true,
		Prepare: func(t *testing.T, db *mongo.Database) *removeFix {
			seed(t, db, cfg, seededOverflow)
			return &removeFix{t: t, db: db}
		},
		Op: func(ctx context.Context, db *mongo.Database, f *removeFix) error {
			f.err = repoOn(db, cfg, plan).Remove(ctx, faultParent, id)
			return f.err
		},
		Retry: func(ctx context.Context, db *mongo.Database, f *removeFix) error {
			sawFault(f.t, "Remove", f.err)
			// A reader sees the item or not, the counts exact.
			l := readLayout(f.t, f.db, cfg)
			checkLayout(f.t, cfg, l, true, false)
			gone := len(l.ids()) == len(want)
			if gone {
				require.Equal(f.t, want, l.ids())
			} else {
				require.Equal(f.t, seededOverflow.ids(), l.ids())
			}
			readersSee(f.t, f.db, cfg, l)
			err := repoOn(db, cfg, plan).Remove(ctx, faultParent, id)
			if gone && errors.Is(err, patterns.ErrNotFound) {
				return nil // removed by the attempt cut short
			}
			return err
		},
		Check: func(t *testing.T, _ *mongo.Database, f *removeFix) {
			l := readLayout(t, f.db, cfg)
			checkLayout(t, cfg, l, true, false)
			require.Equal(t, want, l.ids())
		},
	}
}

// faultsUpdate breaks Update at every step, for an item in the parent
// and one in an overflow document (growing, so that the write is guarded
// on the document's bytes too), on every plan the server runs. A reader sees the old item or the
// new one, every other item as it was; the retry finds the item as given
// and succeeds.
func faultsUpdate(t *testing.T) {
	cfg, _ := small().normalize()
	ids := []string{"c01", "c04"} // in the parent, in overflow document 0
	mongotest.RunPlans(t, PlanFor, func(t *testing.T, plan Plan) {
		faults.Concurrently(t, len(ids), func(i int) string { return ids[i] }, func(t *testing.T, i int) {
			faults.Run(t, faults.New(t), updateCase(cfg, plan, comment{ID: ids[i], Text: "edited"}))
		})
	})
}

// updateCase updates the item in the parent seeded as seededOverflow.
func updateCase(cfg Config, plan Plan, c comment) faults.Case[*removeFix] {
	items := func(l layout) []comment {
		out := l.embedded
		for _, d := range l.docs {
			out = append(out, d.Items...)
		}
		return out
	}
	with := func(c comment) []comment {
		var out []comment
		for _, x := range comments("c", 0, 6) {
			if x.ID == c.ID {
				x = c
			}
			out = append(out, x)
		}
		return out
	}
	return faults.Case[*removeFix]{
		Reuse: true,
		Prepare: func(t *testing.T, db *mongo.Database) *removeFix {
			seed(t, db, cfg, seededOverflow)
			return &removeFix{t: t, db: db}
		},
		Op: func(ctx context.Context, db *mongo.Database, f *removeFix) error {
			f.err = repoOn(db, cfg, plan).Update(ctx, faultParent, c)
			return f.err
		},
		Retry: func(ctx context.Context, db *mongo.Database, f *removeFix) error {
			sawFault(f.t, "Update", f.err)
			l := readLayout(f.t, f.db, cfg)
			checkLayout(f.t, cfg, l, true, true)
			require.Contains(f.t, [][]comment{with(comment{ID: c.ID}), with(c)}, items(l), "the old item or the new one")
			readersSee(f.t, f.db, cfg, l)
			return repoOn(db, cfg, plan).Update(ctx, faultParent, c)
		},
		Check: func(t *testing.T, _ *mongo.Database, f *removeFix) {
			l := readLayout(t, f.db, cfg)
			checkLayout(t, cfg, l, true, true)
			require.Equal(t, with(c), items(l), "the item replaced in place, the others as they were")
		},
	}
}

func slicesDelete(ids []string, id string) []string {
	var out []string
	for _, x := range ids {
		if x != id {
			out = append(out, x)
		}
	}
	return out
}

// faultsDelete breaks Delete at each of its two steps (the parent,
// then its overflow documents). Between them a reader finds no parent;
// the retry removes what is left and reports patterns.ErrNotFound, as the
// godoc says, which it accepts only when the parent is gone already.
func faultsDelete(t *testing.T) {
	p := faults.New(t)
	cfg, _ := small().normalize()
	mongotest.RunPlans(t, PlanFor, func(t *testing.T, plan Plan) {
		faults.Run(t, p, faults.Case[*removeFix]{
			Reuse: true,
			Prepare: func(t *testing.T, db *mongo.Database) *removeFix {
				seed(t, db, cfg, seededOverflow)
				return &removeFix{t: t, db: db}
			},
			Op: func(ctx context.Context, db *mongo.Database, f *removeFix) error {
				f.err = repoOn(db, cfg, plan).Delete(ctx, faultParent)
				return f.err
			},
			Retry: func(ctx context.Context, db *mongo.Database, f *removeFix) error {
				t := f.t
				sawFault(t, "Delete", f.err)
				l := readLayout(t, f.db, cfg)
				if l.found {
					// Nothing deleted yet: the parent goes first.
					checkLayout(t, cfg, l, true, true)
					require.Equal(t, seededOverflow.ids(), l.ids())
				} else {
					// A reader finds no parent, whatever overflow is left.
					r := repoOn(db, cfg, plan)
					_, _, err := r.Get(ctx, faultParent)
					require.ErrorIs(t, err, patterns.ErrNotFound)
					_, err = r.Count(ctx, faultParent)
					require.ErrorIs(t, err, patterns.ErrNotFound)
				}
				err := repoOn(db, cfg, plan).Delete(ctx, faultParent)
				if !l.found && errors.Is(err, patterns.ErrNotFound) {
					return nil // the attempt cut short deleted the parent
				}
				return err
			},
			Check: func(t *testing.T, _ *mongo.Database, f *removeFix) {
				l := readLayout(t, f.db, cfg)
				require.False(t, l.found, "the parent is gone")
				require.Empty(t, l.docs, "its overflow documents are gone")
			},
		})
	})
}

// readFix is the state of one read fault case: what the last attempt
// returned.
type readFix struct {
	t     *testing.T
	db    *mongo.Database
	items []string
	n     int
	err   error
	after Cursor // Page's: where the next page starts
	paged bool   // Page's: the last page was read
}

// faultsReads breaks Get, Items, Page and Count of an overflowed parent at
// every step: each returns an error (Items after a prefix of the items, in
// order) or the complete, ordered result, and writes nothing. Page walks
// every page, 3 items each (the parent's, then pages crossing overflow
// documents); after a failure the walk resumes from the last cursor
// returned, and the pages hold every item once. The parent's
// tail hint is stale, as a Get sees it when appenders open documents
// between its two reads, so that Get's overflow find needs a getMore; Items
// reads two overflow documents per round trip.
func faultsReads(t *testing.T) {
	cfg, _ := small().normalize()
	cfg.BatchSize = 2
	s := seededOverflow
	s.overflow = append(s.overflow[:1:1], comments("c", 5, 7), comments("c", 7, 8))
	stale := int64(0)
	s.staleTail = &stale
	want := s.ids()
	reads := []struct {
		name string
		op   func(ctx context.Context, r *Repo[post, comment], f *readFix)
		// failed checks what a failed attempt returned besides its error.
		failed func(t *testing.T, f *readFix)
	}{
		{"Get", func(ctx context.Context, r *Repo[post, comment], f *readFix) {
			var items []comment
			_, items, f.err = r.Get(ctx, faultParent)
			f.items = idsOf(items)
			if items == nil {
				f.items = nil
			}
		}, func(t *testing.T, f *readFix) {
			require.Nil(t, f.items, "a failed Get returns no items")
		}},
		{"Items", func(ctx context.Context, r *Repo[post, comment], f *readFix) {
			f.items, f.err = nil, nil
			for c, err := range r.Items(ctx, faultParent) {
				if f.err != nil {
					f.t.Errorf("Items yielded after its error: %v, %v", c, err)
				}
				if err != nil {
					f.err = err
					continue
				}
				f.items = append(f.items, c.ID)
			}
		}, func(t *testing.T, f *readFix) {
			require.LessOrEqual(t, len(f.items), len(want))
			require.Equal(t, want[:len(f.items)], append([]string{}, f.items...), "a failed Items yielded a prefix of the items, in order")
		}},
		{"Page", func(ctx context.Context, r *Repo[post, comment], f *readFix) {
			for f.err = nil; !f.paged; {
				items, next, err := r.Page(ctx, faultParent, f.after, 3)
				if f.err = err; err != nil {
					require.Nil(f.t, items, "a failed Page returns no items")
					return // the caller keeps its cursor
				}
				f.items, f.after = append(f.items, idsOf(items)...), next
				f.paged = next.IsZero()
			}
		}, func(t *testing.T, f *readFix) {
			require.Equal(t, want[:len(f.items)], append([]string{}, f.items...), "the pages before the failure hold the first items, in order")
		}},
		{"Count", func(ctx context.Context, r *Repo[post, comment], f *readFix) {
			f.n, f.err = r.Count(ctx, faultParent)
		}, func(t *testing.T, f *readFix) {
			require.Zero(t, f.n, "a failed Count returns 0")
		}},
	}
	mongotest.RunPlans(t, PlanFor, func(t *testing.T, plan Plan) {
		faults.Concurrently(t, len(reads), func(i int) string { return reads[i].name }, func(t *testing.T, i int) {
			read := reads[i]
			op := func(ctx context.Context, db *mongo.Database, f *readFix) error {
				read.op(ctx, repoOn(db, cfg, plan), f)
				return f.err
			}
			faults.Run(t, faults.New(t), faults.Case[*readFix]{
				Reuse: true,
				Prepare: func(t *testing.T, db *mongo.Database) *readFix {
					seed(t, db, cfg, s)
					return &readFix{t: t, db: db}
				},
				Op: op,
				Retry: func(ctx context.Context, db *mongo.Database, f *readFix) error {
					sawFault(f.t, read.name, f.err)
					read.failed(f.t, f)
					return op(ctx, db, f)
				},
				Check: func(t *testing.T, _ *mongo.Database, f *readFix) {
					if read.name == "Count" {
						require.Equal(t, len(want), f.n)
					} else {
						require.Equal(t, want, f.items, "every item, in append order")
					}
					require.Equal(t, want, readLayout(t, f.db, cfg).ids(), "a read writes nothing")
				},
			})
		})
	})
}

// TestReadersSeeALateWrite: the readers' check at a failure allows the
// one write the fault cut off to land after the layout was read, as it
// does when the server runs the command after the client gave up (a
// full run on FerretDB 2.x: Get saw [c00 a00 a01] where the layout read
// just before held [c00]).
func TestReadersSeeALateWrite(t *testing.T) {
	ctx := context.Background()
	cfg, _ := small().normalize()
	db := mongotest.DB(t)
	seed(t, db, cfg, layoutOf{embedded: comments("c", 0, 1)})
	l := readLayout(t, db, cfg)
	_, err := db.Collection(cfg.Parents).UpdateOne(ctx, bson.D{{Key: "_id", Value: faultParent}},
		bson.D{{Key: "$push", Value: bson.D{{Key: cfg.Field, Value: bson.D{{Key: "$each", Value: comments("a", 0, 2)}}}}}})
	require.NoError(t, err)
	readersSee(t, db, cfg, l)
}
