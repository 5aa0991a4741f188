package subset_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/subset"
)

// TestPageOddItemIDsStoredWithoutTheRepository: Page's godoc
// (subset/page.go:128): "The pages hold what [Repo.All] yields, in its
// order, whatever the BSON types of the ids and sort values"; All's:
// "every other item appears once". Issue 31's method: "a scan of
// documents stored without the repository must then stop with an error
// naming the document, never skip it". ValidateID refuses NaN ids at the
// API, but items loaded without the repository may hold one (MongoDB
// stores a NaN _id). Items tied on their sort value, the first with the
// _id NaN (double or decimal), a MinKey or a symbol: the tie clause
// {score: 5, _id: {$gt: <id>}} matches no number after a NaN (NaN sorts
// before every number; manual, Comparison/Sort Order), and the $type
// list names no symbol. Page continues past a NaN id (as package keyset
// does); after a MinKey or a symbol it stops with ErrInvalid naming the item.
func TestPageOddItemIDsStoredWithoutTheRepository(t *testing.T) {
	ctx := context.Background()
	dnan, _ := bson.ParseDecimal128("NaN")
	odd := map[string]any{"double NaN": math.NaN(), "decimal NaN": dnan, "MinKey": bson.MinKey{}, "symbol": bson.Symbol("s")}
	for name, id := range odd {
		for _, descending := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s descending=%v", name, descending), func(t *testing.T) {
				db := mongotest.DB(t)
				cfg := config(3)
				cfg.Descending = descending
				r := newRepo[bson.M, anyItem](t, db, cfg, portable)
				insertParents(t, db, "p")
				if _, err := db.Collection("items").InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "parent", Value: "p"}, {Key: "score", Value: int32(5)}}); err != nil {
					t.Skipf("not stored: %v", err)
				}
				for _, i := range []int32{1, 2} {
					_, err := db.Collection("items").InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "parent", Value: "p"}, {Key: "score", Value: int32(5)}})
					require.NoError(t, err)
				}
				for _, limit := range []int{1, 2} {
					n := 0
					var yieldErr error
					for _, err := range r.All(ctx, "p", options.Find().SetBatchSize(int32(limit))) {
						if err != nil {
							yieldErr = err
							break
						}
						n++
					}
					if yieldErr == nil {
						require.Equal(t, 3, n, "All: every item once")
					}
					var after = zeroCursor()
					got := 0
					for pages := 0; pages < 10; pages++ {
						items, next, err := r.Page(ctx, "p", after, limit)
						if err != nil {
							require.ErrorIs(t, err, patterns.ErrInvalid, "limit %d", limit)
							require.ErrorContains(t, err, "item "+bsonid.Text(id), "limit %d: the error names the odd item", limit)
							got = -1
							break
						}
						got += len(items)
						if next.IsZero() {
							break
						}
						after = next
					}
					if got >= 0 {
						require.Equal(t, 3, got, "limit %d: Page yields every item (or stops with an error naming one)", limit)
					}
				}
			})
		}
	}
}

func zeroCursor() (c subset.Cursor) { return c }
