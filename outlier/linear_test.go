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
		t.Logf("%d reads, %d operations", len(reads), h.Len())

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
