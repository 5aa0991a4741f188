package outlier

// Attack on abae2ae: the "close" pseudo-operation the outlier histories
// model gives each Append (history_test.go). Rows the model decides
// against Append's godoc and code (append.go: appendItems, intoOpen,
// appendOverflow; commands.go: closeFilter, closeUpdate). OK is what the
// godoc and the code allow.

import (
	"errors"
	"math"
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/mongopatterns/mongopatterns/internal/chaos"
	"github.com/mongopatterns/mongopatterns/internal/linear"
)

func TestAttack62HistoriesModel(t *testing.T) {
	op := func(in oop, out any, call, ret int64) porcupine.Operation {
		return porcupine.Operation{Input: in, Output: out, Call: call, Return: ret}
	}
	appendOf := func(id string, call, ret int64) porcupine.Operation {
		return op(oop{op: "append", parent: 1, id: id, text: id}, oout{res: "ok"}, call, ret)
	}
	appendRes := func(id, res string, call, ret int64) porcupine.Operation {
		return op(oop{op: "append", parent: 1, id: id, text: id}, oout{res: res}, call, ret)
	}
	remove := func(id string, call, ret int64) porcupine.Operation {
		return op(oop{op: "remove", parent: 1, id: id}, oout{res: "ok"}, call, ret)
	}
	del := func(call, ret int64) porcupine.Operation {
		return op(oop{op: "delete", parent: 1}, oout{res: "ok"}, call, ret)
	}
	insert := func(call, ret int64) porcupine.Operation {
		return op(oop{op: "insert", parent: 1}, oout{res: "ok"}, call, ret)
	}
	get := func(parent, overflow string, call, ret int64) porcupine.Operation {
		return op(oop{op: "get", parent: 1}, oout{res: "ok", parent: parent, overflow: overflow}, call, ret)
	}
	chaos.CheckModel(t, outlierHistories, []chaos.ModelCase{
		// --- too weak: the model accepts what the library cannot do ---

		// W1. Append(c) pushes c into the parent, which has room ([a]):
		// the guarded push matches, Append returns (appendItems: "case
		// out == pushed: return nil"; intoOpen: "out == pushed && k ==
		// len(b.pending)"). It never reaches appendOverflow, the only
		// place that closes. The model: c's step into the parent at 3,
		// Remove(c), Append(d) fills the parent, close(c) at 8 (parent
		// full, open, c not present), so e goes to overflow beside a
		// parent with room. Only close(c) explains e in overflow.
		{Name: "W1 closed by an Append whose item went into the parent (removed since)", History: []porcupine.Operation{
			appendOf("a", 0, 1), appendOf("c", 2, 30), remove("c", 4, 5), appendOf("d", 6, 7),
			remove("d", 9, 10), appendOf("e", 11, 12), get("a:a,", "e:e,", 31, 32)}, OK: false},
		// W2. Append(c) of an id already in the parent: the push's guard
		// ("holds none of them") misses, the read finds c, Append returns
		// nil ("items whose id is already in the parent ... are
		// skipped"). Had it read after Remove(c), it would have stored c
		// (into the parent, or, full, closing it and into overflow); the
		// Get shows no c, so it read c present and wrote nothing. The
		// model: skip at 4.5, close(c) at 9.
		{Name: "W2 closed by an Append of an id already stored (removed since)", History: []porcupine.Operation{
			appendOf("a", 0, 1), appendOf("c", 2, 3), appendOf("c", 4, 30), remove("c", 5, 6), appendOf("d", 7, 8),
			remove("d", 10, 11), appendOf("e", 12, 13), get("a:a,", "e:e,", 31, 32)}, OK: false},
		// W3. Append(c) stores c in the old parent (which has room) and
		// returns; Delete, Insert, the new parent fills. The godoc: "Nor
		// does an Append that read the deleted parent, still running when
		// the new one is inserted, close the new one for its items ... It
		// closes the new parent only if that one holds exactly as many
		// items as it counted, none of them its items", and then "the
		// Append's items then go to overflow, after the new parent's
		// items". Here c went into the old parent; the model lets it close
		// the new one at 12, f then in overflow beside a parent with room.
		{Name: "W3 closed the new parent though its item went into the old one", History: []porcupine.Operation{
			appendOf("a", 0, 1), appendOf("c", 2, 40), del(4, 5), insert(6, 7), appendOf("d", 8, 9), appendOf("e", 10, 11),
			remove("e", 13, 14), appendOf("f", 15, 16), get("d:d,", "f:f,", 41, 42)}, OK: false},
		// W4. Append(c) returns ErrNotFound: its last command is the read
		// that found no parent (readParent: errNoParent), and it sends
		// nothing after it. The parent is missing during [2,4) only, so
		// every command of the Append came before the Insert returned: it
		// never saw a parent, let alone a full one. The model places the
		// notfound step at 2.5 and close(c) at 9, on the parent inserted
		// after.
		{Name: "W4 an Append that returned notfound closes a parent inserted after", History: []porcupine.Operation{
			del(0, 1), appendRes("c", "notfound", 2, 30), insert(3, 4), appendOf("a", 5, 6), appendOf("b", 7, 8),
			remove("b", 10, 11), appendOf("e", 12, 13), get("a:a,", "e:e,", 31, 32)}, OK: false},
		// --- what held: the model rejects these, as it should ---

		// The close is within the call: Append(c) returned at 3.
		{Name: "H1 close after the Append returned", History: []porcupine.Operation{
			appendOf("a", 0, 1), appendOf("c", 2, 3), remove("c", 4, 5), appendOf("d", 6, 7),
			remove("d", 9, 10), appendOf("e", 11, 12), get("a:a,", "e:e,", 31, 32)}, OK: false},
		// The close is guarded on the parent holding none of the items.
		{Name: "H2 close while the Append's item is in the parent", History: []porcupine.Operation{
			appendOf("a", 0, 1), appendOf("c", 2, 3), appendOf("c", 4, 30), remove("a", 5, 6), appendOf("e", 7, 8),
			get("c:c,", "e:e,", 31, 32)}, OK: false},
		// The close needs a full parent ({$size: held}, held = Cap).
		{Name: "H3 a parent with room all through the closer's call", History: []porcupine.Operation{
			appendOf("a", 0, 1), appendOf("c", 2, 10), get("a:a,", "c:c,", 11, 12)}, OK: false},
		// The close of a new parent by an Append of the old one needs the
		// new one full (Cap items).
		{Name: "H4 a new parent with room closed by an Append of the old one", History: []porcupine.Operation{
			appendOf("a", 0, 1), appendOf("b", 2, 3), appendOf("c", 4, 30), del(5, 6), insert(7, 8), appendOf("d", 9, 10),
			appendOf("e", 11, 12), get("d:d,", "e:e,c:c,", 31, 32)}, OK: false},

		// --- what the godoc allows: the model accepts these, as it should ---

		// "a reader may see the flag true while the overflow is still
		// empty or lacks the items being written": another Append's item
		// (after a Remove made room) goes to overflow first.
		{Name: "A1 flag before the item: a later Append's item first in overflow", History: []porcupine.Operation{
			appendOf("a", 0, 1), appendOf("b", 2, 3), appendOf("c", 4, 20), get("a:a,b:b,", "", 5, 6), remove("b", 7, 8),
			appendOf("e", 9, 10), get("a:a,", "e:e,", 11, 12), get("a:a,", "e:e,c:c,", 21, 22)}, OK: true},
		// "It closes the new parent only if that one holds exactly as many
		// items as it counted, none of them its items ... the Append's
		// items then go to overflow, after the new parent's items".
		{Name: "A2 an Append of the old parent closes the full new one", History: []porcupine.Operation{
			appendOf("a", 0, 1), appendOf("b", 2, 3), appendOf("c", 4, 30), del(5, 6), insert(7, 8), appendOf("d", 9, 10),
			appendOf("e", 11, 12), get("d:d,e:e,", "c:c,", 31, 32)}, OK: true},
		// After its close, the document it announced filled by e and f
		// (its upsert misses, the find shows it full, the close sent again
		// misses on the new parent, open): c goes into the new parent.
		{Name: "A3 closed the old parent, its document full of others, its item into the new parent", History: []porcupine.Operation{
			appendOf("a", 0, 1), appendOf("b", 2, 3), appendOf("c", 4, 40), remove("b", 5, 6), appendOf("e", 7, 8),
			appendOf("f", 9, 10), get("a:a,", "e:e,f:f,", 11, 12), del(13, 14), insert(15, 16), get("c:c,", "", 41, 42)}, OK: true},
		// The same, the close sent again missing on the deleted parent:
		// notfound.
		{Name: "A4 a close by an Append that returned notfound, its document full of others", History: []porcupine.Operation{
			appendOf("a", 0, 1), appendOf("b", 2, 3), appendRes("c", "notfound", 4, 30), remove("b", 5, 6), appendOf("e", 7, 8),
			appendOf("f", 9, 10), get("a:a,", "e:e,f:f,", 11, 12), del(13, 14)}, OK: true},
		// An Append of unknown outcome may close and store nothing ("the
		// flag stays true with no overflow document").
		{Name: "A5 an Append of unknown outcome closed, nothing stored", History: []porcupine.Operation{
			appendOf("a", 0, 1), appendOf("b", 2, 3),
			op(oop{op: "append", parent: 1, id: "c", text: "c"}, linear.Unknown{Err: errors.New("broken")}, 4, math.MaxInt64),
			remove("b", 5, 6), appendOf("e", 7, 8), get("a:a,", "e:e,", 9, 10)}, OK: true},
	})
	// Weaker than the code, left: the model does not track how much room
	// each overflow document has, so it cannot tell that an Append whose
	// close matched then finds room in the document it announced and
	// returns nil with its item there. It accepts these two, which the
	// code cannot produce (the godoc allows a failed Append to leave "the
	// flag ... true with no overflow document", and A3/A4 are their
	// legitimate forms). Pinned as accepted, so that a model that tracks
	// documents moves them to the refused rows.
	chaos.CheckModel(t, outlierHistories, []chaos.ModelCase{
		// W5. Append(c) closes the full parent (the only closer: e began
		// after Remove(b) returned, onto a parent with room), then returns
		// notfound. After a close that matched, held is readClosed and
		// Append pushes into the document it announced (upsert): that
		// matches or creates it, unless it is full or holds c; only then
		// does it find again and, the tail full, send the close again,
		// which alone can miss on a deleted parent and read notfound. The
		// document holds at most e (1 < OverflowCap), and no other Append
		// of c: the push succeeds (into the parent's document, or an
		// orphan one after the Delete) and Append returns nil. The model:
		// close(c) at 4.5, the notfound step after the Delete.
		{Name: "W5 a close by an Append that returned notfound, its document with room", History: []porcupine.Operation{
			appendOf("a", 0, 1), appendOf("b", 2, 3), appendRes("c", "notfound", 4, 30), remove("b", 5, 6), appendOf("e", 7, 8),
			get("a:a,", "e:e,", 9, 10), del(11, 12)}, OK: true},
		// W6. As W5, but Append(c) returns nil and c shows in the new
		// parent's array. After its close matched, c goes back to a
		// parent only from a close that missed (appendOverflow: "if
		// st.open { return items, nil }"), sent only once the document it
		// announced is full: it holds at most e. So c is in the old
		// parent's overflow (gone with the Delete) or an orphan document.
		{Name: "W6 closed the old parent, its item then in the new parent's array, its document with room", History: []porcupine.Operation{
			appendOf("a", 0, 1), appendOf("b", 2, 3), appendOf("c", 4, 40), remove("b", 5, 6), appendOf("e", 7, 8),
			get("a:a,", "e:e,", 9, 10), del(11, 12), insert(13, 14), get("c:c,", "", 41, 42)}, OK: true},
	})
}
