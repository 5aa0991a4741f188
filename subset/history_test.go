package subset_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/chaos"
	"github.com/mongopatterns/mongopatterns/internal/linear"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/subset"
)

// The random histories of subset (internal/chaos): four clients, each a
// Repo of its own on a connection pool of its own (two of them under a
// storm of faults), run random mixes of Add, Update, Remove, Rebuild,
// Delete, Get, Page, Count and Item, and the application's creation of a
// parent, on two parents and six items (item i belongs to parent
// p<i%2+1>), with a cap of 2 and scores from 0 to 4, so that items enter,
// leave and re-enter full subsets, and an Add and a Remove of one item
// meet.
//
// The model is the subset as Get sees it, per parent (the package's
// promise: "the subset a Get returns is the first N items of a
// linearization of the writes, each item taking effect within its
// call": an Add of several items that returned nil is one operation per
// item): whether the parent exists, its items, and the weaknesses the
// godoc names, as exactly that:
//   - Remove's "An Add of the same item that overlaps its Remove leaves,
//     once both have returned, ... the subset the first Cap items. While
//     they run, a reader of the subset may see the item there": a Remove
//     that overlaps an Add of its item may leave a ghost (the version
//     stored, or the Add's), which Get may see until the Remove and the
//     Adds it overlaps have returned (no recomputation in between ends
//     it: the Add's push may land after it, "the Add's recomputation takes
//     it out before the Add returns"), and which another Remove of the
//     item may find in neither place (ErrNotFound), before that push;
//   - Remove's "Between the delete and the set, a reader of the subset
//     may still see the item": a Remove's ghost (the version it deleted)
//     may be seen by Get until it returns, after another call found the
//     item deleted;
//   - of two overlapping Removes of one item, the second may return nil
//     only if the first deleted the item (Remove's godoc);
//   - a Remove or an Update whose parent a Delete (nil or of unknown
//     outcome) deletes after its write returns ErrNotFound, and until the
//     Delete the subset may still hold the removed item, or the old
//     version of the updated one (their godoc);
//   - a Delete of a parent already gone returns nil beside an Add in
//     flight that may have stored items (not one that returned
//     ErrNotFound: that one found no parent, Add's godoc);
//   - an Add whose parent is deleted and created again while it runs
//     (or deleted before it and created while it runs: its read finds
//     no parent, and "Add again deletes them", the clean-up of an
//     earlier attempt's items, meets the new parent's) may
//     replace the version another call stored under the new parent with
//     its own, and the operations that overlap it may miss its items
//     (Get) or find them missing (Update and Remove: ErrNotFound); and it
//     may take effect twice, before the Delete ("another call may have
//     read, replaced or removed its items by then") and again on the
//     parent created while it runs ("Add runs again on that parent, and
//     returns once its items are stored there"), as it has them (Add's
//     godoc), at any moment until it returns, after another call removed
//     or replaced them on the new parent; and an Add that overlaps it
//     may store its own version of one of its items in place of the one
//     stored (between the clean-up and the insert again, which keeps it);
//   - an Update that overlaps an Add of its item may leave a ghost, the
//     Add's version, which that Add pushed after the Update's
//     recomputation, until the Add returns (Update's godoc);
//   - a Remove or an Update that overlaps a Delete of its parent that
//     overlaps a creation of it may find an item of the deleted parent
//     (one it held when deleted) under the new one and return nil, the
//     new subset unchecked until a Rebuild (Delete's godoc);
//   - an Add's ErrConflict leaves its items stored or not;
//   - of two overlapping Deletes of a parent both may return nil (the
//     second finds the items the first has yet to delete: Delete's
//     godoc, "a reader between them sees no parent while its items
//     remain");
//   - a parent created again while its Delete is in flight loses the
//     items stored under it meanwhile (Delete's deleteMany, modelled as
//     an operation of unknown outcome within the Delete's interval), and
//     its subset is unchecked until a Rebuild (Delete's godoc);
//   - a write that failed (unknown outcome, or Add's ErrConflict: "Add
//     again or Rebuild finishes the job") leaves the parent's subset
//     unchecked until a Rebuild returns nil (each write "is safe to
//     retry", no more).
//
// The items collection runs ahead of the subset ("between the two a
// reader sees the item in the full set but not in the subset"), and may
// miss, while an Add whose parent was deleted and created again runs, the
// items of another Add to the new parent that its clean-up deleted and
// stores again (Add's godoc): Page, Count and Item are checked in their
// call (one page in the configured order, each item once, and no more)
// and at rest, where every view is exact: the
// subset is the first Cap items of All once the writes end (checked
// before any Rebuild for a parent no weakness touched), Count is their
// number, Item finds each.

const histCap = 2

var histParents = []string{"p1", "p2"}

func histParentOf(id int64) string { return histParents[id%2] }

// sop is one drawn operation.
type sop struct {
	op     string // create, add, update, remove, rebuild, delete, get, page, count, item
	parent string
	items  []item // add: with their scores; update: one
	id     int64  // remove, item
	// The fields below are set by the partition.
	// seq is the operation's number in the history, from 1.
	seq int
	// overlapsAdd: a Remove that overlaps an Add of its item; a Delete
	// that overlaps an Add to its parent that may have stored items
	// (one that did not return ErrNotFound: that one found no parent and
	// stored nothing, Add's godoc), or another Delete of its parent that
	// may have taken effect (Delete's godoc: "A reader between them sees
	// no parent while its items remain": the second finds the items the
	// first has yet to delete, deletes them and returns nil).
	overlapsAdd bool
	// overlapRemoves: the seqs of the other Removes of its item that a
	// Remove overlaps.
	overlapRemoves []int
	// overlapsDelete: a Remove or an Update that overlaps a Delete of its
	// parent that may have deleted it (nil, or an unknown outcome: one
	// that returned ErrConflict or ErrNotFound deleted nothing).
	overlapsDelete bool
	// lingers: a Remove or an Update that overlaps a Delete of its
	// parent (nil or unknown) that overlaps a creation of it: the
	// deleted parent's items remain under the new one until the
	// Delete's deleteMany (Delete's godoc), where it may find one.
	lingers bool
	// addScores: the scores of its item in the Adds a Remove overlaps,
	// the versions its ghost may hold.
	addScores []int64
	// open: the seqs of the Removes whose overlap with an Add of their
	// item has not ended when this operation starts (one of them, or one
	// of those Adds, has not returned): their ghosts may still be seen.
	open []int
	// recreated: an Add that overlaps a Delete of its parent and a
	// creation of it (each of outcome nil or unknown), or a creation of
	// it alone (its read may find the parent missing, and its clean-up
	// of an earlier attempt's items meet the new parent's): its clean-up
	// may delete another call's item stored under the new parent, and
	// store its own version again (Add's godoc).
	recreated bool
	// missable: the item ids of the recreated Adds an operation overlaps,
	// which it may miss (Get), or find missing (Update and Remove: ErrNotFound).
	missable []int64
	// reruns: for a creation, the seqs of the recreated Adds it
	// overlaps, which may run again on the parent it creates; cleans,
	// their items (id and the Add's seq), which their clean-up may
	// delete from it.
	reruns []int
	cleans []ghost
}

// sout is an operation's outcome: ok, notfound, conflict, dup; Get's
// subset as "id:score,...".
type sout struct {
	res    string
	subset string
}

// sstate is one parent as Get sees it.
type sstate struct {
	exists bool
	items  string // "id:score," sorted by id
	// ghosts: "id:score:seq," of versions the subset may hold though not
	// stored as such: a removed item, or an updated item's old version;
	// seq is the Remove whose overlap with an Add left it (seen only while
	// that overlap lasts), 0 for one that lasts until a recomputation.
	ghosts string
	dirty  bool // a failed write: the subset is unchecked until a Rebuild
	// removed: "id:seq," the Remove that deleted each item last, which a
	// Remove overlapping it may find deleted and still in the subset.
	removed string
	// again: "id:score:seq," the items of the recreated Adds that took
	// effect before a Delete (Add's godoc: "the Add took effect before
	// the deletion (another call may have read, replaced or removed its
	// items by then)"), which the Add stores again on the parent created
	// while it runs ("Add runs again on that parent, and returns once its
	// items are stored there"); seq is the Add's, negative for an outcome
	// unknown.
	again string
	// cleaned: "id:0:seq," the items of the recreated Adds (seq) that a
	// creation of the parent overlapped, until those Adds return (an
	// operation "close" at their return): their clean-up may have
	// deleted them since, and another Add that overlaps such an Add may
	// store its own version before the insert again, which keeps it
	// (Add's godoc).
	cleaned string
	// lingering: "id:score," the items of a parent deleted by a Delete
	// that overlaps a creation of it, which remain under the new parent
	// until that Delete's deleteMany (wipe): a Remove or an Update may
	// find one (Delete's godoc).
	lingering string
}

func encodeItems(m map[int64]int64) string {
	var b strings.Builder
	for _, id := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&b, "%d:%d,", id, m[id])
	}
	return b.String()
}

func decodeItems(s string) map[int64]int64 {
	m := map[int64]int64{}
	for _, e := range strings.Split(strings.TrimSuffix(s, ","), ",") {
		if e == "" {
			continue
		}
		var id, score int64
		fmt.Sscanf(e, "%d:%d", &id, &score)
		m[id] = score
	}
	return m
}

// firstN is the subset of items: the first Cap by score, then id, both
// descending (config's order), as "id:score,...".
func firstN(items ...map[int64]int64) string {
	var all []item
	for _, m := range items {
		for id, score := range m {
			all = append(all, item{ID: id, Score: score})
		}
	}
	slices.SortFunc(all, func(a, b item) int { return cmp.Or(cmp.Compare(b.Score, a.Score), cmp.Compare(b.ID, a.ID)) })
	return subsetString(all[:min(len(all), histCap)])
}

func subsetString(items []item) string {
	var b strings.Builder
	for _, it := range items {
		fmt.Fprintf(&b, "%d:%d,", it.ID, it.Score)
	}
	return b.String()
}

// ghost is one entry of sstate.ghosts.
type ghost struct {
	id, score int64
	seq       int
}

func decodeGhosts(s string) []ghost {
	var gs []ghost
	for _, e := range strings.Split(strings.TrimSuffix(s, ","), ",") {
		if e == "" {
			continue
		}
		var g ghost
		fmt.Sscanf(e, "%d:%d:%d", &g.id, &g.score, &g.seq)
		gs = append(gs, g)
	}
	return gs
}

func encodeGhosts(gs []ghost) string {
	var b strings.Builder
	for _, g := range gs {
		fmt.Fprintf(&b, "%d:%d:%d,", g.id, g.score, g.seq)
	}
	return b.String()
}

// seenSubset reports whether subset is the first Cap of items with some
// of the ghosts (each in place of the stored version of its id, if any)
// and without some of the missable items.
func seenSubset(items map[int64]int64, ghosts []ghost, missable []int64, subset string) bool {
	var miss []int64
	for _, id := range missable {
		if _, ok := items[id]; ok && !slices.Contains(miss, id) {
			miss = append(miss, id)
		}
	}
	for gm := range 1 << len(ghosts) {
		for mm := range 1 << len(miss) {
			m := maps.Clone(items)
			for i, id := range miss {
				if mm&(1<<i) != 0 {
					delete(m, id)
				}
			}
			for i, g := range ghosts {
				if gm&(1<<i) != 0 {
					m[g.id] = g.score
				}
			}
			if firstN(m) == subset {
				return true
			}
		}
	}
	return false
}

var subsetHistories = (&porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		overlap := func(a, b porcupine.Operation) bool { return a.Call < b.Return && b.Call < a.Return }
		ins := make([]sop, len(history))
		for i, o := range history {
			ins[i] = o.Input.(sop)
			ins[i].seq = i + 1
		}
		// took: an operation op on parent that returned nil or an unknown
		// outcome, one that may have taken effect.
		took := func(j int, op, parent string) bool {
			out, known := history[j].Output.(sout)
			return ins[j].op == op && ins[j].parent == parent && (!known || out.res == "ok")
		}
		overlapsTook := func(o porcupine.Operation, op, parent string) bool {
			for j, a := range history {
				if took(j, op, parent) && overlap(a, o) {
					return true
				}
			}
			return false
		}
		// rivalAdd: another Add of one of the items of the Add i (o), on
		// its parent, of outcome nil or unknown, overlaps it.
		rivalAdd := func(i int, o porcupine.Operation) bool {
			for j, a := range history {
				if j == i || !took(j, "add", ins[i].parent) || !overlap(a, o) {
					continue
				}
				for _, it := range ins[j].items {
					if slices.ContainsFunc(ins[i].items, func(x item) bool { return x.ID == it.ID }) {
						return true
					}
				}
			}
			return false
		}
		// missingAtCall: the parent of the Add i (o) may be missing at
		// its call: a Delete (nil or unknown) returned before it, and
		// no operation that finds the parent (nil from an Add, Update,
		// Remove, Item, Get, Count or Rebuild; a creation's duplicate)
		// ran wholly between the last such Delete's return and o's call.
		missingAtCall := func(i int, o porcupine.Operation) bool {
			last := int64(-1)
			for j, d := range history {
				if took(j, "delete", ins[i].parent) && d.Return < o.Call {
					last = max(last, d.Return)
				}
			}
			if last < 0 {
				return false
			}
			for j, e := range history {
				out, known := e.Output.(sout)
				if j == i || ins[j].parent != ins[i].parent || !known || e.Call <= last || e.Return >= o.Call {
					continue
				}
				switch {
				case out.res == "ok" && slices.Contains([]string{"add", "update", "remove", "item", "get", "count", "rebuild"}, ins[j].op),
					out.res == "dup" && ins[j].op == "create":
					return false
				}
			}
			return true
		}
		// ends: for each Remove, when it returns, or, when it overlaps
		// an Add of its item, when the last of them returns: its ghost is
		// gone then (Remove's godoc: "Between the delete and the set, a
		// reader of the subset may still see the item"; "once both have
		// returned ... the subset the first Cap items").
		ends := map[int]int64{}
		for i, o := range history {
			in := &ins[i]
			switch in.op {
			case "add":
				// A creation that ends after the start of a Delete, both
				// overlapping the Add: the parent deleted and created
				// again during it.
				for j, d := range history {
					if took(j, "delete", in.parent) && overlap(d, o) {
						for k, c := range history {
							in.recreated = in.recreated || took(k, "create", in.parent) && overlap(c, o) && c.Return > d.Call
						}
					}
				}
				// Or a creation that overlaps the Add, the parent deleted
				// before it: its read may find no parent, and its
				// clean-up of what an earlier attempt may have left
				// (Add's godoc: "Add again deletes them, and reports
				// ErrNotFound. The deletion matches the parent's items
				// with the ids of Add's, and, when it deleted some, Add
				// reads the parent again ...: if the application created
				// the parent again meanwhile, another call may have
				// stored items with those ids under it, which the
				// deletion cannot tell from this Add's; so Add runs again
				// on that parent, and returns once its items are stored
				// there and in its subset, taking effect after the
				// creation") deletes another call's item stored under the
				// parent created meanwhile, and stores its own version
				// (seed 1896026777515044206, portable, FerretDB 2.7).
				// Only an Add that ran again (nil, or unknown: one that
				// returned ErrNotFound stored nothing), and only over
				// another Add of one of its items that overlaps it:
				// under the parent created after this Add's read, only
				// an Add that read it after that creation, so after
				// this Add's start, and stored before its clean-up, so
				// before its end, stored an item it deletes.
				// And only when the parent may be missing at its read: a
				// Delete returned before its call, and no operation
				// found the parent between that Delete's return and the
				// Add's call (an outside attack: a creation of unknown
				// outcome of a parent never deleted, or one that an
				// Add's nil before the call proved done, let the Add
				// replace a version its insert keeps).
				if out, known := o.Output.(sout); (!known || out.res == "ok") && rivalAdd(i, o) && missingAtCall(i, o) {
					for k, c := range history {
						in.recreated = in.recreated || took(k, "create", in.parent) && overlap(c, o)
					}
				}
			case "delete":
				in.lingers = overlapsTook(o, "create", in.parent)
			case "remove", "update":
				id := in.id
				if in.op == "update" {
					id = in.items[0].ID
				}
				ends[in.seq] = o.Return
				for j, a := range history {
					// (An Add that returned ErrNotFound stored and
					// pushed nothing: Add's godoc.)
					if out, known := a.Output.(sout); known && out.res == "notfound" {
						continue
					}
					if add := ins[j]; add.op == "add" && overlap(a, o) {
						for _, it := range add.items {
							if it.ID == id {
								in.overlapsAdd = in.op == "remove"
								in.addScores = append(in.addScores, it.Score)
								ends[in.seq] = max(ends[in.seq], o.Return, a.Return)
							}
						}
					}
				}
			}
		}
		by := map[string][]porcupine.Operation{}
		for i, o := range history {
			in := ins[i]
			for seq, end := range ends {
				if o.Call < end {
					in.open = append(in.open, seq)
				}
			}
			slices.Sort(in.open)
			for j, a := range history {
				other := ins[j]
				if j == i || !overlap(a, o) {
					continue
				}
				if other.op == "add" && other.recreated {
					for _, it := range other.items {
						in.missable = append(in.missable, it.ID)
					}
					if in.op == "create" {
						in.reruns = append(in.reruns, other.seq)
						for _, it := range other.items {
							in.cleans = append(in.cleans, ghost{id: it.ID, seq: other.seq})
						}
					}
				}
				if in.op == "remove" && other.op == "remove" && other.id == in.id {
					in.overlapRemoves = append(in.overlapRemoves, other.seq)
				}
				if out, known := a.Output.(sout); in.op == "delete" && other.op == "add" && other.parent == in.parent &&
					(!known || out.res != "notfound") {
					in.overlapsAdd = true
				}
				if in.op == "delete" && took(j, "delete", in.parent) {
					in.overlapsAdd = true
				}
			}
			if in.op == "remove" || in.op == "update" {
				in.overlapsDelete = overlapsTook(o, "delete", in.parent)
				for j, a := range history {
					in.lingers = in.lingers || took(j, "delete", in.parent) && overlap(a, o) && overlapsTook(a, "create", in.parent)
				}
			}
			o.Input = in
			by[in.parent] = append(by[in.parent], o)
			// The package documentation: "each item taking effect
			// within its call (a reader may see some items of an Add of
			// several before the others)": an Add of several items that
			// returned nil is one operation per item, within its
			// interval (seed 2120185567800187952, native, FerretDB 2.7:
			// another Add of one of them met it stored and pushed it,
			// before the first Add's push of both).
			// (Not a recreated Add, whose items go with the parent, or
			// are stored again on the new one, all of them: Add's
			// godoc.)
			// So is an Add of unknown outcome, whose call never
			// returned (seed 10576445193237198552, portable, FerretDB
			// 2.7: a failed Add's insert, held in a stalled connection
			// and sent again by the driver, applied its items at two
			// moments).
			out, known := o.Output.(sout)
			if in.op == "add" && (!known || out.res == "ok") && len(in.items) > 1 && !in.recreated {
				parts := in.items
				in.items = parts[:1]
				by[in.parent][len(by[in.parent])-1].Input = in
				for k := 1; k < len(parts); k++ {
					part := in
					part.items = parts[k : k+1]
					by[in.parent] = append(by[in.parent], porcupine.Operation{
						ClientId: -1 - (1+k)*len(history) - i, Call: o.Call, Return: o.Return,
						Input: part, Output: o.Output,
					})
				}
			}
		}
		// wipe: the second command of a Delete (nil or of unknown
		// outcome) that overlaps a creation of its parent, its
		// deleteMany of the parent's items, which may delete those stored
		// under the parent created again meanwhile (Delete's godoc): one
		// operation more within the Delete's interval, of unknown outcome
		// (it met such items, or not).
		for i, o := range history {
			if in := ins[i]; took(i, "delete", in.parent) && overlapsTook(o, "create", in.parent) {
				by[in.parent] = append(by[in.parent], porcupine.Operation{
					ClientId: -1 - i, Call: o.Call, Return: o.Return,
					Input:  sop{op: "wipe", parent: in.parent, seq: in.seq},
					Output: linear.Unknown{Err: errors.New("the deleteMany of a Delete that overlaps a creation of its parent")},
				})
			}
		}
		// rerun: an Add whose parent is deleted and created again while it
		// runs takes its items back from the new parent and stores them
		// again, as it has them, before it returns (Add's godoc), after
		// another call may have removed or replaced them there: one
		// operation more within the Add's interval, of unknown outcome.
		// close: the return of such an Add, which ends the window its
		// clean-up opened (see sstate.cleaned).
		for i, o := range history {
			if in := ins[i]; in.op == "add" && in.recreated {
				by[in.parent] = append(by[in.parent], porcupine.Operation{
					ClientId: -1 - len(history) - i, Call: o.Call, Return: o.Return,
					Input:  sop{op: "rerun", parent: in.parent, items: in.items, seq: in.seq},
					Output: linear.Unknown{Err: errors.New("the run again of an Add whose parent was created again")},
				}, porcupine.Operation{
					ClientId: -1 - len(history) - i, Call: o.Return, Return: o.Return,
					Input: sop{op: "close", parent: in.parent, seq: in.seq}, Output: sout{res: "ok"},
				})
			}
		}
		var parts [][]porcupine.Operation
		for _, p := range histParents {
			if len(by[p]) > 0 {
				parts = append(parts, by[p])
			}
		}
		return parts
	},
	Init: func() []any { return []any{sstate{exists: true}} },
	Step: func(state, input, output any) []any {
		s, in := state.(sstate), input.(sop)
		out, known := output.(sout)
		items := decodeItems(s.items)
		// visible: the ghosts that this operation may still see.
		var visible []ghost
		for _, g := range decodeGhosts(s.ghosts) {
			if g.seq == 0 || slices.Contains(in.open, g.seq) {
				visible = append(visible, g)
			}
		}
		// pending: the visible ghosts of a Remove whose overlap with an
		// Add of its item has not ended: that Add's push (of its version,
		// or of the version its insert met) may land after any
		// recomputation or Remove in between (Remove's godoc: "While they
		// run, a reader of the subset may see the item there ... in the
		// version that Add pushed ... the Add's recomputation takes it out
		// before the Add returns"), so none of them ends it, and a Remove
		// before the push finds the item in neither place.
		var pending []ghost
		for _, g := range visible {
			if g.seq != 0 {
				pending = append(pending, g)
			}
		}
		missable := slices.Contains(in.missable, in.id) || len(in.items) > 0 && slices.Contains(in.missable, in.items[0].ID)
		with := func(change func(m map[int64]int64), ghosts string, dirty bool) sstate {
			m := decodeItems(s.items)
			change(m)
			return sstate{exists: s.exists, items: encodeItems(m), ghosts: ghosts, dirty: dirty, removed: s.removed, again: s.again, cleaned: s.cleaned, lingering: s.lingering}
		}
		res := func(want string, ok bool, states ...any) []any {
			if known && out.res == want && ok {
				return states
			}
			return nil
		}
		cleared := sstate{again: s.again}
		switch in.op {
		case "create":
			cleaned := decodeGhosts(s.cleaned)
			for _, g := range in.cleans {
				if !slices.Contains(cleaned, g) {
					cleaned = append(cleaned, g)
				}
			}
			s.cleaned = encodeGhosts(cleaned)
			created := []any{sstate{exists: true, items: s.items, dirty: s.dirty, ghosts: s.ghosts, removed: s.removed, again: s.again, cleaned: s.cleaned, lingering: s.lingering}}
			// The recreated Adds it overlaps that took effect before the
			// Delete may store their items on it again (as they have them).
			var rest []ghost
			m, rerun, dirty := decodeItems(s.items), false, s.dirty
			for _, g := range decodeGhosts(s.again) {
				if !slices.Contains(in.reruns, max(g.seq, -g.seq)) {
					rest = append(rest, g)
					continue
				}
				m[g.id], rerun, dirty = g.score, true, dirty || g.seq < 0
			}
			if rerun {
				created = append(created, sstate{exists: true, items: encodeItems(m), dirty: dirty, ghosts: s.ghosts, removed: s.removed, again: encodeGhosts(rest), cleaned: s.cleaned, lingering: s.lingering})
			}
			if !known {
				return append(created, s)
			}
			return append(res("ok", !s.exists, created...), res("dup", s.exists, s)...)
		case "close":
			s.cleaned = encodeGhosts(slices.DeleteFunc(decodeGhosts(s.cleaned), func(g ghost) bool { return g.seq == in.seq }))
			return []any{s}
		case "rerun":
			if !s.exists {
				return []any{s}
			}
			put := func(m map[int64]int64) {
				for _, it := range in.items {
					m[it.ID] = it.Score
				}
			}
			// Once it stored them again, the window its clean-up opened
			// is closed.
			again := with(put, s.ghosts, s.dirty)
			again.cleaned = encodeGhosts(slices.DeleteFunc(decodeGhosts(s.cleaned), func(g ghost) bool { return g.seq == in.seq }))
			return []any{s, again}
		case "wipe":
			// Delete's godoc: a parent created again while its Delete is
			// in flight loses the items stored under it meanwhile, and its
			// subset may hold some of them, stored nowhere, until a
			// Rebuild.
			return []any{s, sstate{exists: s.exists, dirty: s.dirty || s.exists, removed: s.removed, again: s.again, cleaned: s.cleaned}}
		case "delete":
			if in.lingers {
				cleared.lingering = s.items
			}
			if !known {
				return []any{s, cleared, sstate{items: s.items, dirty: true, again: s.again}}
			}
			// An Add in flight whose parent was deleted may have stored
			// items that go with the parent only when it returns (Add's
			// godoc): a Delete that overlaps it may find and delete them,
			// and returns nil (Delete's godoc). An Add that returned
			// ErrNotFound stored nothing.
			return slices.Concat(res("ok", s.exists || len(items) > 0 || in.overlapsAdd, cleared),
				res("notfound", !s.exists && len(items) == 0, s), res("conflict", s.exists, s))
		case "add":
			add := func(m map[int64]int64) {
				for _, it := range in.items {
					if _, ok := m[it.ID]; !ok {
						m[it.ID] = it.Score
					}
				}
			}
			// rerun: st, with the Add's items to store again on the
			// parent created while it runs, after a Delete (Add's godoc).
			rerun := func(st sstate) sstate {
				seq := in.seq
				if !known {
					seq = -seq
				}
				for _, it := range in.items {
					st.again += encodeGhosts([]ghost{{id: it.ID, score: it.Score, seq: seq}})
				}
				return st
			}
			if !known {
				if in.recreated {
					return []any{s, with(add, s.ghosts, true), rerun(with(add, s.ghosts, true))}
				}
				return []any{s, with(add, s.ghosts, true)}
			}
			// A push keeps the ghosts; a recomputation (the portable path)
			// drops them.
			ok := []any{with(add, s.ghosts, s.dirty), with(add, "", s.dirty)}
			if in.recreated {
				ok = append(ok, rerun(with(add, s.ghosts, s.dirty)))
			}
			// Add's godoc: between the clean-up of a recreated Add that
			// this one overlaps (after a creation of the parent that
			// Add overlaps) and that Add's insert again, this Add
			// stores its own version of an item the clean-up deleted,
			// which the insert again then finds and keeps (seed
			// 12909746940021766493, portable, FerretDB 2.7: an Update of
			// the item returned nil, then an Add of it replaced it).
			var mine []item
			cleaned := decodeGhosts(s.cleaned)
			for _, it := range in.items {
				if slices.ContainsFunc(cleaned, func(g ghost) bool { return g.id == it.ID }) && slices.Contains(in.missable, it.ID) {
					mine = append(mine, it)
				}
			}
			for set := 1; set < 1<<len(mine); set++ {
				put := func(m map[int64]int64) {
					for i, it := range mine {
						if set&(1<<i) != 0 {
							m[it.ID] = it.Score
						}
					}
					add(m)
				}
				ok = append(ok, with(put, s.ghosts, s.dirty), with(put, "", s.dirty))
			}
			if in.recreated {
				// Add's godoc: its parent deleted and created again, its
				// clean-up may delete the version another call stored
				// under the new parent, and it stores its own again.
				put := func(m map[int64]int64) {
					for _, it := range in.items {
						m[it.ID] = it.Score
					}
				}
				ok = append(ok, with(put, s.ghosts, s.dirty), with(put, "", s.dirty))
			}
			return slices.Concat(res("ok", s.exists, ok...),
				// Add's godoc: ErrConflict after it deleted the items
				// it inserted, or with them stored.
				res("notfound", !s.exists, s), res("conflict", s.exists, with(add, s.ghosts, true), with(func(map[int64]int64) {}, s.ghosts, true)))
		case "update":
			it := in.items[0]
			old, stored := items[it.ID]
			set := func(m map[int64]int64) { m[it.ID] = it.Score }
			if !known {
				if !stored {
					return []any{s}
				}
				return []any{s, with(set, s.ghosts, true)}
			}
			// An Update that replaced the item and then found its parent
			// deleted reports ErrNotFound (Update's godoc): until the
			// Delete, the subset may hold the old version or the new one.
			underDelete := with(set, s.ghosts+encodeGhosts([]ghost{{id: it.ID, score: old}}), s.dirty)
			// Add's godoc: an Add of the item that overlaps the Update
			// may push its own version after the Update's
			// recomputation, its count then finding it replaced, and
			// its recomputation taking it out before it returns: a
			// ghost until then (seed 17840370533643764240, native,
			// FerretDB 2.7).
			updated := []any{with(set, encodeGhosts(pending), s.dirty)}
			// The version the Add read may be the one stored before
			// this Update.
			for _, score := range append([]int64{old}, in.addScores...) {
				updated = append(updated, with(set, encodeGhosts(append(slices.Clone(pending), ghost{id: it.ID, score: score, seq: in.seq})), s.dirty))
			}
			_, lingering := decodeItems(s.lingering)[it.ID]
			return slices.Concat(res("ok", s.exists && stored, updated...),
				// Delete's godoc: an Update may find an item of the
				// deleted parent under the new one; its recomputation
				// may put others in the new subset.
				res("ok", in.lingers && s.exists && !stored && lingering, with(func(map[int64]int64) {}, s.ghosts, true)),
				res("notfound", !s.exists || !stored, s),
				res("notfound", in.overlapsDelete && s.exists && stored, underDelete),
				// Add's godoc: an Add whose parent was deleted and created
				// again may have deleted the item for a while.
				res("notfound", stored && missable, s),
				// ErrConflict: its delete met a writer 5 times (nothing
				// changed), or after the replace its recomputation lost
				// 10 races (pushes sorting items out of a full subset in
				// its window, say): the subset unchecked until a Rebuild.
				res("conflict", s.exists && stored, s, with(set, s.ghosts, true)))
		case "remove":
			_, stored := items[in.id]
			_, lingering := decodeItems(s.lingering)[in.id]
			lingers := in.lingers && s.exists && !stored && lingering
			// unlinger: st without the lingering item, which this
			// Remove deleted.
			unlinger := func(st sstate) sstate {
				m := decodeItems(st.lingering)
				delete(m, in.id)
				st.lingering = encodeItems(m)
				return st
			}
			seen := slices.ContainsFunc(visible, func(g ghost) bool { return g.id == in.id })
			// Of two Removes of one item that overlap, the second may find
			// it deleted by the first and still in the subset, and finish
			// the first's job as after a failed Remove: both return nil
			// (Remove's godoc).
			byOverlap := false
			for id, seq := range decodeItems(s.removed) {
				byOverlap = byOverlap || id == in.id && slices.Contains(in.overlapRemoves, int(seq))
			}
			del := func(m map[int64]int64) { delete(m, in.id) }
			removed := func(st sstate) sstate {
				m := decodeItems(st.removed)
				m[in.id] = int64(in.seq)
				st.removed = encodeItems(m)
				return st
			}
			if !known {
				return []any{s, removed(with(del, s.ghosts, true))}
			}
			var ok []any
			if s.exists && (stored || seen || byOverlap) {
				ok = []any{removed(with(del, encodeGhosts(pending), s.dirty))}
				if stored {
					// Remove's godoc: "Between the delete and the set, a
					// reader of the subset may still see the item" (seed
					// 2258595712295147199, native, FerretDB 2.7: an
					// Update found it deleted, Gets then saw it in the
					// subset, the Remove still running).
					ok = append(ok, removed(with(del, encodeGhosts(append(slices.Clone(pending), ghost{id: in.id, score: items[in.id], seq: in.seq})), s.dirty)))
				}
				if in.overlapsAdd && stored {
					// The ghost is the version stored, or the one an Add
					// pushed after the Remove took it out, which the Add's
					// count then finds not stored as pushed (Add's godoc):
					// an Update between the Add's insert and the Remove
					// makes them differ. It is gone once the Remove and the
					// Adds it overlaps have returned.
					for _, score := range append([]int64{items[in.id]}, in.addScores...) {
						ok = append(ok, removed(with(del, encodeGhosts(append(slices.Clone(pending), ghost{id: in.id, score: score, seq: in.seq})), s.dirty)))
					}
				}
			}
			// A Remove that deleted the item and then found its parent
			// deleted reports ErrNotFound (Remove's godoc): until the
			// Delete, the subset may still hold the item.
			underDelete := removed(with(del, s.ghosts+encodeGhosts([]ghost{{id: in.id, score: items[in.id]}}), s.dirty))
			return slices.Concat(res("ok", true, ok...),
				// A ghost is what the subset may hold: a recomputation
				// of another call that read the items after the ghost's
				// Remove may have taken it out, and land after a later
				// linearization point of its call (seed
				// 7343382530299683198, native, FerretDB 2.7: a Remove
				// under a Delete left a ghost, another Remove's
				// recomputation took it out, a third Remove found the item
				// in neither place).
				// That Remove found the item in neither place: a ghost
				// that lasts (seq 0) is gone, for no recomputation puts
				// it back; one of an overlap with an Add may come back
				// with its push.
				// Delete's godoc: the items of a parent deleted while it
				// was created again remain under the new one until the
				// Delete's deleteMany: a Remove may find and delete one
				// (seed 18306938464898995388, native, FerretDB 2.7), its
				// recomputation may put others in the new subset, which
				// is unchecked until a Rebuild.
				res("ok", lingers, unlinger(with(del, s.ghosts, true))),
				res("notfound", !s.exists || !stored, with(del, encodeGhosts(slices.DeleteFunc(decodeGhosts(s.ghosts), func(g ghost) bool {
					return g.id == in.id && g.seq == 0
				})), s.dirty)),
				res("notfound", s.exists && stored && in.overlapsDelete, underDelete),
				// Add's godoc: an Add whose parent was deleted and created
				// again may have deleted the item for a while.
				res("notfound", stored && missable, s),
				// ErrConflict: as Update's, after the delete.
				res("conflict", s.exists && stored, s, removed(with(del, s.ghosts, true))))
		case "rebuild":
			fixed := sstate{exists: s.exists, items: s.items, ghosts: encodeGhosts(pending), again: s.again, cleaned: s.cleaned, lingering: s.lingering}
			if !known {
				return []any{s, fixed}
			}
			// ErrConflict: 10 lost races; the subset as it was.
			return slices.Concat(res("ok", s.exists, fixed), res("notfound", !s.exists, s), res("conflict", s.exists, s))
		case "get":
			if !known {
				return []any{s}
			}
			// The ghosts no longer visible are gone for good: their
			// overlaps ended before this Get started.
			rest := s
			rest.ghosts = encodeGhosts(visible)
			return append(res("ok", s.exists && (s.dirty || seenSubset(items, visible, in.missable, out.subset)), rest),
				res("notfound", !s.exists, s)...)
		}
		return []any{s} // page, count, item: the items collection, checked in the call and at rest
	},
	DescribeOperation: func(input, output any) string {
		in := input.(sop)
		return fmt.Sprintf("%s(%s, %s %d #%d overlapsAdd=%t overlapRemoves=%v overlapsDelete=%t open=%v recreated=%t missable=%v) -> %v",
			in.op, in.parent, subsetString(in.items), in.id, in.seq, in.overlapsAdd, in.overlapRemoves, in.overlapsDelete, in.open, in.recreated, in.missable, output)
	},
	DescribeState: func(state any) string { return fmt.Sprintf("%+v", state.(sstate)) },
}).ToModel()

// subsetHistory holds each client's Repo.
type subsetHistory struct {
	p     subset.Plan
	mu    sync.Mutex
	repos map[*mongo.Database]*subset.Repo[parent, item]
}

func (h *subsetHistory) repo(db *mongo.Database) *subset.Repo[parent, item] {
	h.mu.Lock()
	defer h.mu.Unlock()
	r, ok := h.repos[db]
	if !ok {
		var err error
		r, err = subset.New[parent, item](db, config(histCap))
		if err != nil {
			panic(err)
		}
		subset.ForcePlan(r, h.p)
		h.repos[db] = r
	}
	return r
}

// subsetHistSpec is subset's random history on plan p.
func subsetHistSpec(p subset.Plan) chaos.Spec[*subsetHistory, sop] {
	return chaos.Spec[*subsetHistory, sop]{
		Ops: mongotest.Scale(24, 12),
		Prepare: func(t *testing.T, db *mongo.Database, _ *rand.Rand) *subsetHistory {
			newRepo[parent, item](t, db, config(histCap), p)
			for _, id := range histParents {
				_, err := db.Collection("parents").InsertOne(context.Background(), bson.D{{Key: "_id", Value: id}})
				require.NoError(t, err)
			}
			return &subsetHistory{p: p, repos: map[*mongo.Database]*subset.Repo[parent, item]{}}
		},
		Gen: func(rng *rand.Rand, _, _ int, _ *subsetHistory) sop {
			itemOf := func() item {
				id := int64(1 + rng.IntN(6))
				return item{ID: id, Parent: histParentOf(id), Score: int64(rng.IntN(5))}
			}
			it := itemOf()
			op := sop{parent: it.Parent, id: it.ID, items: []item{it}}
			kinds := []string{"create", "add", "add", "add", "update", "update", "remove", "remove", "remove",
				"rebuild", "delete", "get", "get", "get", "page", "count", "item"}
			op.op = kinds[rng.IntN(len(kinds))]
			if op.op == "add" && rng.IntN(2) == 0 {
				if other := itemOf(); other.Parent == it.Parent && other.ID != it.ID {
					op.items = append(op.items, other)
				}
			}
			return op
		},
		Input: func(op sop) any { return op },
		Do:    subsetHistDo,
		Model: subsetHistories,
		Final: subsetHistFinal,
	}
}

func subsetHistDo(ctx context.Context, db *mongo.Database, h *subsetHistory, op sop) (any, error) {
	r := h.repo(db)
	outcome := func(err error) (any, error) {
		res, err := chaos.Outcome(err)
		return sout{res: res}, err
	}
	switch op.op {
	case "create":
		_, err := db.Collection("parents").InsertOne(ctx, bson.D{{Key: "_id", Value: op.parent}})
		return outcome(err)
	case "add":
		return outcome(r.Add(ctx, op.parent, op.items...))
	case "update":
		return outcome(r.Update(ctx, op.parent, op.items[0]))
	case "remove":
		return outcome(r.Remove(ctx, op.parent, op.id))
	case "rebuild":
		return outcome(r.Rebuild(ctx, op.parent))
	case "delete":
		return outcome(r.Delete(ctx, op.parent))
	case "get":
		p, err := r.Get(ctx, op.parent)
		if err != nil {
			return outcome(err)
		}
		return sout{res: "ok", subset: subsetString(p.Top)}, nil
	case "page":
		items, _, err := r.Page(ctx, op.parent, subset.Cursor{}, 100)
		if err != nil {
			return outcome(err)
		}
		if !slices.IsSortedFunc(items, func(a, b item) int { return cmp.Or(cmp.Compare(b.Score, a.Score), cmp.Compare(b.ID, a.ID)) }) ||
			len(slices.CompactFunc(slices.Clone(items), func(a, b item) bool { return a.ID == b.ID })) != len(items) {
			return nil, fmt.Errorf("page: %v: not in the configured order, each once", items)
		}
		return sout{res: "ok"}, nil
	case "count":
		_, err := r.Count(ctx, op.parent)
		return outcome(err)
	case "item":
		_, err := r.Item(ctx, op.parent, op.id)
		return outcome(err)
	}
	panic(op.op)
}

// overlapsCreate reports whether o overlaps a creation of parent in ops.
func overlapsCreate(ops []porcupine.Operation, o porcupine.Operation, parent string) bool {
	for _, a := range ops {
		if in := a.Input.(sop); in.op == "create" && in.parent == parent && a.Call < o.Return && o.Call < a.Return {
			return true
		}
	}
	return false
}

// subsetHistFinal checks the state at rest, per parent: for a parent no
// weakness touched (no write of unknown outcome or ErrConflict), the
// subset is the first Cap items of All ("once the writes end"; Remove's
// godoc: an Add and a Remove of one item that overlap leave, "once both
// have returned, ... the subset the first Cap items", no ghost): an item
// stored and missing from the subset, or one in the subset and not
// stored, is a violation; after a Rebuild (the godoc's repair), it is for
// every parent; Count is the number of items, Item finds each, and pages
// of one item walk All.
func subsetHistFinal(t *testing.T, db *mongo.Database, h *subsetHistory, ops []porcupine.Operation) {
	r := h.repo(db)
	ctx := context.Background()
	touched := map[string]string{}
	for _, o := range ops {
		in := o.Input.(sop)
		out, known := o.Output.(sout)
		switch {
		case !known && in.op != "get" && in.op != "page" && in.op != "count" && in.op != "item":
			touched[in.parent] = fmt.Sprintf("%s of unknown outcome", in.op)
		case known && out.res == "conflict":
			touched[in.parent] = fmt.Sprintf("%s returned ErrConflict", in.op)
		case in.op == "delete" && overlapsCreate(ops, o, in.parent):
			touched[in.parent] = "a Delete that overlaps a creation of its parent (Delete's godoc: the new parent's items may be lost, until a Rebuild)"
		}
	}
	// check compares the views of parent id at rest.
	check := func(id string) {
		var all []item
		for it, err := range r.All(ctx, id) {
			require.NoError(t, err)
			all = append(all, item{ID: it.ID, Score: it.Score})
		}
		p, err := r.Get(ctx, id)
		if errors.Is(err, patterns.ErrNotFound) {
			return
		}
		require.NoError(t, err)
		require.Equal(t, subsetString(all[:min(len(all), histCap)]), subsetString(p.Top), "parent %s at rest: the subset is the first %d items of All", id, histCap)
		n, err := r.Count(ctx, id)
		require.NoError(t, err)
		require.EqualValues(t, len(all), n, "parent %s: Count", id)
		var paged []item
		for after := (subset.Cursor{}); ; {
			page, next, err := r.Page(ctx, id, after, 1)
			require.NoError(t, err)
			for _, it := range page {
				paged = append(paged, item{ID: it.ID, Score: it.Score})
			}
			if next.IsZero() {
				break
			}
			after = next
		}
		require.Equal(t, subsetString(all), subsetString(paged), "parent %s: pages of one", id)
		for _, it := range all {
			got, err := r.Item(ctx, id, it.ID)
			require.NoError(t, err)
			require.Equal(t, it.Score, got.Score)
		}
	}
	for _, id := range histParents {
		mongotest.Detail(t, "parent %s at rest: touched by %q", id, touched[id])
		if touched[id] == "" {
			check(id)
		}
		if err := r.Rebuild(ctx, id); !errors.Is(err, patterns.ErrNotFound) {
			require.NoError(t, err)
		}
		check(id)
	}
}

// TestHistories runs random histories of every operation on shared
// parents and items under faults (see subsetHistSpec), on each server
// path.
func TestHistories(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		chaos.Run(t, subsetHistSpec(p))
	})
}

// TestAddRacingRemoveOfItsItem is the regression test of a history's
// violation (seed 13939254401484788372 on FerretDB 2.7, portable plan):
// Add(x) meets x stored (a duplicate key on its insert), then, before it
// reads which parent holds x, a Remove(x) deletes it; Add then reports
// ErrInvalid, "item ids [x] are taken by items that are not the
// parent's", which claims bad input: no parent but the Add's ever held x.
// Any order of the two calls gives nil for the Add (x stored, or stored
// again after the Remove). Found by the histories of issue 34; not fixed
// here (the concurrent Add and Remove of one item is being fixed in the
// same code), so it is skipped until then.
func TestAddRacingRemoveOfItsItem(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		db := mongotest.DB(t)
		r := newRepo[parent, item](t, db, config(histCap), p)
		ctx := context.Background()
		_, err := db.Collection("parents").InsertOne(ctx, bson.D{{Key: "_id", Value: "p1"}})
		require.NoError(t, err)
		x := item{ID: 6, Parent: "p1", Score: 3}
		require.NoError(t, r.Add(ctx, "p1", x))
		other := mongotest.NewClient(t).Database(db.Name())
		var inserted atomic.Bool
		var once sync.Once
		// Add's read, after its insert, of the stored versions of the ids
		// the insert found taken: the Remove's delete lands just before it.
		mongotest.OnCommand(t, db, "insert", func(context.Context) { inserted.Store(true) })
		mongotest.OnCommand(t, db, "find", func(context.Context) {
			if inserted.Load() {
				once.Do(func() {
					_, err := other.Collection("items").DeleteOne(ctx, bson.D{{Key: "_id", Value: x.ID}})
					require.NoError(t, err)
				})
			}
		})
		require.NoError(t, r.Add(ctx, "p1", x), "an Add racing a Remove of its item claims no bad input")
	})
}

// TestHistoriesModel: the model rejects a subset that misses an added
// item, and accepts the ghost the godoc allows only while a Remove and an
// Add of its item overlap; it accepts two Removes of one item that both
// return nil only when they overlap, and a Delete that returns nil for a
// parent already deleted only when it overlaps an Add to it; an Add whose
// parent is deleted and created again may replace another call's version,
// and store its items again on the new parent after taking effect before
// the Delete; the ghost outlives a Rebuild, or a Remove that finds the
// item in neither place, while the Add runs, and no longer; a Delete
// that overlaps a creation of its parent may delete the items stored
// under the new parent, and no other Delete.
// (An item stored and missing from the subset after such an overlap is
// the final check's: the model does not see the items collection.)
func TestHistoriesModel(t *testing.T) {
	x := item{ID: 2, Parent: "p1", Score: 3}
	op := func(in sop, out sout, call, ret int64) porcupine.Operation {
		return porcupine.Operation{Input: in, Output: out, Call: call, Return: ret}
	}
	get := func(subset string) porcupine.Operation {
		return op(sop{op: "get", parent: "p1"}, sout{res: "ok", subset: subset}, 10, 11)
	}
	add := op(sop{op: "add", parent: "p1", items: []item{x}}, sout{res: "ok"}, 0, 3)
	remove := func(call, ret int64) porcupine.Operation {
		return op(sop{op: "remove", parent: "p1", id: 2}, sout{res: "ok"}, call, ret)
	}
	// recreated is an Add of x (score 3) that overlaps another Add of x
	// (score 1), an Update of x that returns ErrNotFound and two Gets
	// that see during and after, with the parent deleted and created
	// again before the other Add when again is set.
	recreated := func(again bool, during, after string) []porcupine.Operation {
		h := []porcupine.Operation{
			op(sop{op: "add", parent: "p1", items: []item{x}}, sout{res: "ok"}, 0, 100),
			op(sop{op: "add", parent: "p1", items: []item{{ID: 2, Parent: "p1", Score: 1}}}, sout{res: "ok"}, 50, 60),
			op(sop{op: "get", parent: "p1"}, sout{res: "ok", subset: during}, 65, 66),
			op(sop{op: "update", parent: "p1", items: []item{{ID: 2, Parent: "p1", Score: 4}}}, sout{res: "notfound"}, 70, 80),
			op(sop{op: "get", parent: "p1"}, sout{res: "ok", subset: after}, 110, 111),
		}
		if again {
			h = append(h, op(sop{op: "delete", parent: "p1"}, sout{res: "ok"}, 10, 20),
				op(sop{op: "create", parent: "p1"}, sout{res: "ok"}, 30, 40))
		}
		return h
	}
	// createdDuring is a Delete over [0, 5], an Add of x (score 3) over
	// [10, 110], the parent created at create, another Add of x (score
	// 1) over [40, 50], a Get that sees it and a Get after both Adds that
	// sees the first one's version.
	createdDuring := func(create int64) []porcupine.Operation {
		return []porcupine.Operation{
			op(sop{op: "delete", parent: "p1"}, sout{res: "ok"}, 0, 5),
			op(sop{op: "add", parent: "p1", items: []item{x}}, sout{res: "ok"}, 10, 110),
			op(sop{op: "create", parent: "p1"}, sout{res: "ok"}, create, create+2),
			op(sop{op: "add", parent: "p1", items: []item{{ID: 2, Parent: "p1", Score: 1}}}, sout{res: "ok"}, 40, 50),
			op(sop{op: "get", parent: "p1"}, sout{res: "ok", subset: "2:1,"}, 55, 56),
			op(sop{op: "get", parent: "p1"}, sout{res: "ok", subset: "2:3,"}, 120, 121),
		}
	}
	// lingering: x stored, a Delete over [10, 40], the parent created
	// again over [20, 30] when again is set (else before the Delete),
	// and a Remove of x over [25, 35] that returns nil after a Get
	// found the parent missing.
	lingering := func(again bool) []porcupine.Operation {
		create := int64(20)
		if !again {
			create = 5
		}
		return []porcupine.Operation{
			op(sop{op: "create", parent: "p1"}, sout{res: "dup"}, 0, 1),
			op(sop{op: "add", parent: "p1", items: []item{x}}, sout{res: "ok"}, 2, 3),
			op(sop{op: "delete", parent: "p1"}, sout{res: "ok"}, 10, 40),
			op(sop{op: "get", parent: "p1"}, sout{res: "notfound"}, 11, 12),
			op(sop{op: "create", parent: "p1"}, sout{res: map[bool]string{true: "ok", false: "dup"}[again]}, create, create+10),
			op(sop{op: "remove", parent: "p1", id: 2}, sout{res: "ok"}, 25, 35),
		}
	}
	// updateUnderAdd is an Add of x (score 3) over [0, 100] and an
	// Update of x (score 4) over [10, 60] that return nil, and a Get at
	// call that sees the Add's version.
	updateUnderAdd := func(call int64) []porcupine.Operation {
		return []porcupine.Operation{
			op(sop{op: "add", parent: "p1", items: []item{x}}, sout{res: "ok"}, 0, 100),
			op(sop{op: "update", parent: "p1", items: []item{{ID: 2, Parent: "p1", Score: 4}}}, sout{res: "ok"}, 10, 60),
			op(sop{op: "get", parent: "p1"}, sout{res: "ok", subset: "2:3,"}, call, call+1),
		}
	}
	// cleanupThenAdd is an Add of x over [0, 100], an Update of x (score
	// 4) over [45, 48] and an Add of x (score 1) over [50, 60] that
	// return nil, and a Get after them that sees the second Add's
	// version, with the parent deleted and created again over [10, 40]
	// when again is set.
	cleanupThenAdd := func(again bool) []porcupine.Operation {
		h := []porcupine.Operation{
			op(sop{op: "add", parent: "p1", items: []item{x}}, sout{res: "ok"}, 0, 100),
			op(sop{op: "update", parent: "p1", items: []item{{ID: 2, Parent: "p1", Score: 4}}}, sout{res: "ok"}, 45, 48),
			op(sop{op: "add", parent: "p1", items: []item{{ID: 2, Parent: "p1", Score: 1}}}, sout{res: "ok"}, 50, 60),
			op(sop{op: "get", parent: "p1"}, sout{res: "ok", subset: "2:1,"}, 110, 111),
		}
		if again {
			h = append(h, op(sop{op: "delete", parent: "p1"}, sout{res: "ok"}, 10, 20),
				op(sop{op: "create", parent: "p1"}, sout{res: "ok"}, 30, 40))
		}
		return h
	}
	// rerunAfter is an Add of x over [0, 100], an Update of x that
	// returns nil over [10, 20], a Delete over [30, 40], the parent
	// created again at create, and an Update of x that returns nil over
	// [110, 120].
	rerunAfter := func(create int64) []porcupine.Operation {
		return []porcupine.Operation{
			op(sop{op: "add", parent: "p1", items: []item{x}}, sout{res: "ok"}, 0, 100),
			op(sop{op: "update", parent: "p1", items: []item{{ID: 2, Parent: "p1", Score: 4}}}, sout{res: "ok"}, 10, 20),
			op(sop{op: "delete", parent: "p1"}, sout{res: "ok"}, 30, 40),
			op(sop{op: "create", parent: "p1"}, sout{res: "ok"}, create, create+1),
			op(sop{op: "update", parent: "p1", items: []item{{ID: 2, Parent: "p1", Score: 1}}}, sout{res: "ok"}, 110, 120),
		}
	}
	// ghostLater is an Add of x over [0, 100], a Remove of x that
	// returns nil over [10, 20], then between, and a Get at call that
	// sees x.
	ghostLater := func(between porcupine.Operation, call int64) []porcupine.Operation {
		return []porcupine.Operation{
			op(sop{op: "add", parent: "p1", items: []item{x}}, sout{res: "ok"}, 0, 100),
			remove(10, 20), between,
			op(sop{op: "get", parent: "p1"}, sout{res: "ok", subset: "2:3,"}, call, call+1),
		}
	}
	chaos.CheckModel(t, subsetHistories, []chaos.ModelCase{
		{Name: "added", History: []porcupine.Operation{add, get("2:3,")}, OK: true},
		{Name: "missed", History: []porcupine.Operation{add, get("")}, OK: false},
		{Name: "removed after", History: []porcupine.Operation{add, remove(4, 5), get("")}, OK: true},
		// Remove's godoc: "While they run, a reader of the subset may see
		// the item there", and "once both have returned ... the subset the
		// first Cap items" (this row saw the ghost after both returned,
		// which the godoc forbids: it is the next one).
		{Name: "a ghost during an overlap", History: []porcupine.Operation{
			op(sop{op: "add", parent: "p1", items: []item{x}}, sout{res: "ok"}, 0, 6), remove(1, 5),
			op(sop{op: "get", parent: "p1"}, sout{res: "ok", subset: "2:3,"}, 5, 7),
		}, OK: true},
		// A Remove under a Delete leaves a ghost the subset may hold:
		// another Remove of the item may find it there (nil) or, after
		// another call's recomputation, in neither place (ErrNotFound;
		// seed 7343382530299683198).
		{Name: "a ghost under a Delete, found", History: []porcupine.Operation{
			add, op(sop{op: "remove", parent: "p1", id: 2}, sout{res: "notfound"}, 10, 100),
			op(sop{op: "delete", parent: "p1"}, sout{res: "ok"}, 60, 70),
			remove(20, 30),
		}, OK: true},
		{Name: "a ghost under a Delete, not found", History: []porcupine.Operation{
			add, op(sop{op: "remove", parent: "p1", id: 2}, sout{res: "notfound"}, 10, 100),
			op(sop{op: "delete", parent: "p1"}, sout{res: "ok"}, 60, 70),
			op(sop{op: "remove", parent: "p1", id: 2}, sout{res: "notfound"}, 20, 30),
		}, OK: true},
		{Name: "a ghost after an overlap", History: []porcupine.Operation{add, remove(1, 5), get("2:3,")}, OK: false},
		{Name: "a ghost without one", History: []porcupine.Operation{add, remove(4, 5), get("2:3,")}, OK: false},
		// Remove's godoc: "Between the delete and the set, a reader of
		// the subset may still see the item" (seed 2258595712295147199).
		{Name: "a ghost while its Remove runs, its delete seen", History: []porcupine.Operation{
			add, remove(4, 20),
			op(sop{op: "update", parent: "p1", items: []item{{ID: 2, Parent: "p1", Score: 1}}}, sout{res: "notfound"}, 5, 6),
			op(sop{op: "get", parent: "p1"}, sout{res: "ok", subset: "2:3,"}, 7, 8),
		}, OK: true},
		{Name: "a ghost after its Remove returned, its delete seen", History: []porcupine.Operation{
			add, remove(4, 6),
			op(sop{op: "update", parent: "p1", items: []item{{ID: 2, Parent: "p1", Score: 1}}}, sout{res: "notfound"}, 5, 6),
			op(sop{op: "get", parent: "p1"}, sout{res: "ok", subset: "2:3,"}, 7, 8),
		}, OK: false},
		// Remove's godoc: a Remove that finds its item deleted and still
		// in the subset finishes the job (seeds 2745279744111502981 and
		// 10335793924364891230, portable, FerretDB 2.7).
		// An Update between the Add's insert and its push, then a
		// Remove: the Add pushes its own version, the ghost (seed
		// 6244136107548545972, native, FerretDB 2.7, before a340ef6).
		{Name: "the ghost of an Add's version", History: []porcupine.Operation{
			op(sop{op: "add", parent: "p1", items: []item{x}}, sout{res: "ok"}, 0, 100),
			op(sop{op: "update", parent: "p1", items: []item{{ID: 2, Parent: "p1", Score: 1}}}, sout{res: "ok"}, 10, 200),
			remove(20, 30),
			op(sop{op: "get", parent: "p1"}, sout{res: "ok", subset: "2:3,"}, 40, 41),
			op(sop{op: "rebuild", parent: "p1"}, sout{res: "ok"}, 50, 60),
			op(sop{op: "get", parent: "p1"}, sout{res: "ok", subset: ""}, 70, 71),
		}, OK: true},
		{Name: "a ghost of no version", History: []porcupine.Operation{
			op(sop{op: "add", parent: "p1", items: []item{x}}, sout{res: "ok"}, 0, 100),
			op(sop{op: "update", parent: "p1", items: []item{{ID: 2, Parent: "p1", Score: 1}}}, sout{res: "ok"}, 10, 200),
			remove(20, 30),
			op(sop{op: "get", parent: "p1"}, sout{res: "ok", subset: "2:4,"}, 40, 41),
		}, OK: false},
		// Remove's godoc: the ghost is the Add's push, which may land
		// after a Rebuild (seed 15269516674813495340, native, FerretDB
		// 2.7: the push of another Add's version that the insert met), or
		// after another Remove found the item in neither place (seed
		// 1178137736206816791, native); it is gone once the Add returns.
		{Name: "a ghost pushed after a Rebuild", History: ghostLater(
			op(sop{op: "rebuild", parent: "p1"}, sout{res: "ok"}, 30, 40), 50), OK: true},
		{Name: "a ghost pushed after a Rebuild, the Add returned", History: ghostLater(
			op(sop{op: "rebuild", parent: "p1"}, sout{res: "ok"}, 30, 40), 110), OK: false},
		{Name: "a ghost pushed after a Remove found neither place", History: ghostLater(
			op(sop{op: "remove", parent: "p1", id: 2}, sout{res: "notfound"}, 30, 40), 50), OK: true},
		{Name: "a ghost pushed after a Remove found neither place, the Add returned", History: ghostLater(
			op(sop{op: "remove", parent: "p1", id: 2}, sout{res: "notfound"}, 30, 40), 110), OK: false},
		// Remove's godoc: a Remove whose parent is deleted after its
		// delete reports ErrNotFound (seed 16219730823490587493,
		// portable, FerretDB 2.7, before a340ef6).
		{Name: "a Remove that took effect, then its parent deleted", History: []porcupine.Operation{
			add,
			op(sop{op: "remove", parent: "p1", id: 2}, sout{res: "notfound"}, 4, 9),
			op(sop{op: "get", parent: "p1"}, sout{res: "ok", subset: ""}, 5, 6),
			op(sop{op: "delete", parent: "p1"}, sout{res: "ok"}, 7, 8),
		}, OK: true},
		{Name: "a Remove that took effect, no Delete", History: []porcupine.Operation{
			add,
			op(sop{op: "remove", parent: "p1", id: 2}, sout{res: "notfound"}, 4, 9),
			op(sop{op: "get", parent: "p1"}, sout{res: "ok", subset: ""}, 5, 6),
		}, OK: false},
		{Name: "two overlapping Removes of one item", History: []porcupine.Operation{add, remove(4, 7), remove(5, 8), get("")}, OK: true},
		{Name: "two Removes of one item, one after the other", History: []porcupine.Operation{add, remove(4, 5), remove(6, 7)}, OK: false},
		// Delete's godoc: the items of an Add in flight whose parent was
		// deleted count as items (seed 17011942923854671484, portable).
		{Name: "a Delete of a deleted parent, overlapping an Add", History: []porcupine.Operation{
			op(sop{op: "delete", parent: "p1"}, sout{res: "ok"}, 0, 2),
			op(sop{op: "add", parent: "p1", items: []item{x}}, sout{res: "ok"}, 1, 8),
			op(sop{op: "delete", parent: "p1"}, sout{res: "ok"}, 4, 5),
		}, OK: true},
		// Delete's godoc: between its two commands its items remain; a
		// Delete overlapping it finds and deletes them (seeds
		// 16930066025952134781 and 11370635597984806744, portable,
		// FerretDB 2.7).
		{Name: "two overlapping Deletes", History: []porcupine.Operation{
			op(sop{op: "delete", parent: "p1"}, sout{res: "ok"}, 0, 10),
			op(sop{op: "delete", parent: "p1"}, sout{res: "ok"}, 5, 8),
		}, OK: true},
		{Name: "two Deletes, one after the other", History: []porcupine.Operation{
			op(sop{op: "delete", parent: "p1"}, sout{res: "ok"}, 0, 4),
			op(sop{op: "delete", parent: "p1"}, sout{res: "ok"}, 5, 8),
		}, OK: false},
		{Name: "a Delete of a deleted parent, alone", History: []porcupine.Operation{
			op(sop{op: "delete", parent: "p1"}, sout{res: "ok"}, 0, 2),
			op(sop{op: "add", parent: "p1", items: []item{x}}, sout{res: "ok"}, 1, 3),
			op(sop{op: "delete", parent: "p1"}, sout{res: "ok"}, 4, 5),
		}, OK: false},
		// Delete's godoc: a parent created again while its Delete is in
		// flight loses the items stored under it meanwhile (its
		// deleteMany), until a Rebuild (attack test
		// TestAttackIncDeleteWipesTheNewParentsItems).
		{Name: "a Delete overlapping a creation, the new parent's item lost", History: []porcupine.Operation{
			op(sop{op: "delete", parent: "p1"}, sout{res: "ok"}, 0, 50),
			op(sop{op: "create", parent: "p1"}, sout{res: "ok"}, 10, 11),
			op(sop{op: "add", parent: "p1", items: []item{x}}, sout{res: "ok"}, 12, 13),
			op(sop{op: "rebuild", parent: "p1"}, sout{res: "ok"}, 60, 61),
			op(sop{op: "get", parent: "p1"}, sout{res: "ok", subset: ""}, 70, 71),
		}, OK: true},
		{Name: "a Delete before the creation, the new parent's item lost", History: []porcupine.Operation{
			op(sop{op: "delete", parent: "p1"}, sout{res: "ok"}, 0, 5),
			op(sop{op: "create", parent: "p1"}, sout{res: "ok"}, 10, 11),
			op(sop{op: "add", parent: "p1", items: []item{x}}, sout{res: "ok"}, 12, 13),
			op(sop{op: "rebuild", parent: "p1"}, sout{res: "ok"}, 60, 61),
			op(sop{op: "get", parent: "p1"}, sout{res: "ok", subset: ""}, 70, 71),
		}, OK: false},
		// Add's godoc: a parent deleted and created again while an Add
		// runs, another Add stores x under the new parent; the first
		// Add's clean-up deletes it (an Update then finds it missing,
		// a Get may miss it) and stores its own version again.
		{Name: "an Add's version replaces another's, its parent created again", History: recreated(true, "2:1,", "2:3,"), OK: true},
		{Name: "an Add's clean-up hides another's item, its parent created again", History: recreated(true, "", "2:3,"), OK: true},
		{Name: "an Add's version replaces another's, no parent created again", History: recreated(false, "2:1,", "2:3,")},
		// Add's godoc: "Add again deletes them, and reports ErrNotFound.
		// The deletion matches the parent's items with the ids of Add's,
		// and, when it deleted some, Add reads the parent again ...: if
		// the application created the parent again meanwhile, another
		// call may have stored items with those ids under it ...; so Add
		// runs again on that parent": an Add whose read found the parent
		// missing (deleted before it) deletes the x another Add stored
		// under the parent created meanwhile, and stores its own (seed
		// 1896026777515044206, portable, FerretDB 2.7).
		{Name: "an Add's version replaces another's, its parent created during it", History: createdDuring(20), OK: true},
		{Name: "an Add's version replaces another's, its parent created before it", History: createdDuring(6)},
		// Delete's godoc: the items of a parent deleted while it was
		// created again remain under the new one until the Delete's
		// deleteMany: a Remove finds one (seed 18306938464898995388).
		{Name: "a Remove of a deleted parent's item under the new one", History: lingering(true), OK: true},
		{Name: "a Remove of an item never stored, no parent created again", History: lingering(false)},
		// Add's godoc: an Add of x that overlaps an Update of x may
		// push its version after the Update's recomputation, and takes
		// it out before it returns (seed 17840370533643764240).
		{Name: "an Add's version seen after an Update it overlaps", History: updateUnderAdd(70), OK: true},
		{Name: "an Add's version seen after it returned, and the Update", History: updateUnderAdd(110)},
		// An Add of unknown outcome takes effect item by item, at any
		// moment (seed 10576445193237198552): x before a Remove of
		// x and y, y after it.
		{Name: "an Add of unknown outcome, its items at two moments", History: []porcupine.Operation{
			{Input: sop{op: "add", parent: "p1", items: []item{x, {ID: 4, Parent: "p1", Score: 5}}}, Output: linear.Unknown{Err: errors.New("timeout")}, Call: 0, Return: math.MaxInt64},
			op(sop{op: "remove", parent: "p1", id: 2}, sout{res: "ok"}, 10, 20),
			op(sop{op: "update", parent: "p1", items: []item{{ID: 4, Parent: "p1", Score: 1}}}, sout{res: "notfound"}, 30, 40),
			op(sop{op: "remove", parent: "p1", id: 4}, sout{res: "ok"}, 50, 60),
		}, OK: true},
		// The package documentation: "each item taking effect within
		// its call (a reader may see some items of an Add of several
		// before the others)": another Add of x met it stored by the
		// first, and pushed it before the first Add pushed both (seed
		// 2120185567800187952); once the first Add returned, both.
		{Name: "one item of an Add of two, seen before the other", History: []porcupine.Operation{
			op(sop{op: "add", parent: "p1", items: []item{x, {ID: 4, Parent: "p1", Score: 5}}}, sout{res: "ok"}, 0, 100),
			op(sop{op: "add", parent: "p1", items: []item{{ID: 2, Parent: "p1", Score: 1}}}, sout{res: "ok"}, 10, 20),
			op(sop{op: "get", parent: "p1"}, sout{res: "ok", subset: "2:3,"}, 30, 31),
		}, OK: true},
		{Name: "one item of an Add of two, seen after it returned", History: []porcupine.Operation{
			op(sop{op: "add", parent: "p1", items: []item{x, {ID: 4, Parent: "p1", Score: 5}}}, sout{res: "ok"}, 0, 100),
			op(sop{op: "add", parent: "p1", items: []item{{ID: 2, Parent: "p1", Score: 1}}}, sout{res: "ok"}, 10, 20),
			op(sop{op: "get", parent: "p1"}, sout{res: "ok", subset: "2:3,"}, 130, 131),
		}},
		// Add's godoc: between that clean-up and the first Add's insert
		// again, another Add stores its own version of x (score 1),
		// which the insert again finds and keeps, after an Update of x
		// (score 4) returned nil (seed 12909746940021766493).
		{Name: "another Add's version stored between an Add's clean-up and its insert again", History: cleanupThenAdd(true), OK: true},
		{Name: "another Add's version replaces a stored item, no parent created again", History: cleanupThenAdd(false)},
		// Add's godoc: an Add whose parent is deleted after its read took
		// effect before the deletion (an Update replaced its item), and
		// runs again on the parent created meanwhile, its items stored
		// there (seed 14132050636348520632, portable, FerretDB 2.7, an Add
		// of unknown outcome).
		{Name: "an Add's item replaced under the deleted parent, stored again under the new one", History: rerunAfter(50), OK: true},
		{Name: "an Add's item stored under a parent created after it returned", History: rerunAfter(101)},
	})
}

// TestAddWhileItsParentComesAndGoes holds the regression tests of two
// histories' violations, where another client acts in an Add's window
// (before its first update: its push, or its compare-and-set), once the
// Add has inserted x:
//   - the parent created during the Add (seed 13116070797207252469 on
//     FerretDB 2.7, native plan): the Add starts while its parent is
//     missing and inserts x, an orphan; another call deletes x as an item
//     of a missing parent (a Remove of x, which reports ErrNotFound; the
//     Delete of the parent; an Add of x that finds the parent missing and
//     deletes what it met); then the application creates the parent, and
//     the Add's push matches it. Its count found x gone, as after a Remove
//     between its insert and its push, and the Add returned nil with x
//     stored nowhere. No order of the calls explains it: the Add takes
//     effect only once the parent exists, and then x is stored. It must
//     return ErrNotFound and store nothing, or nil with x stored and in
//     the subset.
//   - the parent deleted during the Add (seeds 7035268088449287983 and
//     17177906585838646444 native, 5524665535612602684 portable): an
//     Update or a Remove of x returns nil, then the parent is deleted;
//     the Add found no parent at its push (or compare-and-set) and
//     returned ErrNotFound, which no order explains (the Update, or the
//     Remove, read x the Add stored). It must return nil, and no item of
//     the parent remain.
//
// One database for the rows, a parent each: the test is short.
func TestAddWhileItsParentComesAndGoes(t *testing.T) {
	type repo = *subset.Repo[parent, item]
	created := func(t *testing.T, r repo, items *mongo.Collection, x item, err error) {
		if errors.Is(err, patterns.ErrNotFound) {
			require.Zero(t, count(t, items, bson.D{{Key: "parent", Value: x.Parent}}), "no item stored")
			if p, err := r.Get(context.Background(), x.Parent); err == nil {
				require.Empty(t, p.Top)
			}
			return
		}
		require.NoError(t, err)
		requireState(t, r, x.Parent, []item{x}, histCap)
	}
	deleted := func(t *testing.T, r repo, items *mongo.Collection, x item, err error) {
		require.NoError(t, err, "the Add took effect before the Delete")
		require.Zero(t, count(t, items, bson.D{{Key: "parent", Value: x.Parent}}), "no item of the deleted parent")
		_, err = r.Get(context.Background(), x.Parent)
		require.ErrorIs(t, err, patterns.ErrNotFound)
	}
	must := func(t *testing.T, want, err error, what string) {
		if want != nil {
			require.ErrorIs(t, err, want, what)
		} else {
			require.NoError(t, err, what)
		}
	}
	rows := []struct {
		name   string
		parent bool // the parent exists when the Add starts
		inner  func(t *testing.T, ctx context.Context, other repo, odb *mongo.Database, x item)
		check  func(t *testing.T, r repo, items *mongo.Collection, x item, err error)
	}{
		{"created, after a Remove of the item", false, func(t *testing.T, ctx context.Context, o repo, odb *mongo.Database, x item) {
			must(t, patterns.ErrNotFound, o.Remove(ctx, x.Parent, x.ID), "Remove")
			insertParents(t, odb, x.Parent)
		}, created},
		{"created, after a Delete of the parent", false, func(t *testing.T, ctx context.Context, o repo, odb *mongo.Database, x item) {
			must(t, nil, o.Delete(ctx, x.Parent), "Delete")
			insertParents(t, odb, x.Parent)
		}, created},
		{"created, after an Add of the item", false, func(t *testing.T, ctx context.Context, o repo, odb *mongo.Database, x item) {
			must(t, patterns.ErrNotFound, o.Add(ctx, x.Parent, x), "Add")
			insertParents(t, odb, x.Parent)
		}, created},
		{"deleted, after an Update of the item", true, func(t *testing.T, ctx context.Context, o repo, _ *mongo.Database, x item) {
			must(t, nil, o.Update(ctx, x.Parent, item{ID: x.ID, Parent: x.Parent, Score: x.Score + 1}), "Update")
			must(t, nil, o.Delete(ctx, x.Parent), "Delete")
		}, deleted},
		{"deleted, after a Remove of the item", true, func(t *testing.T, ctx context.Context, o repo, _ *mongo.Database, x item) {
			must(t, nil, o.Remove(ctx, x.Parent, x.ID), "Remove")
			must(t, nil, o.Delete(ctx, x.Parent), "Delete")
		}, deleted},
	}
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		r := newRepo[parent, item](t, db, config(histCap), p)
		odb := mongotest.NewClient(t).Database(db.Name())
		other, err := subset.New[parent, item](odb, config(histCap))
		require.NoError(t, err)
		subset.ForcePlan(other, p)
		var hook atomic.Pointer[func(ctx context.Context)]
		mongotest.OnCommand(t, db, "update", func(ctx context.Context) {
			if fn := hook.Swap(nil); fn != nil {
				(*fn)(ctx)
			}
		})
		for i, row := range rows {
			t.Run(row.name, func(t *testing.T) {
				x := item{ID: int64(i + 1), Parent: fmt.Sprintf("p%d", i+1), Score: 3}
				if row.parent {
					insertParents(t, db, x.Parent)
				}
				fn := func(ctx context.Context) { row.inner(t, ctx, other, odb, x) }
				hook.Store(&fn)
				err := r.Add(ctx, x.Parent, x)
				hook.Store(nil)
				row.check(t, r, db.Collection("items"), x, err)
			})
		}
	})
}
