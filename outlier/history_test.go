package outlier

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/chaos"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// The random histories of outlier (internal/chaos): four clients, each a
// Repo of its own on a connection pool of its own (two of them under a
// storm of faults), run random mixes of Insert (of a deleted parent),
// Append (of one item), Update, Remove, Delete, Get, Page and Items on two
// parents and five item ids, with Cap 2 and OverflowCap 2, so that parents
// close, overflow documents open, fill and get holes, and Appends of one
// id from two clients meet.
//
// The model is per parent: whether it exists, its embedded items, whether
// it is closed (the flag), and its overflow items, all in append order. An
// Append of an id stored anywhere is skipped; otherwise the item goes
// into the parent while it is open and has room, else the parent closes
// and the item goes to overflow ("every later item goes to overflow
// documents, even if Remove makes room in the parent again"). An Append
// that failed may have closed the parent without storing its item ("the
// flag stays true with no overflow document"). Get is two reads: the
// parent (the embedded items Get's P holds) at one instant of its call,
// the overflow (the rest) at another ("the parent as of the first command
// and the overflow as of the second"), when the parent may be deleted
// (none then). The one double store the godoc
// admits ("two Appends of one id that overlap ... could store it in two
// documents only if one of them pushed into an older overflow document
// that Remove had given room again") is allowed for an Append that
// overlaps another Append of its id and a Remove of its parent. Items and
// Page are checked at rest, where Get, Items, pages of one and Count
// agree.

const (
	histCap         = 2
	histOverflowCap = 2
)

var histPostIDs = []int{1, 2}

type histPost struct {
	ID       int       `bson:"_id"`
	Comments []comment `bson:"comments"`
}

// oop is one drawn operation.
type oop struct {
	op     string // insert, append, update, remove, delete, get, getparent, getoverflow, items, page
	parent int
	id     string
	text   string
	// mayDouble is set by the partition: an Append that overlaps another
	// Append of its id and a Remove of its parent.
	mayDouble bool
}

// oout is an outcome: ok, notfound, conflict, dup; Get's items as
// "id:text," for the parent and for the overflow.
type oout struct {
	res              string
	parent, overflow string
}

type ostate struct {
	exists           bool
	parent, overflow string // "id:text,"
	closed           bool
}

type oitem struct{ id, text string }

func odecode(s string) []oitem {
	var out []oitem
	for _, e := range strings.Split(strings.TrimSuffix(s, ","), ",") {
		if id, text, ok := strings.Cut(e, ":"); ok {
			out = append(out, oitem{id, text})
		}
	}
	return out
}

func oencode(items []oitem) string {
	var b strings.Builder
	for _, it := range items {
		fmt.Fprintf(&b, "%s:%s,", it.id, it.text)
	}
	return b.String()
}

func commentsString(cs []comment) string {
	items := make([]oitem, len(cs))
	for i, c := range cs {
		items[i] = oitem{c.ID, c.Text}
	}
	return oencode(items)
}

func hasItem(items []oitem, id string) bool {
	return slices.ContainsFunc(items, func(it oitem) bool { return it.id == id })
}

var outlierHistories = (&porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		overlaps := func(a, b porcupine.Operation) bool { return a.Call < b.Return && b.Call < a.Return }
		by := map[int][]porcupine.Operation{}
		for _, o := range history {
			in := o.Input.(oop)
			switch in.op {
			case "append":
				in.mayDouble = slices.ContainsFunc(history, func(a porcupine.Operation) bool {
					other := a.Input.(oop)
					return other.op == "append" && other.parent == in.parent && other.id == in.id && a != o && overlaps(a, o)
				}) && slices.ContainsFunc(history, func(a porcupine.Operation) bool {
					other := a.Input.(oop)
					return other.op == "remove" && other.parent == in.parent && overlaps(a, o)
				})
				o.Input = in
			case "get":
				out, known := o.Output.(oout)
				if known && out.res == "ok" {
					p, v := o, o
					p.Input, v.Input = oop{op: "getparent", parent: in.parent}, oop{op: "getoverflow", parent: in.parent}
					by[in.parent] = append(by[in.parent], p, v)
					continue
				}
			}
			by[in.parent] = append(by[in.parent], o)
		}
		var parts [][]porcupine.Operation
		for _, id := range histPostIDs {
			if len(by[id]) > 0 {
				parts = append(parts, by[id])
			}
		}
		return parts
	},
	Init: func() []any { return []any{ostate{exists: true}} },
	Step: func(state, input, output any) []any {
		s, in := state.(ostate), input.(oop)
		out, known := output.(oout)
		parent, overflow := odecode(s.parent), odecode(s.overflow)
		res := func(want string, ok bool, states ...any) []any {
			if known && out.res == want && ok {
				return states
			}
			return nil
		}
		present := hasItem(parent, in.id) || hasItem(overflow, in.id)
		switch in.op {
		case "insert":
			created := ostate{exists: true}
			if !known {
				if s.exists {
					return []any{s}
				}
				return []any{s, created}
			}
			return append(res("ok", !s.exists, created), res("dup", s.exists, s)...)
		case "append":
			it := oitem{in.id, in.text}
			appended := s
			if !s.closed && len(parent) < histCap {
				appended.parent = oencode(append(parent, it))
			} else {
				appended.closed, appended.overflow = true, oencode(append(overflow, it))
			}
			closedOnly := s
			closedOnly.closed = s.closed || len(parent) >= histCap
			var stored []any
			if present {
				stored = []any{s}
				if in.mayDouble && s.closed {
					doubled := s
					doubled.overflow = oencode(append(overflow, it))
					stored = append(stored, doubled)
				}
			} else {
				stored = []any{appended}
			}
			if !known {
				if !s.exists {
					return []any{s}
				}
				return append(stored, s, closedOnly)
			}
			return slices.Concat(res("ok", s.exists, stored...), res("notfound", !s.exists, s), res("conflict", s.exists, s, closedOnly))
		case "update":
			set := func(items []oitem) string {
				out := slices.Clone(items)
				for i := range out {
					if out[i].id == in.id {
						out[i].text = in.text
					}
				}
				return oencode(out)
			}
			updated := s
			updated.parent, updated.overflow = set(parent), set(overflow)
			if !known {
				return []any{s, updated}
			}
			return slices.Concat(res("ok", s.exists && present, updated), res("notfound", !s.exists || !present, s), res("conflict", s.exists && present, s))
		case "remove":
			removed := s
			drop := func(items []oitem) string {
				return oencode(slices.DeleteFunc(slices.Clone(items), func(it oitem) bool { return it.id == in.id }))
			}
			if hasItem(parent, in.id) {
				removed.parent = drop(parent)
			} else {
				removed.overflow = drop(overflow)
			}
			if !known {
				return []any{s, removed}
			}
			return append(res("ok", s.exists && present, removed), res("notfound", !s.exists || !present, s)...)
		case "delete":
			if !known {
				return []any{s, ostate{}}
			}
			return slices.Concat(res("ok", s.exists, ostate{}), res("notfound", !s.exists, s), res("conflict", s.exists, s))
		case "get":
			if !known {
				return []any{s}
			}
			return res("notfound", !s.exists, s)
		case "getparent":
			return res("ok", s.exists && out.parent == s.parent, s)
		case "getoverflow":
			// A parent whose flag is false has no overflow: Get reads none.
			// Nor has a parent deleted since Get's first read.
			return res("ok", out.overflow == s.overflow, s)
		}
		return []any{s} // items, page: checked at rest
	},
	DescribeOperation: func(input, output any) string {
		in := input.(oop)
		return fmt.Sprintf("%s(%d, %s:%s double=%t) -> %v", in.op, in.parent, in.id, in.text, in.mayDouble, output)
	},
	DescribeState: func(state any) string { return fmt.Sprintf("%+v", state.(ostate)) },
}).ToModel()

func histOutlierConfig() Config {
	return Config{Parents: "posts", Field: "comments", Cap: histCap, OverflowCap: histOverflowCap}
}

type outlierHistory struct {
	p     Plan
	mu    sync.Mutex
	repos map[*mongo.Database]*Repo[histPost, comment]
}

func (h *outlierHistory) repo(db *mongo.Database) *Repo[histPost, comment] {
	h.mu.Lock()
	defer h.mu.Unlock()
	r, ok := h.repos[db]
	if !ok {
		var err error
		r, err = New[histPost, comment](db, histOutlierConfig())
		if err != nil {
			panic(err)
		}
		ForcePlan(r, h.p)
		h.repos[db] = r
	}
	return r
}

func outlierHistSpec(p Plan) chaos.Spec[*outlierHistory, oop] {
	ops := mongotest.Scale(24, 12)
	return chaos.Spec[*outlierHistory, oop]{
		Ops: ops,
		Prepare: func(t *testing.T, db *mongo.Database, _ *rand.Rand) *outlierHistory {
			h := &outlierHistory{p: p, repos: map[*mongo.Database]*Repo[histPost, comment]{}}
			r := h.repo(db)
			require.NoError(t, patterns.EnsureIndexes(context.Background(), r.Indexes()...))
			for _, id := range histPostIDs {
				_, err := r.Insert(context.Background(), histPost{ID: id})
				require.NoError(t, err)
			}
			return h
		},
		Gen: func(rng *rand.Rand, client, i int, _ *outlierHistory) oop {
			op := oop{parent: histPostIDs[rng.IntN(len(histPostIDs))], id: fmt.Sprintf("c%d", rng.IntN(5)), text: fmt.Sprintf("t%d", client*ops+i)}
			kinds := []string{"insert", "append", "append", "append", "append", "update", "remove", "remove", "delete", "get", "get", "get", "items", "page"}
			op.op = kinds[rng.IntN(len(kinds))]
			return op
		},
		Input: func(op oop) any { return op },
		Do:    outlierHistDo,
		Model: outlierHistories,
		Final: outlierHistFinal,
	}
}

func outlierHistDo(ctx context.Context, db *mongo.Database, h *outlierHistory, op oop) (any, error) {
	r := h.repo(db)
	outcome := func(err error) (any, error) {
		res, err := chaos.Outcome(err)
		return oout{res: res}, err
	}
	switch op.op {
	case "insert":
		_, err := r.Insert(ctx, histPost{ID: op.parent})
		return outcome(err)
	case "append":
		return outcome(r.Append(ctx, op.parent, comment{ID: op.id, Text: op.text}))
	case "update":
		return outcome(r.Update(ctx, op.parent, comment{ID: op.id, Text: op.text}))
	case "remove":
		return outcome(r.Remove(ctx, op.parent, op.id))
	case "delete":
		return outcome(r.Delete(ctx, op.parent))
	case "get":
		p, all, err := r.Get(ctx, op.parent)
		if err != nil {
			return outcome(err)
		}
		if len(all) < len(p.Comments) || commentsString(all[:len(p.Comments)]) != commentsString(p.Comments) {
			return nil, fmt.Errorf("get: the merged list %v does not start with the parent's %v", all, p.Comments)
		}
		return oout{res: "ok", parent: commentsString(p.Comments), overflow: commentsString(all[len(p.Comments):])}, nil
	case "items":
		for _, err := range r.Items(ctx, op.parent) {
			if err != nil {
				return outcome(err)
			}
		}
		return oout{res: "ok"}, nil
	case "page":
		_, _, err := r.Page(ctx, op.parent, Cursor{}, 3)
		return outcome(err)
	}
	panic(op.op)
}

// outlierHistFinal checks the state at rest, per parent: Get, Items,
// pages of one and Count agree; the parent holds at most Cap items and
// each overflow document at most OverflowCap, its count exact. (An id
// stored twice is the model's: Get's reads.)
func outlierHistFinal(t *testing.T, db *mongo.Database, h *outlierHistory, _ []porcupine.Operation) {
	ctx := context.Background()
	r := h.repo(db)
	for _, id := range histPostIDs {
		p, all, err := r.Get(ctx, id)
		if errors.Is(err, patterns.ErrNotFound) {
			continue
		}
		require.NoError(t, err)
		require.LessOrEqual(t, len(p.Comments), histCap, "parent %d holds more than Cap", id)
		var streamed []comment
		for c, err := range r.Items(ctx, id) {
			require.NoError(t, err)
			streamed = append(streamed, c)
		}
		require.Equal(t, commentsString(all), commentsString(streamed), "parent %d: Items at rest", id)
		var paged []comment
		for after := (Cursor{}); ; {
			page, next, err := r.Page(ctx, id, after, 1)
			require.NoError(t, err)
			paged = append(paged, page...)
			if next.IsZero() {
				break
			}
			after = next
		}
		require.Equal(t, commentsString(all), commentsString(paged), "parent %d: pages of one at rest", id)
		n, err := r.Count(ctx, id)
		require.NoError(t, err)
		require.Equal(t, len(all), n, "parent %d: Count at rest", id)
	}
	cur, err := db.Collection("posts_overflow").Find(ctx, map[string]any{})
	require.NoError(t, err)
	var docs []overflowDoc
	require.NoError(t, cur.All(ctx, &docs))
	for _, d := range docs {
		require.LessOrEqual(t, len(d.Items), histOverflowCap, "overflow %d/%d", d.Parent, d.Seq)
		require.Equal(t, len(d.Items), d.Count, "overflow %d/%d: its count", d.Parent, d.Seq)
	}
}

// TestHistories runs random histories of every operation on shared
// parents and item ids under faults (see outlierHistSpec), on each
// server path.
func TestHistories(t *testing.T) {
	mongotest.RunPlans(t, PlanFor, func(t *testing.T, p Plan) {
		chaos.Run(t, outlierHistSpec(p))
	})
}

// TestHistoriesModel: the model rejects a Get that misses an appended
// item or holds one twice, and accepts the double store the godoc admits
// only where it does.
func TestHistoriesModel(t *testing.T) {
	op := func(in oop, out oout, call, ret int64) porcupine.Operation {
		return porcupine.Operation{Input: in, Output: out, Call: call, Return: ret}
	}
	appendOf := func(id string, call, ret int64) porcupine.Operation {
		return op(oop{op: "append", parent: 1, id: id, text: id}, oout{res: "ok"}, call, ret)
	}
	get := func(parent, overflow string) porcupine.Operation {
		return op(oop{op: "get", parent: 1}, oout{res: "ok", parent: parent, overflow: overflow}, 20, 21)
	}
	full := []porcupine.Operation{appendOf("a", 0, 1), appendOf("b", 2, 3), appendOf("c", 4, 5)}
	chaos.CheckModel(t, outlierHistories, []chaos.ModelCase{
		{Name: "closed and overflowed", History: append(slices.Clone(full), get("a:a,b:b,", "c:c,")), OK: true},
		{Name: "missed", History: append(slices.Clone(full), get("a:a,b:b,", "")), OK: false},
		{Name: "twice", History: append(slices.Clone(full), appendOf("c", 6, 7), get("a:a,b:b,", "c:c,c:c,")), OK: false},
		{Name: "twice, where the godoc admits it", History: append(slices.Clone(full), appendOf("c", 6, 10), appendOf("c", 7, 9),
			op(oop{op: "remove", parent: 1, id: "x"}, oout{res: "notfound"}, 6, 10), get("a:a,b:b,", "c:c,c:c,")), OK: true},
		{Name: "deleted between Get's reads", History: append(slices.Clone(full),
			op(oop{op: "delete", parent: 1}, oout{res: "ok"}, 20, 21), get("a:a,b:b,", "")), OK: true},
		{Name: "deleted before Get began", History: append(slices.Clone(full),
			op(oop{op: "delete", parent: 1}, oout{res: "ok"}, 10, 11), get("a:a,b:b,", "")), OK: false},
		{Name: "removed from the parent, appended to the overflow", History: append(slices.Clone(full),
			op(oop{op: "remove", parent: 1, id: "a"}, oout{res: "ok"}, 6, 7), appendOf("d", 8, 9), get("b:b,", "c:c,d:d,")), OK: true},
	})
}

// TestHistoriesGetAcrossDelete: another repository deletes the parent
// between Get's two reads (in the window before its find of the
// overflow). Get returns the parent as of its first read and the overflow
// as of its second, none, as its godoc says; the model accepts that
// history. (It required the parent to exist at Get's second read: the
// violation seen once on the embedded server with
// MONGOPATTERNS_SEED=5813354634744272007, whose operations have a Get of
// parent 2 overlapping its Delete while the parent has overflow.)
func TestHistoriesGetAcrossDelete(t *testing.T) {
	mongotest.RunPlans(t, PlanFor, func(t *testing.T, p Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		h := outlierHistSpec(p).Prepare(t, db, nil)
		do := func(db *mongo.Database, op oop) any {
			out, err := outlierHistDo(ctx, db, h, op)
			require.NoError(t, err, "%+v", op)
			return out
		}
		var history []porcupine.Operation
		for i, id := range []string{"a", "b", "c"} { // c closes the parent and overflows
			in := oop{op: "append", parent: 1, id: id, text: id}
			history = append(history, porcupine.Operation{Input: in, Output: do(db, in), Call: int64(2 * i), Return: int64(2*i + 1)})
		}
		other := mongotest.NewClient(t).Database(db.Name())
		del := oop{op: "delete", parent: 1}
		var deleted any
		w := mongotest.InWindow(t, db, 1, func(context.Context) { deleted = do(other, del) }, "find")
		get := oop{op: "get", parent: 1}
		got := do(db, get)
		w.Close()
		require.True(t, w.Fired(), "Get sent its second read")
		require.Equal(t, oout{res: "ok", parent: "a:a,b:b,"}, got, "the parent as of the first read, the overflow as of the second: none")
		history = append(history,
			porcupine.Operation{ClientId: 1, Input: get, Output: got, Call: 6, Return: 9},
			porcupine.Operation{ClientId: 2, Input: del, Output: deleted, Call: 7, Return: 8})
		require.True(t, porcupine.CheckOperations(outlierHistories, history), "the model accepts what Get's godoc says: %+v", history)
	})
}
