package outlier

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// seedOutlier stores a parent with n items of about 100 bytes (50
// embedded, the rest 100 per overflow document) through Append.
func seedOutlier(b *testing.B, n int) *Repo[post, comment] {
	cfg := Config{Parents: "posts", Field: "comments", Cap: 50, OverflowCap: 100}
	r, _ := newRepo(b, cfg, PlanFor(mongotest.Portable()))
	ctx := context.Background()
	_, err := r.Insert(ctx, post{ID: 1})
	require.NoError(b, err)
	items := make([]comment, n)
	for i := range items {
		items[i] = comment{ID: fmt.Sprintf("c%06d", i), Text: strings.Repeat("x", 80)}
	}
	require.NoError(b, r.Append(ctx, 1, items...))
	return r
}

func heap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkRead reads a parent with 1,000 and 10,000 items by streaming
// (Items, batches of 1,000 items) and by loading (Get). It reports bytes
// allocated per item and the peak live heap of a read (sampled after a GC
// every 500 items while streaming, and with the loaded result held):
// streaming stays at the batch whatever the total; loading grows with it.
func BenchmarkRead(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{1000, 10000} {
		r := seedOutlier(b, n)
		b.Run(fmt.Sprintf("Items/%d", n), func(b *testing.B) {
			b.ReportAllocs()
			allocated := allocs()
			for b.Loop() {
				count := 0
				for _, err := range r.Items(ctx, 1) {
					if err != nil {
						b.Fatal(err)
					}
					count++
				}
				if count != n {
					b.Fatalf("streamed %d items, want %d", count, n)
				}
			}
			b.StopTimer()
			perItem(b, n, allocs()-allocated)
			base, peak := heap(), uint64(0)
			seen := 0
			for _, err := range r.Items(ctx, 1) {
				require.NoError(b, err)
				if seen++; seen%500 == 0 {
					peak = max(peak, heap())
				}
			}
			b.ReportMetric(float64(peak-min(base, peak))/1024, "peak-KiB")
		})
		b.Run(fmt.Sprintf("Get/%d", n), func(b *testing.B) {
			b.ReportAllocs()
			allocated := allocs()
			for b.Loop() {
				_, items, err := r.Get(ctx, 1)
				if err != nil || len(items) != n {
					b.Fatalf("got %d items, %v", len(items), err)
				}
			}
			b.StopTimer()
			perItem(b, n, allocs()-allocated)
			base := heap()
			_, items, err := r.Get(ctx, 1)
			require.NoError(b, err)
			peak := heap()
			runtime.KeepAlive(items)
			b.ReportMetric(float64(peak-min(base, peak))/1024, "peak-KiB")
		})
	}
}

// allocs returns the bytes allocated by the process so far.
func allocs() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

// perItem reports the bytes allocated per item read over b.N reads of n.
func perItem(b *testing.B, n int, allocated uint64) {
	b.ReportMetric(float64(allocated)/float64(b.N*n), "B/item")
}

// BenchmarkAppend appends one item to an open parent: through the
// repository on each path, and as the bare $push a hand-written service
// would send (no guard, no retry safety, no size check). Compare ns/op:
// the native path sends the same single command with a longer filter; the
// portable path reads the parent first.
func BenchmarkAppend(b *testing.B) {
	ctx := context.Background()
	cfg := Config{Parents: "posts", Field: "comments", Cap: 1 << 30, OverflowCap: 100}
	for name, p := range map[string]Plan{"native": PlanFor(mongotest.Native()), "portable": PlanFor(mongotest.Portable())} {
		b.Run("repo-"+name, func(b *testing.B) {
			r, _ := newPost(b, cfg, p)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				if err := r.Append(ctx, 1, comment{ID: fmt.Sprint(i), Text: "hello"}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("driver-push", func(b *testing.B) {
		r, _ := newPost(b, cfg, PlanFor(mongotest.Portable()))
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			_, err := r.parents.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}},
				bson.D{{Key: "$push", Value: bson.D{{Key: "comments", Value: comment{ID: fmt.Sprint(i), Text: "hello"}}}}})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}
