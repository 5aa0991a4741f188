package outlier

import (
	"context"
	"fmt"
	"math/bits"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/internal/linear"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
)

// The history test: several goroutines Append to one parent through one
// repository while others Get it (or Count it, or range over Items, whose
// promises are Get's), and the recorded history is checked against a
// model of what Append and Get promise (porcupine, through
// internal/linear). The promise is weaker than linearizable, and the model
// encodes exactly it: Get reads the parent, then the overflow, so it may
// miss an item pushed into the parent after its first read while it sees
// a later item pushed into overflow before its second; and a reader sees
// some of the writes of a multi-item Append and not the others. What Get
// promises is that it returns every item whose Append returned before the
// Get began, no item twice, nothing never appended, and each appender's
// items in the order it appended them.

// historyAppend is the input of an Append: items [from, to) of a writer.
type historyAppend struct{ writer, from, to int }

// historyGet is the input of a Get, or of a range over Items (stream
// set), whose promise is the same; its output is a historyItems.
type historyGet struct{ stream bool }

// historyCount is the input of a Count, and its output.
type historyCount struct {
	n   int
	err error
}

// historyItems is what a Get returned: the items as indexes (see
// historyModel), -1 for an id that was never appended.
type historyItems struct {
	items []int
	err   error
}

// historyModel is the model of Append and Get on one parent, for writers
// appending each items of their own. An item's index is writer*each + i
// for the i-th item of a writer; the state is the set of the items of the
// Appends that took effect (a bit each, so writers*each <= 64).
//
// An Append adds its items, or, when it failed (its outcome unknown: some
// of its items may be stored), nothing: a Get may then show them or not.
// A Get is accepted when it holds every item of the state (every Append
// linearized before it, which includes every Append that returned before
// it began), no item twice, only items that some Append appends, and each
// writer's items in increasing order. It may hold items of Appends not yet
// linearized: those concurrent with it, even in part. A Count likewise
// counts at least the items of the state, and no more than are appended.
func historyModel(writers, each int) porcupine.Model {
	bit := func(g int) uint64 { return 1 << uint(g) }
	return porcupine.Model{
		Init: func() any { return uint64(0) },
		Step: func(state, input, output any) (bool, any) {
			held := state.(uint64)
			switch in := input.(type) {
			case historyCount:
				out := output.(historyCount)
				return out.err != nil || out.n >= bits.OnesCount64(held) && out.n <= writers*each, held
			case historyAppend:
				if output != nil { // failed: outcome unknown
					return true, held
				}
				for i := in.from; i < in.to; i++ {
					held |= bit(in.writer*each + i)
				}
				return true, held
			default:
				out := output.(historyItems)
				if out.err != nil {
					return true, held
				}
				var seen uint64
				last := make([]int, writers)
				for w := range last {
					last[w] = -1
				}
				for _, g := range out.items {
					if g < 0 || g >= writers*each || seen&bit(g) != 0 {
						return false, held // never appended, or twice
					}
					seen |= bit(g)
					if w, i := g/each, g%each; i > last[w] {
						last[w] = i
					} else {
						return false, held // out of the writer's order
					}
				}
				return held&^seen == 0, held // nothing linearized before is missing
			}
		},
		DescribeOperation: func(input, output any) string {
			if in, ok := input.(historyAppend); ok {
				return fmt.Sprintf("Append(w%d %d..%d) -> %v", in.writer, in.from, in.to-1, output)
			}
			if out, ok := output.(historyCount); ok {
				return fmt.Sprintf("Count() -> %d, %v", out.n, out.err)
			}
			op, out := "Get", output.(historyItems)
			if input.(historyGet).stream {
				op = "Items"
			}
			if out.err != nil {
				return fmt.Sprintf("%s() -> %v", op, out.err)
			}
			return fmt.Sprintf("%s() -> %v", op, out.items)
		},
		DescribeState: func(state any) string {
			return fmt.Sprintf("%d items", bits.OnesCount64(state.(uint64)))
		},
	}
}

// span is when an operation ran, as seen from inside the call: its
// commands were all sent and answered within it.
type span struct{ start, end time.Time }

// historyRead is a Get, a Count or a range over Items as recorded, with
// its span.
type historyRead struct {
	span
	count bool
	out   historyItems // a Get's or Items'
	n     historyCount // a Count's
}

// TestAppendHistory records writers appending (alternately one and two
// items per call) to one parent through one repository while readers Get,
// Count and range over Items (one overflow document per round trip), and
// checks the history with historyModel; and, what the model cannot see,
// that no read returns an item whose Append began after the read ended
// (for Count, no more items than the Appends begun), and that in every Get
// and Items the items of an Append that ended before another began come
// before the other's ("items appended after an Append returned come after
// its items"). N=3 and M=2, so that the items cross the parent and many
// overflow documents.
func TestAppendHistory(t *testing.T) {
	const writers, readers, maxReads = 3, 2, 40 // maxReads per reader keeps the history small
	each := mongotest.Scale(16, 8)
	appendPlans(t, func(t *testing.T, p Plan) {
		ctx := context.Background()
		cfg := small()
		cfg.BatchSize = 1 // Items reads the overflow document by document
		r, _ := newPost(t, cfg, p)
		index := func(id string) int {
			var w, i int
			if _, err := fmt.Sscanf(id, "w%d-%d", &w, &i); err != nil || w < 0 || w >= writers || i < 0 || i >= each {
				return -1
			}
			return w*each + i
		}
		var h linear.History
		var mu sync.Mutex
		appends := make([]span, writers*each) // by the index of each item
		var reads []historyRead
		// read runs a Get (kind 0), a Count (1) or a range over Items (2).
		read := func(client, kind int) historyRead {
			rd := historyRead{count: kind == 1}
			switch kind {
			case 1:
				h.Do(client, historyCount{}, func() any {
					rd.start = time.Now()
					rd.n.n, rd.n.err = r.Count(ctx, 1)
					rd.end = time.Now()
					return rd.n
				})
			case 2:
				h.Do(client, historyGet{stream: true}, func() any {
					rd.start = time.Now()
					for c, err := range r.Items(ctx, 1) {
						if err != nil {
							rd.out.err = err
							break
						}
						rd.out.items = append(rd.out.items, index(c.ID))
					}
					rd.end = time.Now()
					return rd.out
				})
			default:
				h.Do(client, historyGet{}, func() any {
					rd.start = time.Now()
					_, items, err := r.Get(ctx, 1)
					rd.end = time.Now()
					rd.out.err = err
					for _, c := range items {
						rd.out.items = append(rd.out.items, index(c.ID))
					}
					return rd.out
				})
			}
			mu.Lock()
			reads = append(reads, rd)
			mu.Unlock()
			return rd
		}
		var wg, writing sync.WaitGroup
		for w := range writers {
			writing.Go(func() {
				mine := comments(fmt.Sprintf("w%d-", w), 0, each)
				for i, k := 0, 1; i < each; i, k = i+k, 3-k {
					to := min(i+k, each)
					h.Do(w, historyAppend{w, i, to}, func() any {
						start := time.Now()
						err := r.Append(ctx, 1, mine[i:to]...)
						s := span{start, time.Now()}
						mu.Lock()
						for j := i; j < to; j++ {
							appends[w*each+j] = s
						}
						mu.Unlock()
						if err != nil {
							t.Errorf("Append: %v", err)
							return err
						}
						return nil
					})
				}
			})
		}
		done := make(chan struct{})
		for c := range readers {
			wg.Go(func() {
				for i := range maxReads {
					select {
					case <-done:
						return
					default:
						read(writers+c, (i+c)%3)
					}
				}
			})
		}
		writing.Wait()
		close(done)
		wg.Wait()
		require.Len(t, read(writers, 0).out.items, writers*each, "the final Get holds every item")
		require.Equal(t, writers*each, read(writers, 1).n.n, "the final Count counts every item")
		require.Len(t, read(writers, 2).out.items, writers*each, "the final Items yields every item")
		mongotest.Detail(t, "%d reads, %d operations", len(reads), h.Len())

		for _, rd := range reads {
			require.NoError(t, rd.out.err)
			require.NoError(t, rd.n.err)
			if rd.count {
				begun := 0
				for _, a := range appends {
					if a.start.Before(rd.end) {
						begun++
					}
				}
				require.LessOrEqual(t, rd.n.n, begun, "Count counts only items whose Append began before it ended")
				continue
			}
			for k, a := range rd.out.items {
				require.GreaterOrEqual(t, a, 0, "an item never appended")
				require.True(t, appends[a].start.Before(rd.end), "item %d seen by a Get that ended before its Append began", a)
				for _, b := range rd.out.items[:k] {
					require.False(t, appends[a].end.Before(appends[b].start),
						"item %d, whose Append ended before item %d's began, comes after it", a, b)
				}
			}
		}
		linear.Check(t, historyModel(writers, each), &h, time.Minute)
	})
}

// TestHistoryModel: the model accepts what Get promises and rejects the
// rest.
func TestHistoryModel(t *testing.T) {
	model := historyModel(2, 3)
	op := func(client int, call, ret int64, in, out any) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Call: call, Return: ret, Input: in, Output: out}
	}
	get := func(items ...int) historyItems { return historyItems{items: items} }
	for name, tc := range map[string]struct {
		ops []porcupine.Operation
		ok  bool
	}{
		"every item of the Appends that returned": {[]porcupine.Operation{
			op(0, 0, 1, historyAppend{0, 0, 2}, nil), op(1, 2, 3, historyAppend{1, 0, 1}, nil),
			op(2, 4, 5, historyGet{}, get(0, 3, 1)),
		}, true},
		"an item of an Append that returned is missing": {[]porcupine.Operation{
			op(0, 0, 1, historyAppend{0, 0, 2}, nil),
			op(2, 4, 5, historyGet{}, get(0)),
		}, false},
		"some items of a concurrent Append": {[]porcupine.Operation{
			op(0, 0, 10, historyAppend{0, 0, 3}, nil),
			op(2, 1, 2, historyGet{}, get(0, 1)),
		}, true},
		"a later item of a concurrent Append without an earlier one of its writer": {[]porcupine.Operation{
			op(0, 0, 1, historyAppend{0, 0, 1}, nil), op(0, 2, 10, historyAppend{0, 1, 3}, nil),
			op(2, 3, 4, historyGet{}, get(0, 2)),
		}, true},
		"a writer's items out of order": {[]porcupine.Operation{
			op(0, 0, 1, historyAppend{0, 0, 2}, nil),
			op(2, 4, 5, historyGet{}, get(1, 0)),
		}, false},
		"an item twice": {[]porcupine.Operation{
			op(0, 0, 1, historyAppend{0, 0, 1}, nil),
			op(2, 4, 5, historyGet{}, get(0, 0)),
		}, false},
		"an item never appended": {[]porcupine.Operation{
			op(2, 4, 5, historyGet{}, get(-1)),
		}, false},
		"a Count of at least the items of the Appends that returned": {[]porcupine.Operation{
			op(0, 0, 1, historyAppend{0, 0, 2}, nil), op(1, 2, 10, historyAppend{1, 0, 2}, nil),
			op(2, 4, 5, historyCount{}, historyCount{n: 3}),
		}, true},
		"a Count that misses an item of an Append that returned": {[]porcupine.Operation{
			op(0, 0, 1, historyAppend{0, 0, 2}, nil),
			op(2, 4, 5, historyCount{}, historyCount{n: 1}),
		}, false},
		"the items of a failed Append, or not": {[]porcupine.Operation{
			op(0, 0, 1, historyAppend{0, 0, 2}, fmt.Errorf("broken")),
			op(2, 2, 3, historyGet{}, get(0)), op(2, 4, 5, historyGet{}, get()),
		}, true},
	} {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, tc.ok, porcupine.CheckOperations(model, tc.ops))
		})
	}
}

// The Update history: updaters each replace one item with versions 1, 2,
// ... (its text), a remover takes out items before them in the same
// documents (which shifts the indexes Update reads), and readers Get the
// parent. updateModel is what Update, Remove and Get promise together:
// the state is each updated item's version as of the Updates linearized
// (a lower bound of what a Get may show, since a Get reads the parent and
// the overflow at two moments and may show later versions, but never an
// older one) and the set of items removed. A failed Update or Remove may
// or may not have applied: the state keeps its bound.

// updateItems are the items of the Update history: 3 embedded, then
// overflow documents [3 4] [5 6] [7]. Items 1, 4 and 6 are updated,
// items 0, 3 and 5 removed.
const updateItems = 8

// historyUpdate is the input of an Update: item k to version v.
type historyUpdate struct{ k, v int }

// historyRemove is the input of a Remove of item k.
type historyRemove struct{ k int }

// historyVersions is what a Get returned: the items' indexes and
// versions, in its order.
type historyVersions struct {
	items, versions []int
	err             error
}

// updateState is the model's state: the lowest version of each item a
// Get may show, and the items removed.
type updateState struct {
	versions [updateItems]int
	removed  uint8
}

func updateModel(removable uint8) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return updateState{} },
		Step: func(state, input, output any) (bool, any) {
			st := state.(updateState)
			switch in := input.(type) {
			case historyUpdate:
				if output == nil {
					st.versions[in.k] = in.v
				}
				return true, st
			case historyRemove:
				if output == nil {
					st.removed |= 1 << in.k
				}
				return true, st
			}
			out := output.(historyVersions)
			if out.err != nil {
				return true, st
			}
			var seen uint8
			last := -1
			for i, k := range out.items {
				if k <= last || k >= updateItems || st.removed&(1<<k) != 0 || out.versions[i] < st.versions[k] {
					return false, st // out of order, unknown, removed, or an older version
				}
				seen, last = seen|1<<k, k
			}
			return ^seen&^removable == 0, st // only removable items may be missing
		},
		DescribeOperation: func(input, output any) string {
			switch in := input.(type) {
			case historyUpdate:
				return fmt.Sprintf("Update(%d v%d) -> %v", in.k, in.v, output)
			case historyRemove:
				return fmt.Sprintf("Remove(%d) -> %v", in.k, output)
			}
			out := output.(historyVersions)
			return fmt.Sprintf("Get() -> %v %v, %v", out.items, out.versions, out.err)
		},
	}
}

// TestUpdateHistory records the Update history (above) on every plan and
// checks it with updateModel; and, what the model cannot see, that no Get
// shows a version whose Update began after the Get ended.
func TestUpdateHistory(t *testing.T) {
	updated, removed := []int{1, 4, 6}, []int{0, 3, 5}
	versions := mongotest.Scale(12, 4)
	mongotest.RunPlans(t, PlanFor, func(t *testing.T, p Plan) {
		ctx := context.Background()
		r, _ := newPost(t, small(), p)
		require.NoError(t, r.Append(ctx, 1, comments("c", 0, updateItems)...))
		var h linear.History
		var mu sync.Mutex
		begun := map[[2]int]time.Time{} // when the Update of item k to version v began
		var gets []historyRead
		var versionsSeen [][2][]int
		var wg, writing sync.WaitGroup
		for u, k := range updated {
			writing.Go(func() {
				for v := 1; v <= versions; v++ {
					h.Do(u, historyUpdate{k, v}, func() any {
						mu.Lock()
						begun[[2]int{k, v}] = time.Now()
						mu.Unlock()
						if err := r.Update(ctx, 1, comment{ID: fmt.Sprintf("c%02d", k), Text: fmt.Sprint(v)}); err != nil {
							t.Errorf("Update: %v", err)
							return err
						}
						return nil
					})
				}
			})
		}
		writing.Go(func() {
			for _, k := range removed {
				time.Sleep(time.Duration(versions) * 5 * time.Millisecond)
				h.Do(len(updated), historyRemove{k}, func() any {
					if err := r.Remove(ctx, 1, fmt.Sprintf("c%02d", k)); err != nil {
						t.Errorf("Remove: %v", err)
						return err
					}
					return nil
				})
			}
		})
		done := make(chan struct{})
		for c := range 2 {
			wg.Go(func() {
				for {
					select {
					case <-done:
						return
					default:
					}
					h.Do(len(updated)+1+c, historyGet{}, func() any {
						var out historyVersions
						start := time.Now()
						_, items, err := r.Get(ctx, 1)
						end := time.Now()
						out.err = err
						for _, it := range items {
							var k, v int
							fmt.Sscanf(it.ID, "c%d", &k)
							fmt.Sscan(it.Text, &v)
							out.items, out.versions = append(out.items, k), append(out.versions, v)
						}
						mu.Lock()
						gets = append(gets, historyRead{span: span{start, end}})
						versionsSeen = append(versionsSeen, [2][]int{out.items, out.versions})
						mu.Unlock()
						return out
					})
				}
			})
		}
		writing.Wait()
		close(done)
		wg.Wait()
		_, items, err := r.Get(ctx, 1)
		require.NoError(t, err)
		var want []comment
		for _, c := range comments("c", 0, updateItems) {
			switch c.ID {
			case "c00", "c03", "c05":
				continue
			case "c01", "c04", "c06":
				c.Text = fmt.Sprint(versions)
			}
			want = append(want, c)
		}
		require.Equal(t, want, items, "the last version of each item, the removed ones gone, in order")
		for i, g := range gets {
			for j, k := range versionsSeen[i][0] {
				if v := versionsSeen[i][1][j]; v > 0 {
					require.True(t, begun[[2]int{k, v}].Before(g.end), "item %d version %d seen by a Get that ended before its Update began", k, v)
				}
			}
		}
		mongotest.Detail(t, "%d Gets, %d operations", len(gets), h.Len())
		var removable uint8
		for _, k := range removed {
			removable |= 1 << k
		}
		linear.Check(t, updateModel(removable), &h, time.Minute)
	})
}

// TestUpdateModel: the model accepts what Update and Get promise and
// rejects the rest.
func TestUpdateModel(t *testing.T) {
	model := updateModel(1 << 0)
	op := func(client int, call, ret int64, in, out any) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Call: call, Return: ret, Input: in, Output: out}
	}
	all := func(v1 int) historyVersions {
		return historyVersions{items: []int{0, 1, 2, 3, 4, 5, 6, 7}, versions: []int{0, v1, 0, 0, 0, 0, 0, 0}}
	}
	for name, tc := range map[string]struct {
		ops []porcupine.Operation
		ok  bool
	}{
		"the version of the Update that returned": {[]porcupine.Operation{
			op(0, 0, 1, historyUpdate{1, 1}, nil), op(1, 2, 3, historyGet{}, all(1)),
		}, true},
		"an older version after the Update returned": {[]porcupine.Operation{
			op(0, 0, 1, historyUpdate{1, 1}, nil), op(1, 2, 3, historyGet{}, all(0)),
		}, false},
		"the new version of a concurrent Update": {[]porcupine.Operation{
			op(0, 0, 10, historyUpdate{1, 1}, nil), op(1, 2, 3, historyGet{}, all(1)),
		}, true},
		"either version after a failed Update": {[]porcupine.Operation{
			op(0, 0, 1, historyUpdate{1, 1}, fmt.Errorf("broken")), op(1, 2, 3, historyGet{}, all(0)), op(1, 4, 5, historyGet{}, all(1)),
		}, true},
		"a removed item": {[]porcupine.Operation{
			op(0, 0, 1, historyRemove{0}, nil), op(1, 2, 3, historyGet{}, all(0)),
		}, false},
		"a missing item that was never removed": {[]porcupine.Operation{
			op(1, 2, 3, historyGet{}, historyVersions{items: []int{0, 1, 2}, versions: []int{0, 0, 0}}),
		}, false},
		"out of order": {[]porcupine.Operation{
			op(1, 2, 3, historyGet{}, historyVersions{items: []int{0, 2, 1, 3, 4, 5, 6, 7}, versions: make([]int, 8)}),
		}, false},
	} {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, tc.ok, porcupine.CheckOperations(model, tc.ops))
		})
	}
}
