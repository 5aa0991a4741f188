package subset_test

import (
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/mongopatterns/mongopatterns/internal/chaos"
)

// Attacks on commits 623b993, cdcd4e9 and d52e43d: the history model
// (history_test.go, subsetHistories) against the godoc it encodes. The
// model must accept what the godoc allows and nothing more (CONTRIBUTING:
// "a model that encodes exactly the documented weakness"). Every row
// below is a history the godoc forbids and the model accepted until
// b1da42e (which made its row "a ghost after an overlap" expect
// rejection); each needs no server.

// TestAttackModelWeakerThanGodoc lists them.
func TestAttackModelWeakerThanGodoc(t *testing.T) {
	x := item{ID: 2, Parent: "p1", Score: 3}
	op := func(in sop, out sout, call, ret int64) porcupine.Operation {
		return porcupine.Operation{Input: in, Output: out, Call: call, Return: ret}
	}
	add := func(call, ret int64, res string) porcupine.Operation {
		return op(sop{op: "add", parent: "p1", items: []item{x}}, sout{res: res}, call, ret)
	}
	remove := func(call, ret int64, res string) porcupine.Operation {
		return op(sop{op: "remove", parent: "p1", id: 2}, sout{res: res}, call, ret)
	}
	update := func(call, ret int64, res string) porcupine.Operation {
		return op(sop{op: "update", parent: "p1", items: []item{{ID: 2, Parent: "p1", Score: 1}}}, sout{res: res}, call, ret)
	}
	del := func(call, ret int64, res string) porcupine.Operation {
		return op(sop{op: "delete", parent: "p1"}, sout{res: res}, call, ret)
	}
	get := func(call, ret int64, subset string) porcupine.Operation {
		return op(sop{op: "get", parent: "p1"}, sout{res: "ok", subset: subset}, call, ret)
	}
	chaos.CheckModel(t, subsetHistories, []chaos.ModelCase{
		// change.go:38-43 (Remove): "It returns [patterns.ErrNotFound]
		// when the item is in neither place ... So of two Removes of one
		// item that overlap, both may return nil: the second may find the
		// item deleted by the first and still in the subset". The model
		// lets any Remove that overlaps another Remove of the id return
		// nil (in.overlapsRemove alone), even for an item never stored:
		// no first Remove deleted anything, the subset never held it.
		{Name: "two overlapping Removes of an item never added, both nil", History: []porcupine.Operation{
			remove(4, 7, "ok"), remove(5, 8, "ok"),
		}},
		// The same, for an item whose Remove returned (its recomputation
		// took it out of the subset) before the two start: "a retry after
		// a call that did the whole job ... reports it" (ErrNotFound).
		{Name: "two overlapping Removes after the item was removed, both nil", History: []porcupine.Operation{
			add(0, 3, "ok"), remove(4, 5, "ok"), get(6, 7, ""), remove(8, 11, "ok"), remove(9, 12, "ok"),
		}},
		// repo.go:203-208 (Delete): nil for a parent already gone only
		// for "the items that an Add in flight stored after the parent
		// was deleted", and add.go:84-85 "A missing parent gives
		// ErrNotFound and leaves no item behind: both paths read the
		// parent before inserting". An Add that starts after the Delete
		// returned finds no parent and stores nothing (it returned
		// ErrNotFound), so the second Delete finds neither a parent nor an
		// item: ErrNotFound. The model accepts nil (in.overlapsAdd counts
		// any Add to the parent, whatever its start and outcome).
		{Name: "a Delete of a deleted parent, overlapping an Add that found no parent", History: []porcupine.Operation{
			del(0, 2, "ok"), add(3, 8, "notfound"), del(4, 5, "ok"),
		}},
		// change.go:133-136 (Update): ErrNotFound "so does a parent that
		// a [Repo.Delete] deletes after Update's replacement, the item
		// replaced (which a reader may have seen before the parent was
		// deleted)"; doc.go:48-49 "the subset a [Repo.Get] returns is the
		// first N items of a linearization of the writes". A reader in
		// that window sees x in its old or new version, or nothing of x;
		// the model marks the parent dirty (d52e43d) and accepts any
		// subset, here item 6, never added.
		{Name: "Update's ErrNotFound under a Delete, a reader sees an item never added", History: []porcupine.Operation{
			add(0, 3, "ok"), update(4, 9, "notfound"), get(5, 6, "6:4,"), del(7, 8, "ok"),
		}},
		// change.go:43-46 (Remove): "A Remove whose parent a [Repo.Delete]
		// deletes after Remove's delete returns ErrNotFound too, the item
		// deleted (which a reader may have seen gone before the parent
		// was)". Same: the model accepts any subset in that window.
		{Name: "Remove's ErrNotFound under a Delete, a reader sees an item never added", History: []porcupine.Operation{
			add(0, 3, "ok"), remove(4, 9, "notfound"), get(5, 6, "6:4,"), del(7, 8, "ok"),
		}},
		// The same Update outcome when the overlapping Delete deleted
		// nothing (repo.go:210-214: ErrConflict "with the parent and its
		// items in place"): no Delete deleted the parent after the
		// replacement, so ErrNotFound is not the godoc's, and the parent
		// stays unchecked after every call returned (a Get sees item 6).
		{Name: "Update's ErrNotFound with a Delete that deleted nothing", History: []porcupine.Operation{
			add(0, 3, "ok"), update(4, 9, "notfound"), del(5, 8, "conflict"), get(10, 11, "6:4,"),
		}},
		// change.go:50-56 (Remove): "An Add of the same item that overlaps
		// its Remove leaves, once both have returned, the item stored or
		// not, as one order of the two calls gives, and the subset the
		// first Cap items. While they run, a reader of the subset may see
		// the item there that the items collection no longer holds, in
		// the version that Add pushed (... the Add's recomputation takes
		// it out before the Add returns)". The model keeps the ghost after
		// both returned (until a recomputation), here in the version of
		// the overlapping Add (cdcd4e9's addScores), and its own row "a
		// ghost after an overlap" asserts it.
		{Name: "the ghost of an Add's version after both returned", History: []porcupine.Operation{
			add(0, 100, "ok"), update(10, 20, "ok"), remove(30, 40, "ok"), get(200, 201, "2:3,"),
		}},
		{Name: "a ghost after the Add and the Remove returned", History: []porcupine.Operation{
			add(0, 3, "ok"), remove(1, 5, "ok"), get(10, 11, "2:3,"),
		}},
	})
}
