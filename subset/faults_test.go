package subset_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/dial"
	"github.com/mongopatterns/mongopatterns/internal/faults"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/subset"
)

// The fault tests break every operation of the repository that sends
// commands at every one of them (internal/faults: a reset, a timeout or a
// stall, before the command reaches the server or after the server ran it
// and before its reply arrives), on every plan the server runs, then
// retry it on a healthy connection as its godoc says is safe, and check
// the final state exactly: the items collection holds each item once,
// as the last write left it; the parent's subset is the first Cap of
// them in the configured order, each once; the revision moved once per
// recomputation that landed, no more; the parent's other fields are
// untouched. At the failure they check what the caller saw (an error
// "subset: <Op>: ..." that the broken connection explains, never a
// sentinel of patterns, which would claim an outcome the caller cannot
// know) and what a reader sees at that moment: the items collection
// before or after the change, and the subset before it, or after it once
// the items collection is.

// faultCap is the Cap of the fault tests: small, so that a few items fill
// the subset and others stay out of it.
const faultCap = 3

// faultRepo builds the repository an operation runs through, from the
// database Op is given (through the faulty client or the healthy one),
// taking plan p: New sends nothing, so each attempt is a process starting
// afresh.
func faultRepo(db *mongo.Database, p subset.Plan) *subset.Repo[parent, item] {
	r, err := subset.New[parent, item](db, config(faultCap))
	if err != nil {
		panic(err) // the configuration is valid
	}
	subset.ForcePlan(r, p)
	return r
}

// faultCountedRepo is faultRepo with a count field, n.
func faultCountedRepo(db *mongo.Database, p subset.Plan) *subset.Repo[parent, item] {
	r, err := subset.New[parent, item](db, counted(faultCap))
	if err != nil {
		panic(err) // the configuration is valid
	}
	subset.ForcePlan(r, p)
	return r
}

// unmeasured is the plan of a server that refuses a parent past 16 MiB
// but lacks $sortArray (MongoDB before 5.2): every write recomputes, and
// the server, not the repository, refuses a parent past 16 MiB, so a
// recomputation reads the revision and the subset's ids rather than the
// whole parent. Every server runs it for parents far from 16 MiB.
var unmeasured = subset.PlanFor(mongotest.KnownServers()["FerretDB 2.7"].Without(patterns.FeatureSortArray))

// faultPlans runs test on every plan the server runs (mongotest.RunPlans)
// and, side by side with them, on the unmeasured plan where the server's
// own is another: the fault tests spend their time waiting on stalls.
func faultPlans(t *testing.T, test func(t *testing.T, p subset.Plan)) {
	t.Helper()
	var wg sync.WaitGroup
	wg.Go(func() { mongotest.RunPlans(t, subset.PlanFor, test) })
	if subset.PlanFor(mongotest.Server()) != unmeasured {
		wg.Go(func() { t.Run("unmeasured", func(t *testing.T) { test(t, unmeasured) }) })
	}
	wg.Wait()
}

// seedParent is a parent as a fault case stores it before the operation:
// its items, and its subset and revision (the first Cap items and
// revision 1 unless said otherwise; none at all when bare: a parent whose
// items were loaded without the repository).
type seedParent struct {
	id     string
	items  []item
	subset []item // nil: the first Cap of items
	rev    int64  // 0: 1
	bare   bool
	// counted: the parent holds the count of its items, n, unless bare.
	counted bool
}

func (s seedParent) revision() int64 {
	if s.bare {
		return 0
	}
	return max(s.rev, 1)
}

// seed stores the parents and their items in db with the repository's
// indexes, through the healthy client.
func seed(t *testing.T, db *mongo.Database, parents ...seedParent) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, patterns.EnsureIndexes(ctx, faultRepo(db, unmeasured).Indexes()...))
	var docs []any
	for _, p := range parents {
		doc := bson.D{{Key: "_id", Value: p.id}, {Key: "title", Value: "t-" + p.id}}
		if !p.bare {
			sub := p.subset
			if sub == nil {
				sub = topOf(p.items)
			}
			// Stamped, as the repository leaves a parent it wrote: the
			// incarnation 2^32, then the count.
			doc = append(doc, bson.E{Key: "top", Value: withParentIn(p.id, sub)}, bson.E{Key: "topRev", Value: 1<<32 + p.revision()})
			if p.counted {
				doc = append(doc, bson.E{Key: "n", Value: int64(len(p.items))})
			}
		}
		docs = append(docs, doc)
		if len(p.items) > 0 {
			_, err := db.Collection("items").InsertMany(ctx, withParent(p.id, p.items...))
			require.NoError(t, err)
		}
	}
	_, err := db.Collection("parents").InsertMany(ctx, docs)
	require.NoError(t, err)
}

// topOf returns the first Cap of items in the configured order.
func topOf(items []item) []item {
	r := ranked(items)
	return r[:min(len(r), faultCap)]
}

// withParentIn returns the items as both places store them: with their
// parent's id, never a nil slice.
func withParentIn(parentID string, items []item) []item {
	out := make([]item, len(items))
	for i, it := range items {
		it.Parent = parentID
		out[i] = it
	}
	return out
}

// snapshot is a parent and its items as stored, read through the
// healthy client.
type snapshot struct {
	found  bool
	raw    bson.Raw
	subset []item
	rev    int64  // the recomputations: the revision's low 32 bits
	n      *int64 // the count field, nil when absent
	items  []item // the items collection's, by id
}

func readSnapshot(t testing.TB, db *mongo.Database, parentID string) snapshot {
	t.Helper()
	ctx := context.Background()
	var s snapshot
	raw, err := db.Collection("parents").FindOne(ctx, bson.D{{Key: "_id", Value: parentID}}).Raw()
	if !errors.Is(err, mongo.ErrNoDocuments) {
		require.NoError(t, err)
		s.found, s.raw = true, raw
		if v, err := raw.LookupErr("top"); err == nil {
			require.Equal(t, bson.TypeArray, v.Type, "the subset is an array: %s", raw)
			require.NoError(t, v.Unmarshal(&s.subset))
		}
		if v, err := raw.LookupErr("topRev"); err == nil {
			require.Equal(t, bson.TypeInt64, v.Type, "the revision is an int64: %s", raw)
			// Its low 32 bits, which count the recomputations: a parent
			// without a revision is stamped with a random multiple of
			// 2^32 before its first.
			s.rev = v.Int64() % (1 << 32)
		}
		if v, err := raw.LookupErr("n"); err == nil {
			require.Equal(t, bson.TypeInt64, v.Type, "the count is an int64: %s", raw)
			n := v.Int64()
			s.n = &n
		}
	}
	cur, err := db.Collection("items").Find(ctx, bson.D{{Key: "parent", Value: parentID}}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	require.NoError(t, err)
	require.NoError(t, cur.All(ctx, &s.items))
	return s
}

// byID returns the items sorted by id, with their parent's id: as
// readSnapshot reads the items collection.
func byID(parentID string, items []item) []item {
	out := withParentIn(parentID, items)
	slices.SortFunc(out, func(a, b item) int { return int(a.ID - b.ID) })
	return out
}

// requireSettled checks a parent after a successful operation: the items
// collection holds exactly items, each once; the subset is their first
// Cap in the configured order, each once; the revision is rev; the
// parent's fields are _id, title (untouched), the subset and the
// revision (and, on the push plan, the push field: an ObjectID, or
// true),
// no other.
func requireSettled(t testing.TB, db *mongo.Database, parentID string, items []item, rev int64) {
	t.Helper()
	s := readSnapshot(t, db, parentID)
	require.True(t, s.found, "parent %s exists", parentID)
	require.Equal(t, byID(parentID, items), s.items, "the items collection holds each item once")
	requireSubset(t, parentID, s, items)
	require.Equal(t, rev, s.rev, "the revision moved once per recomputation that landed")
	var keys []string
	elems, err := s.raw.Elements()
	require.NoError(t, err)
	for _, e := range elems {
		if e.Key() == "topPushed" {
			require.Contains(t, []bson.Type{bson.TypeObjectID, bson.TypeBoolean}, e.Value().Type, "the push field holds an ObjectID, or true while pushes are held off")
			continue
		}
		keys = append(keys, e.Key())
	}
	// Every operation stamps a bare parent: an Add after its read, a
	// recomputation before its first compare-and-set.
	want := []string{"_id", "title", "top", "topRev"}
	if s.n != nil {
		require.EqualValues(t, len(items), *s.n, "the count is the number of items")
		want = append(want, "n")
	}
	// In any order: the stamp of a bare parent adds the revision first.
	require.ElementsMatch(t, want, keys, "the parent's fields")
	require.Equal(t, "t-"+parentID, s.raw.Lookup("title").StringValue(), "the parent's own field is untouched")
}

// requireSubset checks that the subset of s is the first Cap of items,
// in order, each once.
func requireSubset(t testing.TB, parentID string, s snapshot, items []item) {
	t.Helper()
	require.LessOrEqual(t, len(s.subset), faultCap, "the subset holds at most Cap items")
	require.Equal(t, withParentIn(parentID, topOf(items)), append([]item{}, s.subset...), "the subset is the first Cap items, in order")
}

// sawFault checks what the caller of op saw when the connection broke:
// an error in the package's format that the broken connection explains,
// never one of the sentinels of patterns (the operation did not find the
// item missing, the input invalid, a conflict...).
func sawFault(t testing.TB, op string, err error) {
	t.Helper()
	faults.Saw(t, "subset: "+op+": ", err)
}

// change is a fault case of an operation on parent "a" that sends
// several commands: the parent as seeded, its items after the
// operation, and the operation.
type change struct {
	name   string
	seed   seedParent
	after  []item
	op     func(ctx context.Context, r *subset.Repo[parent, item]) error
	opName string
	// gone says, from what a reader saw at the failure, whether the
	// operation did its whole job already: its retry may then report
	// patterns.ErrNotFound, as the godoc says (Remove).
	gone func(s snapshot) bool
	// counted: the repository keeps the count field n (the seed's parent
	// holds it too), which must follow the subset.
	counted bool
}

// changeFix is the state of one change case.
type changeFix struct {
	t        *testing.T
	db       *mongo.Database // the healthy client's
	err      error           // what the struck call returned
	struck   bool
	faulty   bool  // the last call went through the faulty client
	between  int64 // the revision at the failure
	recomp   bool  // whether the retry recomputed
	notFound bool  // whether the retry reported patterns.ErrNotFound
}

// changeCase breaks c's operation at every step on plan p.
func changeCase(c change, p subset.Plan) faults.Case[*changeFix] {
	const id = "a"
	before := c.seed.items
	faultRepo := faultRepo
	if c.counted {
		faultRepo = faultCountedRepo
	}
	// pushes: an Add on the push plan pushes, leaving the revision alone.
	pushes := c.opName == "Add" && !c.counted && p == pushPlan
	return faults.Case[*changeFix]{
		Reuse: true,
		Prepare: func(t *testing.T, db *mongo.Database) *changeFix {
			c.seed.id = id
			c.seed.counted = c.counted
			seed(t, db, c.seed)
			return &changeFix{t: t, db: db}
		},
		Op: func(ctx context.Context, db *mongo.Database, f *changeFix) error {
			f.faulty = db.Client() != f.db.Client()
			f.err = c.op(ctx, faultRepo(db, p))
			return f.err
		},
		Retry: func(ctx context.Context, db *mongo.Database, f *changeFix) error {
			t := f.t
			f.struck = true
			sawFault(t, c.opName, f.err)
			// What a reader sees at the failure: the items collection
			// before or after the change; the subset before it at the
			// revision seeded, after it (and the items collection too)
			// at the next one.
			s := readSnapshot(t, f.db, id)
			require.True(t, s.found)
			after := slices.Equal(byID(id, c.after), s.items)
			require.True(t, after || slices.Equal(byID(id, before), s.items), "the items collection before or after the change: %v", s.items)
			f.between = s.rev
			landed := slices.ContainsFunc(s.subset, func(it item) bool {
				return !slices.ContainsFunc(before, func(b item) bool { return b.ID == it.ID })
			})
			switch s.rev {
			case c.seed.revision():
				if pushes && after {
					// The push may have landed.
					if !slices.Equal(withParentIn(id, topOf(before)), s.subset) {
						requireSubset(t, id, s, c.after)
					}
				} else if c.seed.subset == nil && !c.seed.bare {
					requireSubset(t, id, s, before)
				}
				if c.counted && !c.seed.bare {
					require.EqualValues(t, len(before), *s.n, "the count moves with the subset, not before")
				}
			case c.seed.revision() + 1:
				require.True(t, after, "the subset changes after the items collection")
				requireSubset(t, id, s, c.after)
				if c.counted {
					require.EqualValues(t, len(c.after), *s.n, "the count moves with the subset")
				}
			default:
				t.Fatalf("the revision is %d at the failure; seeded %d, and the operation recomputes once", s.rev, c.seed.revision())
			}
			got, err := faultRepo(f.db, p).Get(ctx, id)
			require.NoError(t, err)
			require.Equal(t, s.subset, got.Top, "Get sees the subset as stored")
			err = c.op(ctx, faultRepo(db, p))
			if c.gone != nil && c.gone(s) && errors.Is(err, patterns.ErrNotFound) {
				f.notFound = true
				// The struck call did the whole job, but for the count,
				// which the retry sets when it is not the number of items.
				f.recomp = c.counted && (s.n == nil || *s.n != int64(len(c.after)))
				return nil
			}
			// On the push plan the retry recomputes when the struck push
			// landed: its guard finds the items in the subset (Add's godoc).
			f.recomp = err == nil && (!pushes || landed)
			return err
		},
		Check: func(t *testing.T, _ *mongo.Database, f *changeFix) {
			want := c.seed.revision() + 1
			if pushes {
				want--
			}
			if f.struck {
				want = f.between
				if f.recomp {
					want++
				}
			} else if f.faulty && pushes && c.seed.bare && readSnapshot(t, f.db, id).rev == want+1 {
				// The fault broke the push into a parent without a subset
				// field, and Add, finding no array there, recomputed
				// (Add's godoc), within the deadline: the fault absorbed.
				want++
			}
			requireSettled(t, f.db, id, c.after, want)
			got, err := faultRepo(f.db, p).Get(context.Background(), id)
			require.NoError(t, err)
			require.Equal(t, withParentIn(id, topOf(c.after)), append([]item{}, got.Top...), "Get returns the first Cap items")
			var all []item
			for it, err := range faultRepo(f.db, p).All(context.Background(), id) {
				require.NoError(t, err)
				all = append(all, it)
			}
			require.Equal(t, withParentIn(id, ranked(c.after)), all, "All lists every item once, in order")
		},
	}
}

// replaced returns items with it in place of the item of the same id.
func replaced(items []item, it item) []item {
	out := slices.Clone(items)
	for i := range out {
		if out[i].ID == it.ID {
			out[i] = it
		}
	}
	return out
}

func add(items ...item) func(ctx context.Context, r *subset.Repo[parent, item]) error {
	return func(ctx context.Context, r *subset.Repo[parent, item]) error { return r.Add(ctx, "a", items...) }
}

func remove(id int64) func(ctx context.Context, r *subset.Repo[parent, item]) error {
	return func(ctx context.Context, r *subset.Repo[parent, item]) error { return r.Remove(ctx, "a", id) }
}

func update(it item) func(ctx context.Context, r *subset.Repo[parent, item]) error {
	return func(ctx context.Context, r *subset.Repo[parent, item]) error { return r.Update(ctx, "a", it) }
}

// holds reports whether the items or the subset of s hold the item id.
func holds(s snapshot, id int64) bool {
	for _, it := range append(slices.Clone(s.items), s.subset...) {
		if it.ID == id {
			return true
		}
	}
	return false
}

// changeCases are the cases of Add, Remove, Update and Rebuild.
func changeCases() []change {
	gone := func(id int64) func(s snapshot) bool { return func(s snapshot) bool { return !holds(s, id) } }
	enters := item{ID: 6, Score: 45, Body: "new"}
	several := []item{enters, {ID: 7, Score: 5}, {ID: 8, Score: 60}}
	stale := []item{{ID: 1, Score: 10}, {ID: 9, Score: 99}} // 9 is no longer stored, 5 and 4 are missing
	return []change{
		// Add: one item that enters the subset and pushes one out.
		{name: "Add_one", seed: seedParent{items: five}, after: append(slices.Clone(five), enters), op: add(enters), opName: "Add"},
		// Add: several items, one of which stays out of the subset.
		{name: "Add_several", seed: seedParent{items: five}, after: append(slices.Clone(five), several...), op: add(several...), opName: "Add"},
		// Add: the first item of a parent without a subset or a
		// revision (the compare-and-set on a missing revision).
		{name: "Add_first", seed: seedParent{bare: true}, after: []item{enters}, op: add(enters), opName: "Add"},
		// Remove: an item of the subset, which the next one replaces.
		{name: "Remove_in_subset", seed: seedParent{items: five}, after: without(five, 4), op: remove(4), opName: "Remove", gone: gone(4)},
		// Remove: an item out of the subset, which stays as it is.
		{name: "Remove_out_of_subset", seed: seedParent{items: five}, after: without(five, 1), op: remove(1), opName: "Remove", gone: gone(1)},
		// Update: an item that enters the subset, and one that leaves it.
		{name: "Update_enters", seed: seedParent{items: five}, after: replaced(five, item{ID: 1, Score: 70, Body: "up"}), op: update(item{ID: 1, Score: 70, Body: "up"}), opName: "Update"},
		{name: "Update_leaves", seed: seedParent{items: five}, after: replaced(five, item{ID: 5, Score: 0, Body: "down"}), op: update(item{ID: 5, Score: 0, Body: "down"}), opName: "Update"},
		// Rebuild: a stale subset, at revision 4.
		{name: "Rebuild", seed: seedParent{items: five, subset: stale, rev: 4}, after: five, opName: "Rebuild",
			op: func(ctx context.Context, r *subset.Repo[parent, item]) error { return r.Rebuild(ctx, "a") }},
	}
}

// TestFaults breaks every operation of the repository at every step, on
// every plan, the groups side by side, since they spend most of their time
// waiting on stalls: Add (one item, several, the first of a parent;
// faultsAddDeletedParent: to a parent deleted under it;
// faultsAddForeignID: with an id stored under another parent), the
// operations that find nothing to change (faultsMissing), Remove (in and out of the subset), Update (into and out of it) and
// Rebuild (faultsChange; faultsCount: the same with a count field),
// RebuildAll (faultsRebuildAll), Delete
// (faultsDelete), the reads Get, Page and All (faultsReads), and the
// take-back of an Add too large for its parent (faultsAddTooLargeTakesBack).
func TestFaults(t *testing.T) {
	t.Parallel()
	groups := []struct {
		name string
		run  func(t *testing.T)
	}{{"Change", faultsChange}, {"Count", faultsCount}, {"AddDeletedParent", faultsAddDeletedParent}, {"AddForeignID", faultsAddForeignID}, {"Missing", faultsMissing}, {"RebuildAll", faultsRebuildAll}, {"Delete", faultsDelete}, {"Reads", faultsReads}, {"AddTooLargeTakesBack", faultsAddTooLargeTakesBack}}
	faults.Concurrently(t, len(groups), func(i int) string { return groups[i].name }, func(t *testing.T, i int) { groups[i].run(t) })
}

// faultsChange breaks each change case at every step, on every plan: the
// operation returns a fault's error and the retry finishes the job; a
// Remove whose struck call deleted the item and took it out of the subset
// is retried into patterns.ErrNotFound, which the retry accepts only when
// a reader saw the item in neither place.
func faultsChange(t *testing.T) {
	cases := changeCases()
	faultPlans(t, func(t *testing.T, p subset.Plan) {
		faults.Concurrently(t, len(cases), func(i int) string { return cases[i].name }, func(t *testing.T, i int) {
			faults.Run(t, faults.New(t), changeCase(cases[i], p))
		})
	})
}

// faultsCount breaks each change case at every step, as faultsChange
// does, with a repository that keeps the count of the items in the
// parent: at the failure the count is the one seeded or, once the subset
// has changed, the new one; after the retry it is the number of items.
func faultsCount(t *testing.T) {
	cases := changeCases()
	faultPlans(t, func(t *testing.T, p subset.Plan) {
		faults.Concurrently(t, len(cases), func(i int) string { return cases[i].name }, func(t *testing.T, i int) {
			c := cases[i]
			c.counted = true
			faults.Run(t, faults.New(t), changeCase(c, p))
		})
	})
}

// rebuildAllFix is the state of the RebuildAll case.
type rebuildAllFix struct {
	t       *testing.T
	db      *mongo.Database
	calls   []rebuildAllCall
	between map[string]int64 // the revisions at the failure
	parents []seedParent
}

// rebuildAllCall is what a call of RebuildAll returned and reported.
type rebuildAllCall struct {
	n        int
	progress []int
	err      error
}

// faultsRebuildAll breaks RebuildAll over three parents (one whose items
// were loaded without the repository, one with a stale subset, one
// already right) at every step: the find of the parents, and the three
// commands of each rebuild. The struck call returns an error naming the
// operation and counts no more parents than it rebuilt (only the one
// whose compare-and-set reply was lost is missing from its count), in _id
// order; the retry rebuilds all three; every subset ends as the first Cap
// of its items, each revision moved once per rebuild that landed.
func faultsRebuildAll(t *testing.T) {
	parents := []seedParent{
		{id: "a", items: five, bare: true},
		{id: "b", items: shifted(five[:4], 100), subset: []item{{ID: 999, Score: 99}}, rev: 7},
		{id: "c", items: shifted(five[1:], 200)},
	}
	ids := []string{"a", "b", "c"}
	faultPlans(t, func(t *testing.T, p subset.Plan) {
		op := func(ctx context.Context, db *mongo.Database, f *rebuildAllFix) error {
			var c rebuildAllCall
			c.n, c.err = faultRepo(db, p).RebuildAll(ctx, func(n int) { c.progress = append(c.progress, n) })
			f.calls = append(f.calls, c)
			return c.err
		}
		faults.Run(t, faults.New(t), faults.Case[*rebuildAllFix]{
			Reuse: true,
			Prepare: func(t *testing.T, db *mongo.Database) *rebuildAllFix {
				seed(t, db, parents...)
				return &rebuildAllFix{t: t, db: db, parents: parents}
			},
			Op: op,
			Retry: func(ctx context.Context, db *mongo.Database, f *rebuildAllFix) error {
				t := f.t
				struck := f.calls[0]
				sawFault(t, "RebuildAll", struck.err)
				f.between = map[string]int64{}
				moved := 0
				for i, sp := range parents {
					s := readSnapshot(t, f.db, sp.id)
					f.between[sp.id] = s.rev
					switch s.rev {
					case sp.revision():
						if !sp.bare && sp.subset == nil {
							requireSubset(t, sp.id, s, sp.items)
						}
					case sp.revision() + 1:
						require.Equal(t, i, moved, "the parents are rebuilt in _id order")
						moved++
						requireSubset(t, sp.id, s, sp.items)
					default:
						t.Fatalf("parent %s at revision %d at the failure; seeded %d", sp.id, s.rev, sp.revision())
					}
				}
				require.LessOrEqual(t, struck.n, moved, "the struck call counts no more parents than it rebuilt")
				require.GreaterOrEqual(t, struck.n, moved-1, "the struck call counts what it rebuilt but the parent whose reply was lost")
				require.Equal(t, seq(struck.n), struck.progress, "its progress")
				return op(ctx, db, f)
			},
			Check: func(t *testing.T, _ *mongo.Database, f *rebuildAllFix) {
				for _, sp := range parents {
					want := sp.revision() + 1
					if f.between != nil {
						want = f.between[sp.id] + 1
					}
					requireSettled(t, f.db, sp.id, sp.items, want)
				}
				last := f.calls[len(f.calls)-1]
				require.NoError(t, last.err)
				require.Equal(t, len(ids), last.n, "the last call rebuilds every parent")
				require.Equal(t, seq(len(ids)), last.progress)
			},
		})
	})
}

// seq returns 1, ..., n; nil for 0.
func seq(n int) []int {
	var out []int
	for i := 1; i <= n; i++ {
		out = append(out, i)
	}
	return out
}

// deleteFix is the state of the Delete case.
type deleteFix struct {
	t      *testing.T
	db     *mongo.Database
	err    error
	others snapshot // parent b as seeded
}

// faultsDelete breaks Delete at each of its two steps (the parent, then
// its items). At the failure a reader sees the parent with all its items
// (the parent goes first), or no parent (Get: patterns.ErrNotFound) and
// all its items or none. The retry deletes what is left, and reports
// patterns.ErrNotFound, as the godoc says, which it accepts only when a
// reader saw nothing left. The other parent is untouched.
func faultsDelete(t *testing.T) {
	faultPlans(t, func(t *testing.T, p subset.Plan) {
		op := func(ctx context.Context, db *mongo.Database, f *deleteFix) error {
			f.err = faultRepo(db, p).Delete(ctx, "a")
			return f.err
		}
		faults.Run(t, faults.New(t), faults.Case[*deleteFix]{
			Reuse: true,
			Prepare: func(t *testing.T, db *mongo.Database) *deleteFix {
				seed(t, db, seedParent{id: "a", items: five}, seedParent{id: "b", items: []item{{ID: 11, Score: 1}, {ID: 12, Score: 2}}})
				return &deleteFix{t: t, db: db, others: readSnapshot(t, db, "b")}
			},
			Op: op,
			Retry: func(ctx context.Context, db *mongo.Database, f *deleteFix) error {
				t := f.t
				sawFault(t, "Delete", f.err)
				s := readSnapshot(t, f.db, "a")
				if s.found {
					require.Equal(t, byID("a", five), s.items, "the parent goes first: its items are all there")
					requireSubset(t, "a", s, five)
				} else {
					_, err := faultRepo(f.db, p).Get(ctx, "a")
					require.ErrorIs(t, err, patterns.ErrNotFound, "a reader finds no parent")
					if len(s.items) > 0 {
						require.Equal(t, byID("a", five), s.items, "all its items or none")
					}
				}
				err := op(ctx, db, f)
				if !s.found && len(s.items) == 0 && errors.Is(err, patterns.ErrNotFound) {
					return nil // the struck call deleted everything
				}
				return err
			},
			Check: func(t *testing.T, _ *mongo.Database, f *deleteFix) {
				s := readSnapshot(t, f.db, "a")
				require.False(t, s.found, "the parent is gone")
				require.Empty(t, s.items, "its items are gone")
				require.Equal(t, f.others, readSnapshot(t, f.db, "b"), "the other parent and its items are untouched")
			},
		})
	})
}

// readFix is the state of one read case: what the last call returned.
type readFix struct {
	t     *testing.T
	db    *mongo.Database
	items []item
	err   error
	seed  snapshot
}

// faultsReads breaks Get (one findOne), Page (one find) and All (a find
// per page: two items per page) of a parent with five items at every
// step: each returns a fault's error (All after a prefix of the items, in
// order, and once) or the whole result, and writes nothing.
func faultsReads(t *testing.T) {
	reads := []struct {
		name string
		want []item
		op   func(ctx context.Context, r *subset.Repo[parent, item], f *readFix)
	}{
		{"Get", withParentIn("a", topOf(five)), func(ctx context.Context, r *subset.Repo[parent, item], f *readFix) {
			var p parent
			p, f.err = r.Get(ctx, "a")
			f.items = p.Top
		}},
		{"Page", withParentIn("a", ranked(five)), func(ctx context.Context, r *subset.Repo[parent, item], f *readFix) {
			var next subset.Cursor
			f.items, next, f.err = r.Page(ctx, "a", subset.Cursor{}, 10)
			if f.err == nil {
				require.True(f.t, next.IsZero(), "one page holds them all")
			}
		}},
		{"All", withParentIn("a", ranked(five)), func(ctx context.Context, r *subset.Repo[parent, item], f *readFix) {
			f.items, f.err = nil, nil
			for it, err := range r.All(ctx, "a", options.Find().SetBatchSize(2)) {
				if f.err != nil {
					f.t.Errorf("All yielded after its error: %v, %v", it, err)
				}
				if err != nil {
					f.err = err
					continue
				}
				f.items = append(f.items, it)
			}
		}},
	}
	faultPlans(t, func(t *testing.T, p subset.Plan) {
		faults.Concurrently(t, len(reads), func(i int) string { return reads[i].name }, func(t *testing.T, i int) {
			read := reads[i]
			op := func(ctx context.Context, db *mongo.Database, f *readFix) error {
				read.op(ctx, faultRepo(db, p), f)
				return f.err
			}
			faults.Run(t, faults.New(t), faults.Case[*readFix]{
				Reuse: true,
				Prepare: func(t *testing.T, db *mongo.Database) *readFix {
					seed(t, db, seedParent{id: "a", items: five})
					return &readFix{t: t, db: db, seed: readSnapshot(t, db, "a")}
				},
				Op: op,
				Retry: func(ctx context.Context, db *mongo.Database, f *readFix) error {
					sawFault(f.t, read.name, f.err)
					require.LessOrEqual(f.t, len(f.items), len(read.want))
					if read.name == "All" {
						require.Equal(f.t, read.want[:len(f.items)], append([]item{}, f.items...), "a failed All yielded a prefix of the items, in order")
					} else {
						require.Empty(f.t, f.items, "a failed %s returns no items", read.name)
					}
					return op(ctx, db, f)
				},
				Check: func(t *testing.T, _ *mongo.Database, f *readFix) {
					require.NoError(t, f.err)
					require.Equal(t, read.want, f.items, "the whole result, in order")
					require.Equal(t, f.seed, readSnapshot(t, f.db, "a"), "a read writes nothing")
				},
			})
		})
	})
}

// shifted returns the items with k added to their ids: the items of
// another parent (an id is unique across the items collection).
func shifted(items []item, k int64) []item {
	out := slices.Clone(items)
	for i := range out {
		out[i].ID += k
	}
	return out
}

// otherWriter connects a client that is not the harness's: its commands
// run no OnCommand hooks and are not counted by faults.Run.
func otherWriter(t *testing.T) *mongo.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, _, err := dial.Connect(ctx, mongotest.URI(), func() *options.ClientOptions { return options.Client().SetTimeout(time.Minute) })
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Disconnect(context.Background()) })
	return c
}

// deletedFix is the state of the case of an Add to a parent deleted
// under it.
type deletedFix struct {
	t       *testing.T
	inserts atomic.Int32 // the inserts the Add sent
	deleted atomic.Int32 // the times another writer deleted the parent
	calls   []error
}

// faultsAddDeletedParent breaks, at every step, an Add to a parent that
// another writer deletes (Delete: the parent, then its items) just before
// the Add inserts its items: the Add reads the parent, inserts, finds its
// push or compare-and-set matching nothing, reads the parent again, finds
// it gone and deletes the items it inserted; it took effect before the
// deletion, so it reports nil and leaves no item behind, as the godoc
// says. A call struck by a fault reports the fault (never nil or
// patterns.ErrNotFound while the items it stored may remain: a caller
// would take them for deleted); its retry reports patterns.ErrNotFound
// (nil when the parent was deleted only at its own insert) and deletes
// them.
func faultsAddDeletedParent(t *testing.T) {
	other := otherWriter(t)
	faultPlans(t, func(t *testing.T, p subset.Plan) {
		faults.Run(t, faults.New(t), addDeletedParentCase(other, p))
	})
}

// addDeletedParentCase is the case of faultsAddDeletedParent on plan p,
// the parent deleted through other.
func addDeletedParentCase(other *mongo.Client, p subset.Plan) faults.Case[*deletedFix] {
	items := []item{{ID: 6, Score: 45}, {ID: 7, Score: 5}}
	op := func(ctx context.Context, db *mongo.Database, f *deletedFix) error {
		err := faultRepo(db, p).Add(ctx, "a", items...)
		f.calls = append(f.calls, err)
		if errors.Is(err, patterns.ErrNotFound) {
			return nil // an outcome expected, recorded for Check
		}
		return err
	}
	return faults.Case[*deletedFix]{
		Prepare: func(t *testing.T, db *mongo.Database) *deletedFix {
			seed(t, db, seedParent{id: "a", items: five})
			f := &deletedFix{t: t}
			o := faultRepo(other.Database(db.Name()), p)
			mongotest.OnCommand(t, db, "insert", func(ctx context.Context) {
				if f.inserts.Add(1) == 1 { // the first insert only, sent again or not
					if err := o.Delete(context.WithoutCancel(ctx), "a"); err != nil {
						panic(err)
					}
					f.deleted.Add(1)
				}
			})
			return f
		},
		Op: op,
		Retry: func(ctx context.Context, db *mongo.Database, f *deletedFix) error {
			sawFault(f.t, "Add", f.calls[0])
			return op(ctx, db, f)
		},
		Check: func(t *testing.T, db *mongo.Database, f *deletedFix) {
			require.EqualValues(t, 1, f.deleted.Load(), "the other writer deleted the parent once")
			s := readSnapshot(t, db, "a")
			require.False(t, s.found, "the parent is gone")
			require.Empty(t, s.items, "no item is left behind")
			last := f.calls[len(f.calls)-1]
			if last == nil {
				return // the Add took effect before the deletion
			}
			require.ErrorIs(t, last, patterns.ErrNotFound, "the last call reports the parent missing, or nil")
			require.True(t, strings.HasPrefix(last.Error(), `subset: Add: parent "a": `), "the package's format: %v", last)
		},
	}
}

// faultsAddTooLargeTakesBack breaks the last step of an Add that the
// parent has no room for (an item of the largest size a cap of 1 allows,
// under a parent with a field of its own): the deletion of the item it
// stored, before it reaches the server. The caller must not see
// patterns.ErrTooLarge then, which tells that nothing is stored (it would
// not send the item again, and the item would stay in the items
// collection, outside the subset, for a later recomputation to meet),
// but the fault; Add again reports patterns.ErrTooLarge and deletes it.
// The other steps are TestFaults's (Add_several): a 16 MiB item costs
// seconds per run on the embedded server, so only the step of the
// take-back runs here, by a reset, which the driver does not retry.
// (A group of TestFaults, not a test of its own: as a parallel test it
// waited for a slot of -parallel, and on FerretDB 2 it then ran alone for
// four minutes after the others.)
func faultsAddTooLargeTakesBack(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped: -short, and a 16 MiB item costs seconds on the embedded server")
	}
	p := faults.New(t)
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, plan subset.Plan) {
		ctx := context.Background()
		r, items := tightParent(t, plan)
		db := items.Database()
		big := largest(t, 2, 5)
		c := mongotest.NewCounter(t, db)
		sent := c.Count(func() { require.ErrorIs(t, r.Add(ctx, "a", big), patterns.ErrTooLarge) })
		require.Equal(t, "delete", sent[len(sent)-1], "the take-back is the last step: %v", sent)
		f := faults.Fault{Step: len(sent), Place: faults.Before, Kind: faults.Reset}
		t.Run(f.String(), func(t *testing.T) {
			faulty, err := subset.New[bson.M, any](p.Client().Database(db.Name()), config(1))
			require.NoError(t, err)
			subset.ForcePlan(faulty, plan)
			p.Arm(f)
			err = faulty.Add(ctx, "a", big)
			p.Disarm()
			require.True(t, p.Fired(), "the fault struck (err %v)", err)
			mongotest.Detail(t, "the caller saw: %v", err)
			sawFault(t, "Add", err)
			require.ErrorContains(t, err, "(Add again deletes them)")
			require.EqualValues(t, 1, count(t, items, bson.D{{Key: "_id", Value: 2}}), "the item stayed")
			require.ErrorIs(t, r.Add(ctx, "a", big), patterns.ErrTooLarge)
			require.Zero(t, count(t, items, bson.D{{Key: "_id", Value: 2}}), "Add again takes the item back")
			require.Equal(t, "small", body(t, r, "a", 0), "the subset is as it was")
		})
	})
}

// foreignFix is the state of the case of an Add with an id stored under
// another parent.
type foreignFix struct {
	t      *testing.T
	calls  []error
	other  snapshot // parent b as seeded
	resent bool     // the retry sent the item without the bad one
}

// faultsAddForeignID breaks, at every step, an Add to parent a of two
// items, one of whose ids is stored under parent b: the Add reads the
// parent, inserts (one item stored, one duplicate), reads the duplicate,
// finds it is b's, and deletes the item it stored; it reports
// patterns.ErrInvalid and writes nothing, as the godoc says (on the push
// plan: inserts, reads the duplicate, deletes). A call struck
// by a fault reports the fault (never patterns.ErrInvalid while the item
// it stored may remain). Its retry reports patterns.ErrInvalid, and may
// leave the item that the struck call stored (Add cannot tell it from one
// added before, the godoc says): the caller sends it again without the
// bad one, as the godoc says, and it is then stored once, in both places.
// Parent b is untouched throughout.
func faultsAddForeignID(t *testing.T) {
	items := []item{{ID: 6, Score: 45}, {ID: 11, Score: 1}}
	faultPlans(t, func(t *testing.T, p subset.Plan) {
		op := func(ctx context.Context, db *mongo.Database, f *foreignFix) error {
			err := faultRepo(db, p).Add(ctx, "a", items...)
			f.calls = append(f.calls, err)
			if errors.Is(err, patterns.ErrInvalid) {
				return nil // the outcome expected, recorded for Check
			}
			return err
		}
		faults.Run(t, faults.New(t), faults.Case[*foreignFix]{
			Reuse: true,
			Prepare: func(t *testing.T, db *mongo.Database) *foreignFix {
				seed(t, db, seedParent{id: "a", items: five}, seedParent{id: "b", items: []item{{ID: 11, Score: 2}}})
				return &foreignFix{t: t, other: readSnapshot(t, db, "b")}
			},
			Op: op,
			Retry: func(ctx context.Context, db *mongo.Database, f *foreignFix) error {
				sawFault(f.t, "Add", f.calls[0])
				if err := op(ctx, db, f); err != nil {
					return err
				}
				require.ErrorIs(f.t, f.calls[1], patterns.ErrInvalid, "the retry reports the id taken")
				f.resent = true
				return faultRepo(db, p).Add(ctx, "a", items[0])
			},
			Check: func(t *testing.T, db *mongo.Database, f *foreignFix) {
				if f.resent {
					// The resent Add recomputes once; on the push plan it
					// pushes, which leaves the revision alone.
					rev := int64(2)
					if p == pushPlan {
						rev = 1
					}
					requireSettled(t, db, "a", append(slices.Clone(five), items[0]), rev)
				} else {
					requireSettled(t, db, "a", five, 1)
					require.Len(t, f.calls, 1)
					require.ErrorIs(t, f.calls[0], patterns.ErrInvalid, "the call reports the id taken")
				}
				require.Equal(t, f.other, readSnapshot(t, db, "b"), "the other parent and its items are untouched")
			},
		})
	})
}

// missingFix is the state of a case that finds nothing to change.
type missingFix struct {
	t     *testing.T
	calls []error
	seed  snapshot // parent a as seeded
}

// faultsMissing breaks, at every step, the operations that find their
// parent or item missing and report patterns.ErrNotFound: Add to a
// missing parent (which reads it, then deletes the items of the call that
// an earlier attempt may have stored), Remove and Update of a missing
// item, Rebuild and Delete of a missing parent. A call struck by a fault
// reports the fault, never patterns.ErrNotFound, which it cannot know; the
// retry reports patterns.ErrNotFound; nothing is written.
func faultsMissing(t *testing.T) {
	ops := []struct {
		name string
		op   func(ctx context.Context, r *subset.Repo[parent, item]) error
	}{
		{"Add", func(ctx context.Context, r *subset.Repo[parent, item]) error {
			return r.Add(ctx, "nope", item{ID: 6, Score: 1})
		}},
		{"Remove", func(ctx context.Context, r *subset.Repo[parent, item]) error { return r.Remove(ctx, "a", int64(99)) }},
		{"Update", func(ctx context.Context, r *subset.Repo[parent, item]) error {
			return r.Update(ctx, "a", item{ID: 99, Score: 1})
		}},
		{"Rebuild", func(ctx context.Context, r *subset.Repo[parent, item]) error { return r.Rebuild(ctx, "nope") }},
		{"Delete", func(ctx context.Context, r *subset.Repo[parent, item]) error { return r.Delete(ctx, "nope") }},
	}
	faultPlans(t, func(t *testing.T, p subset.Plan) {
		faults.Concurrently(t, len(ops), func(i int) string { return ops[i].name }, func(t *testing.T, i int) {
			o := ops[i]
			op := func(ctx context.Context, db *mongo.Database, f *missingFix) error {
				err := o.op(ctx, faultRepo(db, p))
				f.calls = append(f.calls, err)
				if errors.Is(err, patterns.ErrNotFound) {
					return nil // the outcome expected, recorded for Check
				}
				return err
			}
			faults.Run(t, faults.New(t), faults.Case[*missingFix]{
				Reuse: true,
				Prepare: func(t *testing.T, db *mongo.Database) *missingFix {
					seed(t, db, seedParent{id: "a", items: five})
					return &missingFix{t: t, seed: readSnapshot(t, db, "a")}
				},
				Op: op,
				Retry: func(ctx context.Context, db *mongo.Database, f *missingFix) error {
					sawFault(f.t, o.name, f.calls[0])
					return op(ctx, db, f)
				},
				Check: func(t *testing.T, db *mongo.Database, f *missingFix) {
					last := f.calls[len(f.calls)-1]
					require.ErrorIs(t, last, patterns.ErrNotFound, "the last call reports what is missing")
					require.True(t, strings.HasPrefix(last.Error(), "subset: "+o.name+": parent "), "the package's format: %v", last)
					require.Equal(t, f.seed, readSnapshot(t, db, "a"), "nothing written")
					require.Empty(t, readSnapshot(t, db, "nope").items, "nothing written")
				},
			})
		})
	})
}
