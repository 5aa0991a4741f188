package subset_test

import (
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/mongopatterns/mongopatterns/internal/chaos"
)

// TestAttackHistoriesModelGhostNotFound (outside attack of b30632d): the
// model took ErrNotFound from a Remove of an item stored nowhere whatever
// ghost was visible, and kept the ghost. But Remove's godoc promises
// ErrNotFound "when the item is in neither place", and that "when the
// item is no longer stored but the subset still holds it ... Remove
// finishes that job" (it reads the parent holding the item,
// cmd.parentHolding, and recomputes: change.go). Here the subset holds the
// item before and after a Remove that reports ErrNotFound, and no call
// could put it back in between: the model accepted a history the
// implementation promises never to produce. It now drops a lasting ghost
// of the item at such a Remove (one of an overlap with an Add may come
// back with the Add's push).
func TestAttackHistoriesModelGhostNotFound(t *testing.T) {
	x := item{ID: 2, Parent: "p1", Score: 3}
	op := func(in sop, out sout, call, ret int64) porcupine.Operation {
		return porcupine.Operation{Input: in, Output: out, Call: call, Return: ret}
	}
	get := func(subset string, call int64) porcupine.Operation {
		return op(sop{op: "get", parent: "p1"}, sout{res: "ok", subset: subset}, call, call+1)
	}
	add := op(sop{op: "add", parent: "p1", items: []item{x}}, sout{res: "ok"}, 0, 3)
	underDelete := []porcupine.Operation{
		add,
		// A Remove under a Delete: it deletes x, then finds the parent
		// gone (ErrNotFound); until the Delete, the subset holds x.
		op(sop{op: "remove", parent: "p1", id: 2}, sout{res: "notfound"}, 10, 100),
		op(sop{op: "delete", parent: "p1"}, sout{res: "ok"}, 60, 70),
	}
	chaos.CheckModel(t, subsetHistories, []chaos.ModelCase{
		// Control: the subset holds x around a Remove that finds it there.
		{Name: "held around a Remove that found it", History: append(append([]porcupine.Operation{}, underDelete...),
			get("2:3,", 35),
			op(sop{op: "remove", parent: "p1", id: 2}, sout{res: "ok"}, 37, 38),
		), OK: true},
		{Name: "held around a Remove that found it nowhere", History: append(append([]porcupine.Operation{}, underDelete...),
			get("2:3,", 35),
			op(sop{op: "remove", parent: "p1", id: 2}, sout{res: "notfound"}, 37, 38),
			get("2:3,", 39),
		), OK: false},
	})
}
