package subset_test

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/internal/linear"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/subset"
)

// The history test: several goroutines Add, Update and Remove items of
// one parent through one repository (and Rebuild it) while others Get it
// and list its items with Page, and the recorded history is checked
// against a model of what the package promises (porcupine, through
// internal/linear).
//
// Without the items collection in view, the promise is linearizability:
// the subset a Get returns is the first Cap of the items of some
// linearization of the writes, each taking effect at one point between
// its call and its return, and one Get never sees a write that an
// earlier Get did not... unless the write took effect in between. The
// package documents one weakness, and the model encodes exactly it: every
// write changes the items collection first and the subset second, so a
// reader of the items collection (Page, All) may see a write in flight
// that a reader of the subset (Get) does not see yet, an Add's item
// stored but not in the subset, a Remove's item deleted but still in it
// (Get's godoc; the package documentation's Writes). So each write is two
// steps of the model per item, all between its call and its return, an
// item's step in the items collection before its step in the subset: a
// Get sees the subset's state, a Page the items collection's. The items
// of an Add of several are steps of their own, since the package
// documentation says a reader may see some before the others.
//
// With Config.CountField, Count reads the parent's count of its items,
// which every recomputation sets from a count of the items collection
// (Config.CountField's godoc): an Add or a Remove has a third step per
// item, the count's, after its step in the items collection and before
// the call returns. It is a step of its own, not the subset's: the count
// and the first Cap items are two reads of the items collection, so a
// recomputation may count an item that an Add in flight has stored and
// its read of the first Cap items missed; but the recomputations land in
// the order they read, so the count never goes back.

// linKind is a write of the history.
type linKind int

const (
	linAdd linKind = iota
	linUpdate
	linRemove
)

func (k linKind) String() string { return [...]string{"Add", "Update", "Remove"}[k] }

// linWrite is the input of one step of a write: to the items collection
// (subset false), or to the subset, or to the count (count true). Add and
// Update write the item with the score; Remove deletes it.
type linWrite struct {
	kind   linKind
	id     int
	score  int
	subset bool
	count  bool
}

// linRebuild is the input of a Rebuild, which changes nothing the model
// sees.
type linRebuild struct{}

// linRead is the input of a Get (subset), of a Page of every item, or of
// a Count (count).
type linRead struct{ subset, count bool }

// linItems is what a read returned: the items, as [id, score] pairs, in
// the order returned; or, for a Count, the count.
type linItems struct {
	items [][2]int
	n     int
	err   error
}

// linMax bounds the ids of the history test: the state holds a score per
// id.
const linMax = 256

// linState is the model's state: for each id, its score plus one (zero
// when absent), in the items collection and as the subset reflects it;
// and whether the count counts it.
type linState struct {
	items, subset [linMax]int8
	counted       [linMax]bool
}

// count is the number of items the count counts.
func (s linState) count() int {
	n := 0
	for _, c := range s.counted {
		if c {
			n++
		}
	}
	return n
}

// top returns the first n of the items of s (the subset's view
// when subset is set), in the configured order: highest score first,
// ties by highest id.
func (s linState) top(subset bool, n int) [][2]int {
	from := s.items
	if subset {
		from = s.subset
	}
	var out [][2]int
	for id, v := range from {
		if v != 0 {
			out = append(out, [2]int{id, int(v) - 1})
		}
	}
	slices.SortFunc(out, func(a, b [2]int) int {
		if c := cmp.Compare(b[1], a[1]); c != 0 {
			return c
		}
		return cmp.Compare(b[0], a[0])
	})
	return out[:min(n, len(out))]
}

// subsetModel is the model of a repository of Cap capacity (see the
// comment at the top of this file). A write whose call failed (its
// outcome unknown) may have taken each step or not; the test has no
// faults, and fails on any error, but the model stays honest about them.
func subsetModel(capacity int) porcupine.Model {
	m := porcupine.NondeterministicModel{
		Init: func() []any { return []any{linState{}} },
		Step: func(state, input, output any) []any {
			s := state.(linState)
			switch in := input.(type) {
			case linRead:
				out := output.(linItems)
				n := linMax
				if in.subset {
					n = capacity
				}
				switch {
				case out.err != nil:
				case in.count && out.n != s.count():
					return nil
				case !in.count && !slices.Equal(out.items, s.top(in.subset, n)):
					return nil
				}
				return []any{s}
			case linRebuild:
				return []any{s}
			}
			in := input.(linWrite)
			next := s
			v := int8(in.score + 1)
			if in.kind == linRemove {
				v = 0
			}
			if in.count {
				// The count, after the items collection: it counts an
				// added item once it is stored, a removed one until it
				// is deleted.
				added := in.kind == linAdd
				if s.counted[in.id] == added || (s.items[in.id] != 0) != added {
					return nil
				}
				next.counted[in.id] = added
			} else if !in.subset {
				// The items collection: the item exists unless it is added.
				if (s.items[in.id] == 0) != (in.kind == linAdd) {
					return nil
				}
				next.items[in.id] = v
			} else {
				// The subset, after the items collection: it holds the item
				// unless it is added, and follows what the items
				// collection holds.
				if (s.subset[in.id] == 0) != (in.kind == linAdd) || s.items[in.id] != v {
					return nil
				}
				next.subset[in.id] = v
			}
			if err, _ := output.(error); err != nil {
				return []any{s, next}
			}
			return []any{next}
		},
		DescribeOperation: func(input, output any) string {
			switch in := input.(type) {
			case linRead:
				op := "Page"
				if in.subset {
					op = "Get"
				}
				out := output.(linItems)
				switch {
				case out.err != nil:
					return fmt.Sprintf("%s() -> %v", op, out.err)
				case in.count:
					return fmt.Sprintf("Count() -> %d", out.n)
				}
				return fmt.Sprintf("%s() -> %v", op, out.items)
			case linRebuild:
				return fmt.Sprintf("Rebuild() -> %v", output)
			}
			in := input.(linWrite)
			where := "items"
			switch {
			case in.count:
				where = "count"
			case in.subset:
				where = "subset"
			}
			return fmt.Sprintf("%s(%d, %d) %s -> %v", in.kind, in.id, in.score, where, output)
		},
		DescribeState: func(state any) string {
			s := state.(linState)
			return fmt.Sprintf("items %v, subset %v, count %d", s.top(false, linMax), s.top(true, linMax), s.count())
		},
	}
	return m.ToModel()
}

// errOf returns err as an any that is nil when err is, for the model.
func errOf(err error) any { return err }

// TestLinearizable records writers adding (one item or two per call),
// updating and removing their own items of one parent (and rebuilding
// it), through one repository,
// while readers Get it and Page through all its items, and checks the
// history with subsetModel, on every plan the server runs; and again with
// a count field (counted), which readers read with Count too. Each writer
// changes only items of its own, one call after another, so that no Add
// of an item runs concurrently with its Remove (which Remove's godoc
// excludes). Afterwards the subset is the first Cap of the items, and the
// count their number.
func TestLinearizable(t *testing.T) {
	const writers, readers, capacity, maxReads = 4, 2, 3, 150
	each := mongotest.Scale(24, 12)
	require.Less(t, 2*writers*each, linMax, "the ids fit the model's state")
	faultPlans(t, func(t *testing.T, p subset.Plan) {
		linearizable(t, p, false, writers, readers, capacity, maxReads, each)
		// With a count field, an Add or a Remove is three steps of the
		// model, not two: fewer writes keep the check within its time.
		linearizable(t, p, true, writers, readers, capacity, maxReads, each*2/3)
	})
}

// linearizable is one run of TestLinearizable on plan p, with a count
// field when withCount.
func linearizable(t *testing.T, p subset.Plan, withCount bool, writers, readers, capacity, maxReads, each int) {
	t.Run(map[bool]string{false: "plain", true: "counted"}[withCount], func(t *testing.T) {
		ctx := context.Background()
		db := mongotest.DB(t)
		cfg := config(capacity)
		if withCount {
			cfg = counted(capacity)
		}
		r := newRepo[parent, item](t, db, cfg, p)
		insertParents(t, db, "a")
		counter := mongotest.NewCounter(t, db)
		// h is the history of the subset: the writes' steps in the items
		// collection and in the subset, Get and Page; hc, with a count
		// field, that of the count: the steps in the items collection and
		// in the count, and Count. The model checks each (a check of both
		// at once, which the count's steps make far less deterministic,
		// did not finish in minutes on a loaded FerretDB 2).
		var h, hc linear.History
		do := func(client int, in any, call func() any) {
			var into []*linear.History
			switch in := in.(type) {
			case linWrite:
				if !in.count {
					into = append(into, &h)
				}
				if withCount && (in.count || !in.subset) {
					into = append(into, &hc)
				}
			case linRead:
				if in.count {
					into = append(into, &hc)
				} else {
					into = append(into, &h)
				}
			default:
				into = append(into, &h)
			}
			record(into, client, in, call)
		}
		pairs := func(items []item) [][2]int {
			out := [][2]int{}
			for _, it := range items {
				out = append(out, [2]int{int(it.ID), int(it.Score)})
			}
			return out
		}
		// write runs a write of the items as its steps: the items
		// collection's for each item, then the subset's for each, each
		// recorded over the call (each inner call's span lies within the
		// outer's).
		write := func(w int, kind linKind, items [][2]int, call func() error) {
			var steps []linWrite
			for _, subset := range []bool{false, true} {
				for _, it := range items {
					steps = append(steps, linWrite{kind, it[0], it[1], subset, false})
				}
			}
			if withCount && kind != linUpdate {
				for _, it := range items {
					steps = append(steps, linWrite{kind, it[0], it[1], false, true})
				}
			}
			var err error
			var run func(i int)
			run = func(i int) {
				if i == len(steps) {
					err = call()
					return
				}
				client := w // the first step's, then one of its own per step
				if i > 0 {
					client = writers + readers + w*len(steps) + i
				}
				do(client, steps[i], func() any {
					run(i + 1)
					return errOf(err)
				})
			}
			run(0)
			if err != nil {
				t.Errorf("%s %v: %v", kind, items, err)
			}
		}
		var writing, reading sync.WaitGroup
		for w := range writers {
			seed := uint64(time.Now().UnixNano()) + uint64(w)
			mongotest.Detail(t, "writer %d: seed %d", w, seed)
			rnd := rand.New(rand.NewPCG(seed, 0))
			writing.Go(func() {
				owned := map[int]bool{}
				next := 0
				for k := range each {
					// A pause of 0 to 2 ms desynchronises the writers, which
					// would otherwise take turns on the single connection of
					// FerretDB 1.x in lockstep, each at the same step.
					time.Sleep(time.Duration(rnd.IntN(8)) * time.Millisecond)
					var mine []int
					for id := range owned {
						mine = append(mine, id)
					}
					slices.Sort(mine)
					score := rnd.IntN(8)
					switch {
					case len(mine) == 0 || k%4 == 0 || k%4 == 2:
						// One item, or two (every other Add).
						var adds [][2]int
						var its []item
						for range 1 + k%4/2 {
							id := 1 + 2*w*each + next
							next++
							owned[id] = true
							adds = append(adds, [2]int{id, score})
							its = append(its, item{ID: int64(id), Score: int64(score)})
							score = rnd.IntN(8)
						}
						write(w, linAdd, adds, func() error { return r.Add(ctx, "a", its...) })
					case k%8 == 1:
						id := mine[rnd.IntN(len(mine))]
						delete(owned, id)
						write(w, linRemove, [][2]int{{id, 0}}, func() error { return r.Remove(ctx, "a", int64(id)) })
					case k%8 == 5:
						do(w, linRebuild{}, func() any {
							err := r.Rebuild(ctx, "a")
							if err != nil {
								t.Errorf("Rebuild: %v", err)
							}
							return errOf(err)
						})
					default:
						id := mine[rnd.IntN(len(mine))]
						write(w, linUpdate, [][2]int{{id, score}}, func() error {
							return r.Update(ctx, "a", item{ID: int64(id), Score: int64(score)})
						})
					}
				}
			})
		}
		done := make(chan struct{})
		var reads atomic.Int32
		read := func(client int, in linRead) linItems {
			reads.Add(1)
			var out linItems
			do(client, in, func() any {
				switch {
				case in.count:
					var n int64
					n, out.err = r.Count(ctx, "a")
					out.n = int(n)
				case in.subset:
					var pa parent
					pa, out.err = r.Get(ctx, "a")
					out.items = pairs(pa.Top)
				default:
					var items []item
					items, _, out.err = r.Page(ctx, "a", subset.Cursor{}, linMax)
					out.items = pairs(items)
				}
				return out
			})
			if out.err != nil {
				t.Errorf("read: %v", out.err)
			}
			return out
		}
		// The readers take turns at Get, Page and, with a count field,
		// Count.
		kinds := []linRead{{subset: true}, {}}
		if withCount {
			kinds = append(kinds, linRead{count: true})
		}
		for c := range readers {
			reading.Go(func() {
				for i := range maxReads {
					select {
					case <-done:
						return
					default:
						read(writers+c, kinds[(i+c)%len(kinds)])
					}
				}
			})
		}
		writing.Wait()
		close(done)
		reading.Wait()
		all := read(writers, linRead{})
		require.Equal(t, all.items[:min(capacity, len(all.items))], read(writers, linRead{subset: true}).items, "once the writes end, the subset is the first Cap items")
		if withCount {
			require.Equal(t, len(all.items), read(writers, linRead{count: true}).n, "once the writes end, the count is the number of items")
		}
		updates := 0
		for _, c := range counter.Commands() {
			if c == "update" {
				updates++
			}
		}
		final, err := r.Get(ctx, "a")
		require.NoError(t, err)
		mongotest.Detail(t, "%d operations, %d reads; %d updates, revision %d", h.Len()+hc.Len(), reads.Load(), updates, final.Rev)
		linear.Check(t, subsetModel(capacity), &h, 2*time.Minute)
		if withCount {
			linear.Check(t, subsetModel(capacity), &hc, 2*time.Minute)
		}
	})
}

// record runs call as one operation of each history in hs (nested, so
// that each records it over the call), as linear.History.Do does for
// one, and returns its output.
func record(hs []*linear.History, client int, in any, call func() any) any {
	if len(hs) == 0 {
		return call()
	}
	var out any
	hs[0].Do(client, in, func() any {
		out = record(hs[1:], client, in, call)
		return out
	})
	return out
}

// TestSubsetModel: the model accepts what the package promises and
// rejects the rest.
func TestSubsetModel(t *testing.T) {
	model := subsetModel(2)
	op := func(client int, call, ret int64, in, out any) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Call: call, Return: ret, Input: in, Output: out}
	}
	// steps are the two steps of a write, over [call, ret]; counted, the
	// three of a write with a count field.
	steps := func(client int, call, ret int64, kind linKind, id, score int, err error) []porcupine.Operation {
		return []porcupine.Operation{
			op(client, call, ret, linWrite{kind, id, score, false, false}, errOf(err)),
			op(client+10, call, ret, linWrite{kind, id, score, true, false}, errOf(err)),
		}
	}
	counted := func(client int, call, ret int64, kind linKind, id, score int, err error) []porcupine.Operation {
		return append(steps(client, call, ret, kind, id, score, err),
			op(client+20, call, ret, linWrite{kind, id, score, false, true}, errOf(err)))
	}
	get := func(call, ret int64, items ...[2]int) porcupine.Operation {
		return op(5, call, ret, linRead{subset: true}, linItems{items: append([][2]int{}, items...)})
	}
	page := func(call, ret int64, items ...[2]int) porcupine.Operation {
		return op(6, call, ret, linRead{}, linItems{items: append([][2]int{}, items...)})
	}
	count := func(call, ret int64, n int) porcupine.Operation {
		return op(7, call, ret, linRead{count: true}, linItems{n: n})
	}
	history := func(parts ...any) []porcupine.Operation {
		var out []porcupine.Operation
		for _, p := range parts {
			switch p := p.(type) {
			case porcupine.Operation:
				out = append(out, p)
			case []porcupine.Operation:
				out = append(out, p...)
			}
		}
		return out
	}
	for name, tc := range map[string]struct {
		ops []porcupine.Operation
		ok  bool
	}{
		"the first Cap of the items of the writes that returned": {history(
			steps(0, 0, 1, linAdd, 1, 5, nil), steps(1, 2, 3, linAdd, 2, 7, nil), steps(0, 4, 5, linAdd, 3, 1, nil),
			get(6, 7, [2]int{2, 7}, [2]int{1, 5}), page(6, 7, [2]int{2, 7}, [2]int{1, 5}, [2]int{3, 1}),
		), true},
		"ties broken by the highest id": {history(
			steps(0, 0, 1, linAdd, 1, 5, nil), steps(1, 2, 3, linAdd, 2, 5, nil),
			get(6, 7, [2]int{2, 5}, [2]int{1, 5}),
		), true},
		"an item of a write that returned is missing": {history(
			steps(0, 0, 1, linAdd, 1, 5, nil),
			get(2, 3),
		), false},
		"the subset not in order": {history(
			steps(0, 0, 1, linAdd, 1, 5, nil), steps(1, 2, 3, linAdd, 2, 7, nil),
			get(6, 7, [2]int{1, 5}, [2]int{2, 7}),
		), false},
		"more than Cap": {history(
			steps(0, 0, 1, linAdd, 1, 5, nil), steps(1, 2, 3, linAdd, 2, 7, nil), steps(0, 4, 5, linAdd, 3, 1, nil),
			get(6, 7, [2]int{2, 7}, [2]int{1, 5}, [2]int{3, 1}),
		), false},
		"Page sees an Add in flight that Get does not see yet": {history(
			steps(0, 0, 10, linAdd, 1, 5, nil),
			page(1, 2, [2]int{1, 5}), get(3, 4),
		), true},
		"Get sees an Add in flight that Page does not see yet": {history(
			steps(0, 0, 10, linAdd, 1, 5, nil),
			get(1, 2, [2]int{1, 5}), page(3, 4),
		), false},
		"Get sees a Remove in flight's item after Page saw it deleted": {history(
			steps(0, 0, 1, linAdd, 1, 5, nil), steps(0, 2, 10, linRemove, 1, 0, nil),
			page(3, 4), get(5, 6, [2]int{1, 5}),
		), true},
		"Get sees the Remove's item again after it saw it gone": {history(
			steps(0, 0, 1, linAdd, 1, 5, nil), steps(0, 2, 10, linRemove, 1, 0, nil),
			get(3, 4), get(5, 6, [2]int{1, 5}),
		), false},
		"an Update in flight, old then new": {history(
			steps(0, 0, 1, linAdd, 1, 5, nil), steps(0, 2, 10, linUpdate, 1, 9, nil),
			get(3, 4, [2]int{1, 5}), get(5, 6, [2]int{1, 9}),
		), true},
		"an Update in flight, new then old": {history(
			steps(0, 0, 1, linAdd, 1, 5, nil), steps(0, 2, 10, linUpdate, 1, 9, nil),
			get(3, 4, [2]int{1, 9}), get(5, 6, [2]int{1, 5}),
		), false},
		"a Rebuild changes nothing": {history(
			steps(0, 0, 1, linAdd, 1, 5, nil), op(1, 2, 3, linRebuild{}, errOf(nil)),
			get(4, 5, [2]int{1, 5}),
		), true},
		"Count follows the Adds that returned": {history(
			counted(0, 0, 1, linAdd, 1, 5, nil), counted(1, 2, 3, linAdd, 2, 7, nil),
			count(4, 5, 2),
		), true},
		"Count misses an Add that returned": {history(
			counted(0, 0, 1, linAdd, 1, 5, nil),
			count(2, 3, 0),
		), false},
		"Count sees an Add in flight that Get does not see yet": {history(
			counted(0, 0, 10, linAdd, 1, 5, nil),
			count(1, 2, 1), get(3, 4),
		), true},
		"Count goes back": {history(
			counted(0, 0, 10, linAdd, 1, 5, nil),
			count(1, 2, 1), count(3, 4, 0),
		), false},
		"Count sees a Remove in flight": {history(
			counted(0, 0, 1, linAdd, 1, 5, nil), counted(0, 2, 10, linRemove, 1, 0, nil),
			count(3, 4, 1), count(5, 6, 0),
		), true},
		"Count sees a Remove in flight undone": {history(
			counted(0, 0, 1, linAdd, 1, 5, nil), counted(0, 2, 10, linRemove, 1, 0, nil),
			count(3, 4, 0), count(5, 6, 1),
		), false},
		"Count counts an Update once": {history(
			counted(0, 0, 1, linAdd, 1, 5, nil), steps(0, 2, 3, linUpdate, 1, 9, nil),
			count(4, 5, 1),
		), true},
		"a failed Add, applied or not": {history(
			steps(0, 0, 1, linAdd, 1, 5, fmt.Errorf("broken")),
			page(2, 3, [2]int{1, 5}), get(4, 5),
		), true},
	} {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, tc.ok, porcupine.CheckOperations(model, tc.ops))
		})
	}
}
