package extref_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/extref"
	"github.com/mongopatterns/mongopatterns/internal/chaos"
	"github.com/mongopatterns/mongopatterns/internal/linear"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// The random histories of extref (internal/chaos): four clients, each a
// Ref of its own on a connection pool of its own (two of them under a
// storm of faults), run random mixes of every operation on the three
// products of the fault fixture (carts 1, 2, 3, 5, 6 and featured 1, 2,
// 3, 5 hold their copies; cart 2 holds product 1 twice): the
// application's own writes of a source (a rename, a delete, a rename that
// creates it again), Update, Sync, Of, OfMany, Verify, Repair, and reads
// of the copies. A value is a name "v<k>", k unique in the history; the
// fixture's names are value 0.

// hop is one drawn operation.
type hop struct {
	op    string // put, delete, update, sync, of, ofmany, copies, verify, repair
	id    int32  // the source
	ids   []int32
	value int
}

// hin is the porcupine input of an operation: its drawn form.
type hin = hop

// hout is an operation's outcome: "ok", "notfound", "notsynced",
// "conflict", "nomatch" (the application's delete deleted nothing), and
// the values a read returned (-1: not found).
type hout struct {
	res    string
	values []int
}

// refHistState is one source's state in the model: its value (-1:
// deleted) and every value it has had.
type refHistState struct {
	current int
	had     chaos.Set
}

// refHistories is the model of one source (porcupine partitions the
// history by source; OfMany is split into one read per id at its call and
// return, which its godoc allows: separate documents read by one find are
// no snapshot). Writes of the source are a register, as each is one
// single-document command: a put, a delete, Update's findAndModify (an
// Update that reports ErrNotSynced or ErrConflict changed the source, as
// did one that found it deleted while it wrote the copies).
// Sync's first read is a read of the register: nil when the source
// existed then, ErrNotFound when it did not. Of reads the register. A read
// of the copies returns values the source has had, in any order (Sync's
// and Update's godoc: copies change one document at a time, and a Sync
// that read an older value may write it after a newer one, then its
// confirming read writes the newer again). Verify and Repair check
// nothing here (they read no snapshot); the final check does.
var refHistories = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		by := map[int32][]porcupine.Operation{}
		for _, o := range history {
			in := o.Input.(hin)
			switch in.op {
			case "verify", "repair":
				continue
			case "ofmany":
				out, ok := o.Output.(hout)
				for i, id := range in.ids {
					one := o
					one.Input = hin{op: "of", id: id}
					if ok {
						one.Output = hout{res: "ok", values: out.values[i : i+1]}
					}
					by[id] = append(by[id], one)
				}
				continue
			}
			by[in.id] = append(by[in.id], o)
		}
		var parts [][]porcupine.Operation
		for _, id := range slices.Sorted(maps.Keys(by)) {
			parts = append(parts, by[id])
		}
		return parts
	},
	Init: func() any { return refHistState{had: chaos.Set("").Add(0)} },
	Step: func(state, input, output any) (bool, any) {
		s, in := state.(refHistState), input.(hin)
		set := refHistState{current: in.value, had: s.had.Add(in.value)}
		_, unknown := output.(linear.Unknown)
		if unknown {
			switch in.op {
			case "put":
				return true, set
			case "delete":
				return true, refHistState{current: -1, had: s.had}
			case "update":
				if s.current >= 0 {
					return true, set
				}
			}
			return true, s
		}
		out := output.(hout)
		switch in.op {
		case "put":
			return true, set
		case "delete":
			if out.res == "nomatch" {
				return true, s
			}
			return true, refHistState{current: -1, had: s.had}
		case "update":
			if out.res == "notfound" {
				return s.current < 0, s
			}
			return s.current >= 0, set
		case "sync":
			if out.res == "notfound" {
				return s.current < 0, s
			}
			return s.current >= 0, s
		case "of":
			return out.values[0] == s.current, s
		case "copies":
			for _, v := range out.values {
				if !s.had.Has(v) {
					return false, s
				}
			}
		}
		return true, s
	},
	DescribeOperation: func(input, output any) string {
		in := input.(hin)
		what := in.op
		switch in.op {
		case "put", "update":
			what = fmt.Sprintf("%s(%d, v%d)", in.op, in.id, in.value)
		case "ofmany":
			what = fmt.Sprintf("ofmany(%v)", in.ids)
		case "verify", "repair":
		default:
			what = fmt.Sprintf("%s(%d)", in.op, in.id)
		}
		return fmt.Sprintf("%s -> %v", what, output)
	},
	DescribeState: func(state any) string {
		s := state.(refHistState)
		return fmt.Sprintf("current %d, had %v", s.current, s.had)
	},
}

// refHistory is one history's fixture and the Ref of each client.
type refHistory struct {
	run  *faultRun
	mu   sync.Mutex
	refs map[*mongo.Database]*extref.Ref[ProductRef]
}

// ref returns the Ref of the client whose database db is.
func (h *refHistory) ref(db *mongo.Database) *extref.Ref[ProductRef] {
	h.mu.Lock()
	defer h.mu.Unlock()
	r, ok := h.refs[db]
	if !ok {
		var err error
		r, err = h.run.ref(db)
		if err != nil {
			panic(err)
		}
		h.refs[db] = r
	}
	return r
}

// histValue reads the value of a name "v<k>", 0 for a fixture's name.
func histValue(name string) int {
	k, err := strconv.Atoi(strings.TrimPrefix(name, "v"))
	if !strings.HasPrefix(name, "v") || err != nil {
		return 0
	}
	return k
}

// refHistSpec is extref's random history on plan p.
func refHistSpec(p extref.Plan) chaos.Spec[*refHistory, hop] {
	ops := mongotest.Scale(14, 8)
	return chaos.Spec[*refHistory, hop]{
		Ops: ops,
		Prepare: func(t *testing.T, db *mongo.Database, _ *rand.Rand) *refHistory {
			run := prepareScene(t, db, faultScene{targets: []extref.Target{cartsTarget, featuredTarget}, carts: []int32{1, 2, 3, 5, 6}, featured: []int32{1, 2, 3, 5}}, p)
			return &refHistory{run: run, refs: map[*mongo.Database]*extref.Ref[ProductRef]{}}
		},
		Gen: func(rng *rand.Rand, client, i int, _ *refHistory) hop {
			id := int32(1 + rng.IntN(3))
			v := 1 + client*ops + i
			switch n := rng.IntN(100); {
			case n < 12:
				return hop{op: "put", id: id, value: v}
			case n < 16:
				return hop{op: "delete", id: id}
			case n < 38:
				return hop{op: "update", id: id, value: v}
			case n < 56:
				return hop{op: "sync", id: id}
			case n < 66:
				return hop{op: "of", id: id}
			case n < 74:
				ids := []int32{id, int32(1 + rng.IntN(3))}
				return hop{op: "ofmany", ids: ids}
			case n < 90:
				return hop{op: "copies", id: id}
			case n < 95:
				return hop{op: "verify"}
			default:
				return hop{op: "repair"}
			}
		},
		Input: func(op hop) any { return op },
		Do:    refHistDo,
		Model: refHistories,
		Final: refHistFinal,
	}
}

// refHistDo runs op through the client's Ref on db.
func refHistDo(ctx context.Context, db *mongo.Database, h *refHistory, op hop) (any, error) {
	r := h.ref(db)
	products := db.Collection("products")
	// outcome names the errors the godoc gives callers; any other is the
	// caller's to explain (a fault).
	outcome := func(err error) (any, error) {
		if errors.Is(err, extref.ErrNotSynced) && !errors.Is(err, patterns.ErrConflict) {
			return nil, err // the sync broke: the fault's
		}
		res, err := chaos.Outcome(err, chaos.Named{Name: "notsynced", Err: extref.ErrNotSynced})
		return hout{res: res}, err
	}
	switch op.op {
	case "put":
		_, err := products.UpdateOne(ctx, bson.D{{Key: "_id", Value: op.id}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "name", Value: fmt.Sprintf("v%d", op.value)}}}, {Key: "$setOnInsert", Value: bson.D{{Key: "price", Value: 1.5}}}},
			options.UpdateOne().SetUpsert(true))
		return outcome(err)
	case "delete":
		res, err := products.DeleteOne(ctx, bson.D{{Key: "_id", Value: op.id}})
		if err == nil && res.DeletedCount == 0 {
			// No source, or FerretDB 2.x's answer for a document a
			// concurrent update is rewriting, which it leaves in place:
			// nothing deleted either way.
			return hout{res: "nomatch"}, nil
		}
		return outcome(err)
	case "update":
		_, err := r.Update(ctx, op.id, setName(fmt.Sprintf("v%d", op.value)))
		if errors.Is(err, extref.ErrNotSynced) && errors.Is(err, patterns.ErrNotFound) {
			// Update's godoc: the source was updated, then deleted while
			// its copies were written (by a delete of this history), which
			// may have left them older than its last value: the update
			// took effect, and promises nothing of the copies.
			return hout{res: "deleted"}, nil
		}
		return outcome(err)
	case "sync":
		_, err := r.Sync(ctx, op.id)
		return outcome(err)
	case "of":
		c, err := r.Of(ctx, op.id)
		if errors.Is(err, patterns.ErrNotFound) {
			return hout{res: "ok", values: []int{-1}}, nil
		}
		return hout{res: "ok", values: []int{histValue(c.Name)}}, err
	case "ofmany":
		ids := make([]any, len(op.ids))
		for i, id := range op.ids {
			ids[i] = id
		}
		cs, err := r.OfMany(ctx, ids)
		if err != nil && !errors.Is(err, patterns.ErrNotFound) {
			return nil, err
		}
		out := hout{res: "ok"}
		for _, c := range cs {
			v := histValue(c.Name)
			if c.ID == 0 {
				v = -1 // the zero copy of a missing source
			}
			out.values = append(out.values, v)
		}
		return out, nil
	case "copies":
		w, err := histCopies(ctx, db)
		if err != nil {
			return nil, err
		}
		var values []int
		for _, c := range w {
			if c.source == op.id {
				values = append(values, c.value)
			}
		}
		return hout{res: "ok", values: values}, nil
	case "verify":
		_, err := r.Verify(ctx)
		return outcome(err)
	case "repair":
		_, err := r.Repair(ctx)
		return outcome(err)
	}
	panic(op.op)
}

// histCopy is one copy in a target: its source and value.
type histCopy struct {
	target string
	doc    int32
	source int32
	value  int
	name   string
	price  float64
}

// histCopies reads every copy of every target.
func histCopies(ctx context.Context, db *mongo.Database) ([]histCopy, error) {
	var out []histCopy
	for _, tg := range []extref.Target{cartsTarget, featuredTarget} {
		cur, err := db.Collection(tg.Collection).Find(ctx, bson.D{})
		if err != nil {
			return nil, err
		}
		var docs []bson.Raw
		if err := cur.All(ctx, &docs); err != nil {
			return nil, err
		}
		for _, doc := range docs {
			for _, cp := range copiesAt(doc, tg) {
				name := cp.Lookup("name").StringValue()
				out = append(out, histCopy{target: tg.Collection, doc: doc.Lookup("_id").Int32(), source: cp.Lookup("id").Int32(),
					value: histValue(name), name: name, price: cp.Lookup("price").Double()})
			}
		}
	}
	return out, nil
}

// refHistFinal checks the state at rest. The package's promise:
// "concurrent Syncs and Updates of one source leave its copies equal to
// it once all have returned nil". So for each source that exists at the
// end, every copy equals it when every Sync and Update of it (and every
// Repair, whose syncs are Syncs) returned nil, no application write of it
// has an unknown outcome, and some Sync, Update or Repair that returned
// nil was called after the application's last write of it had returned
// (before that call, the application's writes leave copies stale: the
// godoc's "Sync pushes a source's current fields after any other
// change"). A source deleted at the end is left out: its copies keep a
// last value (Sync's godoc) that the history cannot order. And Verify,
// at rest, counts exactly the copies, stale copies and orphans there are.
func refHistFinal(t *testing.T, db *mongo.Database, h *refHistory, ops []porcupine.Operation) {
	copies, err := histCopies(ctx, db)
	require.NoError(t, err)
	sources := map[int32]Product{}
	cur, err := db.Collection("products").Find(ctx, bson.D{})
	require.NoError(t, err)
	var all []Product
	require.NoError(t, cur.All(ctx, &all))
	for _, p := range all {
		sources[int32(p.ID)] = p
	}
	for id, src := range sources {
		promised, lastWrite, why := true, int64(-1), ""
		var syncedAt []int64
		for _, o := range ops {
			in := o.Input.(hin)
			out, known := o.Output.(hout)
			switch {
			case in.op == "put" || in.op == "delete":
				if in.id == id {
					if !known {
						promised, why = false, "an application write of unknown outcome"
					}
					lastWrite = max(lastWrite, o.Return)
				}
			case (in.op == "sync" || in.op == "update") && in.id == id, in.op == "repair":
				if !known || out.res != "ok" {
					promised, why = false, fmt.Sprintf("%s returned %v", in.op, o.Output)
					continue
				}
				syncedAt = append(syncedAt, o.Call)
			}
		}
		if promised && !slices.ContainsFunc(syncedAt, func(call int64) bool { return call > lastWrite }) {
			promised, why = false, "no Sync, Update or Repair after the application's last write"
		}
		mongotest.Detail(t, "source %d at rest: %q; copies promised equal: %t %s", id, src.Name, promised, why)
		if !promised {
			continue
		}
		for _, c := range copies {
			if c.source == id {
				require.Equal(t, [2]any{src.Name, src.Price}, [2]any{c.name, c.price}, "the copy of source %d in %s %d: every Sync and Update of it returned nil, the last after its last write", id, c.target, c.doc)
			}
		}
	}
	r, err := h.run.ref(db)
	require.NoError(t, err)
	verifyAtRest(t, r, copies, sources)

	// Sync is the retry of every failed call: once it returned nil for
	// each source, every copy of a source equals it.
	for id := range sources {
		_, err := r.Sync(ctx, id)
		require.NoError(t, err, "the retry's Sync of source %d", id)
	}
	copies, err = histCopies(ctx, db)
	require.NoError(t, err)
	for _, c := range copies {
		if src, ok := sources[c.source]; ok {
			require.Equal(t, [2]any{src.Name, src.Price}, [2]any{c.name, c.price}, "the copy of source %d in %s %d after a Sync at rest", c.source, c.target, c.doc)
		}
	}
	verifyAtRest(t, r, copies, sources)
}

// verifyAtRest checks that Verify, with no writer, counts exactly the
// copies, the stale copies and the orphans there are.
func verifyAtRest(t *testing.T, r *extref.Ref[ProductRef], copies []histCopy, sources map[int32]Product) {
	t.Helper()
	reports, err := r.Verify(ctx)
	require.NoError(t, err)
	var stale, orphans [2]int64
	var total [2]int64
	for _, c := range copies {
		i := 0
		if c.target == featuredTarget.Collection {
			i = 1
		}
		total[i]++
		src, ok := sources[c.source]
		switch {
		case !ok:
			orphans[i]++
		case src.Name != c.name || src.Price != c.price:
			stale[i]++
		}
	}
	for i, rep := range reports {
		require.Equal(t, [3]int64{total[i], stale[i], orphans[i]}, [3]int64{rep.Copies, rep.Stale, rep.Orphans}, "Verify at rest of %s: copies, stale, orphans", rep.Target.Collection)
	}
}

// TestHistories runs random histories of every operation on shared
// sources under faults (see refHistSpec), on each server path.
func TestHistories(t *testing.T) {
	mongotest.RunPlans(t, extref.PlanFor, func(t *testing.T, p extref.Plan) {
		chaos.Run(t, refHistSpec(p))
	})
}

// TestHistoriesModel: the model rejects a read of the source that misses
// a completed write and a copy of a value the source never had, and
// accepts an older copy and a write of unknown outcome either way.
func TestHistoriesModel(t *testing.T) {
	op := func(in hop, out any, call, ret int64) porcupine.Operation {
		return porcupine.Operation{Input: in, Output: out, Call: call, Return: ret}
	}
	put := op(hop{op: "put", id: 1, value: 5}, hout{res: "ok"}, 0, 1)
	chaos.CheckModel(t, refHistories, []chaos.ModelCase{
		{Name: "a stale Of", History: []porcupine.Operation{put, op(hop{op: "of", id: 1}, hout{res: "ok", values: []int{0}}, 2, 3)}, OK: false},
		{Name: "a fresh Of", History: []porcupine.Operation{put, op(hop{op: "of", id: 1}, hout{res: "ok", values: []int{5}}, 2, 3)}, OK: true},
		{Name: "an older copy", History: []porcupine.Operation{put, op(hop{op: "copies", id: 1}, hout{res: "ok", values: []int{0, 5}}, 2, 3)}, OK: true},
		{Name: "a copy never had", History: []porcupine.Operation{put, op(hop{op: "copies", id: 1}, hout{res: "ok", values: []int{6}}, 2, 3)}, OK: false},
		{Name: "a delete that matched nothing", History: []porcupine.Operation{op(hop{op: "delete", id: 1}, hout{res: "nomatch"}, 0, 1), op(hop{op: "sync", id: 1}, hout{res: "ok"}, 2, 3)}, OK: true},
		{Name: "an Update that found its source deleted while it wrote the copies", History: []porcupine.Operation{put, op(hop{op: "update", id: 1, value: 6}, hout{res: "deleted"}, 2, 5), op(hop{op: "delete", id: 1}, hout{res: "ok"}, 3, 4), op(hop{op: "of", id: 1}, hout{res: "ok", values: []int{-1}}, 6, 7)}, OK: true},
		{Name: "an Update that updated a source deleted before it", History: []porcupine.Operation{op(hop{op: "delete", id: 1}, hout{res: "ok"}, 0, 1), op(hop{op: "update", id: 1, value: 6}, hout{res: "deleted"}, 2, 3)}, OK: false},
		{Name: "Sync of a deleted source", History: []porcupine.Operation{op(hop{op: "delete", id: 1}, hout{res: "ok"}, 0, 1), op(hop{op: "sync", id: 1}, hout{res: "ok"}, 2, 3)}, OK: false},
		{Name: "an unknown Update that applied", History: []porcupine.Operation{op(hop{op: "update", id: 1, value: 7}, linear.Unknown{Err: errors.New("reset")}, 0, math.MaxInt64), op(hop{op: "of", id: 1}, hout{res: "ok", values: []int{7}}, 2, 3)}, OK: true},
	})
}
