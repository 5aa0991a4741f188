package extref_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/extref"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// These tests back what the godoc says a concurrent reader sees between
// the steps of an operation: a reader on another client reads the stored
// state just before each of the operation's commands (mongotest.OnCommand).
// They use the fixture of the fault tests (faults_test.go).

// TestSyncReadersSeeOneDocumentAtATime backs Sync's "concurrent readers
// see the copies change one document at a time, and each target after the
// previous one": before each update Sync sends, a reader counts the
// documents still holding stale copies in each target. On the portable
// path one cart changes per command; with arrayFilters the carts change
// in one updateMany; the featured copy changes only after every cart.
func TestSyncReadersSeeOneDocumentAtATime(t *testing.T) {
	mongotest.RunPlans(t, extref.PlanFor, func(t *testing.T, p extref.Plan) {
		db := mongotest.DB(t)
		s := prepareScene(t, db, faultScene{targets: []extref.Target{cartsTarget, featuredTarget}, carts: []int32{1, 2, 3, 4, 5}, featured: []int32{1, 2, 3, 4, 5}, renamed: []int32{1}}, p)
		reader := mongotest.NewClient(t).Database(db.Name())
		src := s.before["products"][1]
		var seen [][2]int64 // stale carts, stale featured, before each update
		mongotest.OnCommand(t, db, "update", func(context.Context) {
			w := readWorld(t, reader)
			seen = append(seen, [2]int64{staleDocs(w, cartsTarget, 1, src), staleDocs(w, featuredTarget, 1, src)})
		})
		r, err := s.ref(db)
		require.NoError(t, err)
		_, err = r.Sync(ctx, 1)
		require.NoError(t, err)

		want := [][2]int64{{3, 1}, {2, 1}, {1, 1}, {0, 1}} // one cart per command, then featured
		if has(p, patterns.FeatureArrayFilters) {
			want = [][2]int64{{3, 1}, {0, 1}} // the carts' updateMany, then featured's
		}
		require.Equal(t, want, seen)
		checkState(t, s, readWorld(t, db), s.before["products"], 1)
	})
}

// TestUpdateReadersSeeTheGap backs Update's "between the two steps readers
// see the new source with the old copies" (without transactions) and
// "readers see the source and its copies change together" (in a
// transaction): a reader reads the source and the copies just before
// Update writes the copies.
func TestUpdateReadersSeeTheGap(t *testing.T) {
	mongotest.RunPlans(t, extref.PlanFor, func(t *testing.T, p extref.Plan) {
		db := mongotest.DB(t)
		s := prepareScene(t, db, faultScene{targets: []extref.Target{featuredTarget}, featured: []int32{1, 2, 3, 4}}, p)
		reader := mongotest.NewClient(t).Database(db.Name())
		var seen []world
		mongotest.OnCommand(t, db, "update", func(context.Context) { seen = append(seen, readWorld(t, reader)) })
		r, err := s.ref(db)
		require.NoError(t, err)
		_, err = r.Update(ctx, 1, setName("Renamed"))
		require.NoError(t, err)

		require.Len(t, seen, 1, "one update: the featured copies")
		products := maps.Clone(s.before["products"])
		products[1] = withName(t, products[1], "Renamed")
		if has(p, patterns.FeatureTransactions) {
			require.True(t, sameWorld(s.before, seen[0]), "in a transaction, nothing is visible before the commit")
		} else {
			gap := s.before.clone()
			gap["products"] = products
			require.True(t, sameWorld(gap, seen[0]), "the new source with the old copies")
		}
		checkState(t, s, readWorld(t, db), products, 1)
	})
}

// TestVerifyReadsNoSnapshot backs Verify's "it reads no snapshot: a copy
// synced while Verify runs may be counted before or after the change":
// another process syncs the stale source between Verify's two pages of
// carts; the first page's stale copies are counted, the second's are not,
// and every copy is counted once.
func TestVerifyReadsNoSnapshot(t *testing.T) {
	db := mongotest.DB(t)
	s := prepareScene(t, db, faultScene{targets: []extref.Target{cartsTarget}, carts: []int32{1, 2, 3, 5}, renamed: []int32{1}, batch: 2}, portable())
	other, err := s.ref(mongotest.NewClient(t).Database(db.Name()))
	require.NoError(t, err)
	finds := 0
	mongotest.OnCommand(t, db, "find", func(ctx context.Context) {
		if finds++; finds == 3 { // the second page, after the first page's sources
			_, err := other.Sync(ctx, 1)
			require.NoError(t, err)
		}
	})
	r, err := s.ref(db)
	require.NoError(t, err)
	reports, err := r.Verify(ctx)
	require.NoError(t, err)
	require.GreaterOrEqual(t, finds, 3)
	// Carts 1 and 2 (one and two stale copies of product 1) come in the
	// first page, read before the sync: counted stale. Cart 5's copy comes
	// in the second, read after it: counted fresh.
	require.Equal(t, []extref.Report{{Target: cartsTarget, Documents: 4, Copies: 8, Stale: 3,
		StaleCopies: []extref.CopyID{named(1, 1), named(2, 1), named(2, 1)}}}, reports)
	require.Equal(t, []int64{0}, verifyStale(t, r), "a Verify after the sync finds nothing stale")
}

// TestScansCountEachDocumentOnce: while Verify and Repair read the carts
// page by page, writers on another client keep rewriting them (a growing
// field, and the syncs of renamed products). Every cart and every copy is
// counted once: on FerretDB 2.x a cursor returns rewritten documents again
// (Verify counted 6 carts of 4, Repair 516 of 500), pages on _id do not.
func TestScansCountEachDocumentOnce(t *testing.T) {
	db, _ := withCarts(t, 10, mongotest.Scale(500, 120))
	carts := snapshot(t, db.Collection("carts"))
	copies := int64(0)
	for _, c := range carts {
		vals, err := c.Lookup("items").Array().Values()
		require.NoError(t, err)
		copies += int64(len(vals))
	}
	cfg := extref.Config{Source: "products", Targets: []extref.Target{cartsTarget}, BatchSize: 20}
	r, err := extref.New[ProductRef](db, cfg)
	require.NoError(t, err)
	otherDB := mongotest.NewClient(t).Database(db.Name())
	other, err := extref.New[ProductRef](otherDB, cfg)
	require.NoError(t, err)

	for _, repair := range []bool{false, true} {
		wctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() { // grow carts, so that they move on the server
			for i := 0; wctx.Err() == nil; i++ {
				_, err := otherDB.Collection("carts").UpdateByID(wctx, i%len(carts)+1, bson.D{{Key: "$set", Value: bson.D{{Key: "pad", Value: strings.Repeat("x", 64*(i%50))}}}})
				if wctx.Err() == nil {
					assert.NoError(t, err)
				}
			}
		})
		wg.Go(func() { // rename products and sync their copies
			for i := 0; wctx.Err() == nil; i++ {
				_, err := other.Update(wctx, i%10+1, setName(fmt.Sprintf("Name %d", i)))
				if wctx.Err() == nil && !errors.Is(err, patterns.ErrConflict) {
					assert.NoError(t, err)
				}
			}
		})
		scan := r.Verify
		if repair {
			scan = r.Repair
		}
		reports, err := scan(ctx)
		stop()
		wg.Wait()
		require.NoError(t, err)
		require.Equal(t, int64(len(carts)), reports[0].Documents, "repair %v: each cart once", repair)
		require.Equal(t, copies, reports[0].Copies, "repair %v: each copy once", repair)
	}
}
