package bucket_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/mongopatterns/mongopatterns/bucket"
	"github.com/mongopatterns/mongopatterns/internal/linear"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
)

// The linearizability test of Buckets: several goroutines Add and AddMany
// readings of two series and read them back with Range and Summaries, on
// one store; porcupine checks the recorded history against a sequential
// model whose state is the set of readings of each series and window.
//
// The model encodes what the godoc promises, no more: a write's readings
// of one window appear at once (one statement per bucket: Add's upsert,
// AddMany's top-up), and a read sees each window at one instant of its
// call, the windows of a longer interval at instants of their own (Range:
// "a measurement added during the iteration to a window not yet read
// appears, and one added to a window already yielded does not"). So a
// call is split into one operation per window it touches, each in the
// partition of its series and window, with the call's interval of time;
// a window holds one bucket throughout (a reading of each is stored
// first, and the cap leaves room for every write), which Range reads at
// one instant.

// linPoint is a reading of the test: its id (also its Hum, by which Range
// results are told apart) and its minute in its window.
type linPoint struct {
	id, minute int
}

// linPart is what one call does in one window of one series.
type linPart struct {
	sensor   string
	window   int
	kind     int        // linAdd, linRange or linCount
	pts      []linPoint // linAdd: the readings written
	from, to int        // linRange, linCount: the minutes read, [from, to)
}

const (
	linAdd = iota
	linRange
	linCount
)

// linInput is a whole call: its parts, one per window.
type linInput struct{ parts []linPart }

// linResult is what a call saw of one window.
type linResult struct {
	ids        []int // linRange: the ids read, in increasing order
	count, sum int   // linCount: the window's count and sum of Hum
}

// linOutput is what a call returned: an error (outcome unknown for a
// write, nothing to check for a read), or a result per part.
type linOutput struct {
	err     error
	results []linResult
}

// linState is the readings of one series and window, by increasing id.
type linState []linPoint

// linModel is the sequential model, partitioned by series and window.
var linModel = (&porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byWindow := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			in, out := op.Input.(linInput), op.Output.(linOutput)
			for i, part := range in.parts {
				var res linResult
				if out.err == nil {
					res = out.results[i]
				}
				key := fmt.Sprintf("%s/%d", part.sensor, part.window)
				if _, ok := byWindow[key]; !ok {
					keys = append(keys, key)
				}
				byWindow[key] = append(byWindow[key], porcupine.Operation{
					ClientId: op.ClientId, Call: op.Call, Return: op.Return,
					Input: part, Output: linOutput{err: out.err, results: []linResult{res}},
				})
			}
		}
		out := make([][]porcupine.Operation, len(keys))
		for i, key := range keys {
			out[i] = byWindow[key]
		}
		return out
	},
	Init: func() []any { return []any{linState(nil)} },
	Step: func(state, input, output any) []any {
		st, part, out := state.(linState), input.(linPart), output.(linOutput)
		switch part.kind {
		case linAdd:
			added := slices.Concat(st, part.pts)
			slices.SortFunc(added, func(a, b linPoint) int { return a.id - b.id })
			if out.err != nil {
				return []any{st, linState(added)} // stored or not
			}
			return []any{linState(added)}
		case linRange:
			var want []int
			for _, p := range st {
				if part.from <= p.minute && p.minute < part.to {
					want = append(want, p.id)
				}
			}
			if out.err == nil && !slices.Equal(want, out.results[0].ids) {
				return nil
			}
			return []any{st}
		default:
			sum := 0
			for _, p := range st {
				sum += p.id
			}
			if out.err == nil && (out.results[0].count != len(st) || out.results[0].sum != sum) {
				return nil
			}
			return []any{st}
		}
	},
	Equal: func(a, b any) bool { return slices.Equal(a.(linState), b.(linState)) },
	Hash: func(s any) uint64 {
		h := fnv.New64a()
		for _, p := range s.(linState) {
			fmt.Fprintf(h, "%d,", p.id)
		}
		return h.Sum64()
	},
	DescribeOperation: func(input, output any) string {
		part, out := input.(linPart), output.(linOutput)
		if out.err != nil {
			return fmt.Sprintf("%v -> %v", part, out.err)
		}
		return fmt.Sprintf("%v -> %v", part, out.results[0])
	},
	DescribeState: func(s any) string {
		var ids []string
		for _, p := range s.(linState) {
			ids = append(ids, fmt.Sprint(p.id))
		}
		return "{" + strings.Join(ids, " ") + "}"
	},
}).ToModel()

// TestLinearizable: four goroutines, each with its own client id, call
// Add, AddMany, Range and Summaries on one store, on two series of two
// windows each; one of them gives each AddMany a deadline of a few
// milliseconds and calls it again with the same points until it succeeds,
// which AddMany's godoc says stores each reading once: the calls are one
// operation, from the first call to the last. The history is linearizable
// against linModel: no write lost or applied twice, a write's readings of
// a window atomic, a read of a window exactly the readings of some
// instant of the call.
func TestLinearizable(t *testing.T) {
	mongotest.RunPlans(t, bucket.PlanFor, func(t *testing.T, p bucket.Plan) {
		// Client deadlined calls AddMany with a deadline of a few
		// milliseconds, and again with the same points until it succeeds.
		const clients, deadlined = 4, 3
		ctx := context.Background()
		s, _ := newBuckets(t, p, config(1000))
		sensors := []string{"s1", "s2"}
		readingOf := func(window int, pt linPoint) reading {
			return reading{At: at(time.Duration(window)*time.Hour + time.Duration(pt.minute)*time.Minute), Temp: 1, Hum: int64(pt.id)}
		}
		var ids atomic.Int64
		var h linear.History
		add := func(client int, parts []linPart) {
			var pts []bucket.Point[string, reading]
			for _, part := range parts {
				for _, pt := range part.pts {
					pts = append(pts, bucket.Point[string, reading]{Meta: part.sensor, Value: readingOf(part.window, pt)})
				}
			}
			h.Do(client, linInput{parts}, func() any {
				var err error
				switch {
				case client == deadlined:
					err = addManyUntilStored(s, pts, client)
				case len(pts) == 1 && client%2 == 0:
					err = s.Add(ctx, pts[0].Meta, pts[0].Value)
				default:
					err = s.AddMany(ctx, pts)
				}
				return linOutput{err: err, results: make([]linResult, len(parts))}
			})
		}

		// A reading in each window first, so that each holds one bucket.
		for _, sensor := range sensors {
			for window := range 2 {
				add(clients, []linPart{{sensor: sensor, window: window, kind: linAdd, pts: []linPoint{{id: int(ids.Add(1)), minute: 30}}}})
			}
		}

		perClient := mongotest.Scale(60, 25)
		var wg sync.WaitGroup
		for c := range clients {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(c), 15))
				for range perClient {
					sensor := sensors[rng.IntN(len(sensors))]
					windows := []int{rng.IntN(2)}
					if rng.IntN(3) == 0 {
						windows = []int{0, 1}
					}
					switch k := rng.IntN(10); {
					case k < 5:
						var parts []linPart
						for _, window := range windows {
							part := linPart{sensor: sensor, window: window, kind: linAdd}
							for range 1 + rng.IntN(2) {
								part.pts = append(part.pts, linPoint{id: int(ids.Add(1)), minute: rng.IntN(60)})
							}
							parts = append(parts, part)
						}
						add(c, parts)
					case k < 8:
						from, to := rangeMinutes(windows, rng)
						h.Do(c, rangeCall(sensor, windows, from, to), func() any { return readRange(ctx, s, sensor, windows, from, to) })
					default:
						h.Do(c, countCall(sensor, windows), func() any { return readCounts(ctx, s, sensor, windows) })
					}
				}
			})
		}
		wg.Wait()
		linear.Check(t, linModel, &h, time.Minute)
	})
}

// addManyUntilStored calls AddMany of pts with a deadline of 1 to 20 ms
// (longer every few attempts, so that it ends), again with the same
// points after each error, until it succeeds.
func addManyUntilStored(s *bucket.Buckets[string, reading], pts []bucket.Point[string, reading], seed int) error {
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(pts[0].Value.Hum)))
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(1+rng.IntN(20))*time.Millisecond*time.Duration(1+attempt/4))
		err := s.AddMany(ctx, pts)
		cancel()
		if err == nil || attempt == 200 {
			return err
		}
	}
}

// rangeCall is a Range of the windows of sensor: within one window, from
// minute from to minute to; across two, from minute from of the first to
// minute to of the second.
func rangeCall(sensor string, windows []int, from, to int) linInput {
	if len(windows) == 1 {
		return linInput{parts: []linPart{{sensor: sensor, window: windows[0], kind: linRange, from: from, to: to}}}
	}
	return linInput{parts: []linPart{
		{sensor: sensor, window: 0, kind: linRange, from: from, to: 60},
		{sensor: sensor, window: 1, kind: linRange, from: 0, to: to},
	}}
}

// rangeMinutes draws the minutes of a Range: [from, to) within the
// window, or from in the first window and to in the second.
func rangeMinutes(windows []int, rng *rand.Rand) (from, to int) {
	from = rng.IntN(60)
	if len(windows) == 1 {
		return from, from + 1 + rng.IntN(60-from)
	}
	return from, 1 + rng.IntN(60)
}

// readRange calls Range as rangeCall describes it and splits what it
// yields by window.
func readRange(ctx context.Context, s *bucket.Buckets[string, reading], sensor string, windows []int, from, to int) any {
	start := time.Duration(windows[0]) * time.Hour
	end := time.Duration(windows[len(windows)-1])*time.Hour + time.Duration(to)*time.Minute
	results := make([]linResult, len(windows))
	for r, err := range s.Range(ctx, sensor, at(start+time.Duration(from)*time.Minute), at(end)) {
		if err != nil {
			return linOutput{err: err}
		}
		i := slices.Index(windows, int(r.At.Sub(base)/time.Hour))
		results[i].ids = append(results[i].ids, int(r.Hum))
	}
	for i := range results {
		slices.Sort(results[i].ids)
	}
	return linOutput{results: results}
}

// countCall is a Summaries of the windows of sensor, one step per window.
func countCall(sensor string, windows []int) linInput {
	var parts []linPart
	for _, w := range windows {
		parts = append(parts, linPart{sensor: sensor, window: w, kind: linCount, from: 0, to: 60})
	}
	return linInput{parts: parts}
}

// readCounts calls Summaries over the windows, a step of an hour, and
// returns the count and the sum of Hum (the ids) of each.
func readCounts(ctx context.Context, s *bucket.Buckets[string, reading], sensor string, windows []int) any {
	from := at(time.Duration(windows[0]) * time.Hour)
	to := at(time.Duration(windows[len(windows)-1]+1) * time.Hour)
	results := make([]linResult, len(windows))
	for sum, err := range s.Summaries(ctx, sensor, from, to, time.Hour) {
		if err != nil {
			return linOutput{err: err}
		}
		i := slices.Index(windows, int(sum.Start.Sub(base)/time.Hour))
		results[i] = linResult{count: int(sum.Count), sum: int(sum.Values["hum"].Sum)}
	}
	return linOutput{results: results}
}
