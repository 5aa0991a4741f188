package extref_test

import (
	"context"
	"maps"
	"testing"

	"github.com/stretchr/testify/require"

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
// another process syncs the stale source between Verify's two batches of
// carts; the first batch's stale copies are counted, the second's are not.
func TestVerifyReadsNoSnapshot(t *testing.T) {
	db := mongotest.DB(t)
	s := prepareScene(t, db, faultScene{targets: []extref.Target{cartsTarget}, carts: []int32{1, 2, 3, 5}, renamed: []int32{1}, batch: 2}, portable())
	other, err := s.ref(mongotest.NewClient(t).Database(db.Name()))
	require.NoError(t, err)
	synced := false
	mongotest.OnCommand(t, db, "getMore", func(ctx context.Context) {
		if !synced {
			synced = true
			_, err := other.Sync(ctx, 1)
			require.NoError(t, err)
		}
	})
	r, err := s.ref(db)
	require.NoError(t, err)
	reports, err := r.Verify(ctx)
	require.NoError(t, err)
	require.True(t, synced)
	// Carts 1 and 2 (one and two stale copies of product 1) come in the
	// first batch, read before the sync: counted stale. Cart 5's copy comes
	// in the second, read after it: counted fresh where the server's getMore
	// reads the collection as it is (MongoDB), stale where the cursor's
	// results were read ahead (FerretDB 1.x reads them at the find). Either
	// way every copy is counted once.
	require.Len(t, reports, 1)
	require.Contains(t, []int64{3, 4}, reports[0].Stale)
	reports[0].Stale = 0
	require.Equal(t, extref.Report{Target: cartsTarget, Documents: 4, Copies: 8}, reports[0])
	require.Equal(t, []int64{0}, verifyStale(t, r), "a Verify after the sync finds nothing stale")
}
