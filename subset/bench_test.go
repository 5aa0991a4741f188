package subset_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/subset"
)

// addBench holds what the Add benchmarks share: 64 products, so that no
// subset grows large where the server ignores $slice, and two ways to add
// a review to one of them.
type addBench struct {
	db       *mongo.Database
	products []string
	repo     *subset.Repo[Product, Review]
}

var reviewsConfig = subset.Config{
	Parents: "products", Field: "reviews",
	Items: "reviews", ParentField: "productId",
	SortField: "at", Descending: true, Cap: 10,
}

// newAddBench builds the native repository: on a server without the
// $push modifiers it is forced, which is enough to measure what happens in
// the client (the subsets then grow past the cap).
func newAddBench(tb testing.TB) *addBench {
	tb.Helper()
	ctx := context.Background()
	db := mongotest.DB(tb)
	build := subset.New[Product, Review]
	if !mongotest.Server().Has(patterns.FeaturePushModifiers) {
		build = subset.NewNative[Product, Review]
	}
	r, err := build(db, reviewsConfig)
	require.NoError(tb, err)
	require.NoError(tb, patterns.EnsureIndexes(ctx, r.Indexes()...))
	a := &addBench{db: db, repo: r}
	for i := range 64 {
		a.products = append(a.products, fmt.Sprintf("p%02d", i))
		_, err := db.Collection("products").InsertOne(ctx, Product{ID: a.products[i], Name: "product"})
		require.NoError(tb, err)
	}
	return a
}

func (a *addBench) review(i int) Review {
	return Review{ID: bson.NewObjectID().Hex(), Stars: 1 + i%5, At: time.UnixMilli(int64(i) * 1000).UTC()}
}

// viaRepo adds review i with the repository.
func (a *addBench) viaRepo(ctx context.Context, i int) error {
	return a.repo.Add(ctx, a.products[i%len(a.products)], a.review(i))
}

// byHand sends the same two commands as the native path, written with the
// driver: the insert, then the guarded $push with $sort and $slice.
func (a *addBench) byHand(ctx context.Context, i int) error {
	rv := a.review(i)
	rv.ProductID = a.products[i%len(a.products)]
	if _, err := a.db.Collection("reviews").InsertMany(ctx, []Review{rv}, options.InsertMany().SetOrdered(false)); err != nil {
		return err
	}
	_, err := a.db.Collection("products").UpdateOne(ctx,
		bson.D{{Key: "_id", Value: rv.ProductID}, {Key: "reviews._id", Value: bson.D{{Key: "$nin", Value: bson.A{rv.ID}}}}},
		bson.D{
			{Key: "$push", Value: bson.D{{Key: "reviews", Value: bson.D{
				{Key: "$each", Value: []Review{rv}},
				{Key: "$sort", Value: bson.D{{Key: "at", Value: -1}, {Key: "_id", Value: -1}}},
				{Key: "$slice", Value: 10},
			}}}},
			{Key: "$inc", Value: bson.D{{Key: "reviewsRev", Value: int64(1)}}},
		})
	return err
}

// BenchmarkAdd sets Add on the native path beside the same two driver
// calls written by hand, and Add on the portable path beside them both.
func BenchmarkAdd(b *testing.B) {
	ctx := context.Background()
	a := newAddBench(b)
	portable, err := subset.NewPortable[Product, Review](a.db, reviewsConfig)
	require.NoError(b, err)
	for _, bc := range []struct {
		name string
		add  func(context.Context, int) error
	}{
		{"native", a.viaRepo},
		{"by-hand", a.byHand},
		{"portable", func(ctx context.Context, i int) error {
			return portable.Add(ctx, a.products[i%len(a.products)], a.review(i))
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if err := bc.add(ctx, i); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkGet reads a product with its full subset of 10 reviews.
func BenchmarkGet(b *testing.B) {
	ctx := context.Background()
	a := newAddBench(b)
	portable, err := subset.NewPortable[Product, Review](a.db, reviewsConfig)
	require.NoError(b, err)
	for i := range 10 {
		require.NoError(b, portable.Add(ctx, "p00", a.review(i)))
	}
	b.ReportAllocs()
	for b.Loop() {
		p, err := a.repo.Get(ctx, "p00")
		if err != nil || len(p.Reviews) != 10 {
			b.Fatal(p, err)
		}
	}
}

// TestAddAllocationsNearHandWritten holds Add on the native path to at
// most 1.5 times the allocations of the same two driver calls by hand.
func TestAddAllocationsNearHandWritten(t *testing.T) {
	ctx := context.Background()
	a := newAddBench(t)
	measure := func(add func(context.Context, int) error) float64 {
		i := 0
		return testing.AllocsPerRun(40, func() {
			if err := add(ctx, i); err != nil {
				t.Fatal(err)
			}
			i++
		})
	}
	hand, repo := measure(a.byHand), measure(a.viaRepo)
	t.Logf("allocations per Add: by hand %.0f, repository %.0f, ratio %.2f", hand, repo, repo/hand)
	require.LessOrEqual(t, repo/hand, 1.5)
}
