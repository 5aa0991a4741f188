package versioning_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/versioning"
)

// whileScanning runs write(i) for i = 0, 1, 2, ... in a goroutine until
// scan returns, and returns how many writes it made.
func whileScanning(t *testing.T, write func(i int) error, scan func()) int {
	t.Helper()
	var (
		stop  atomic.Bool
		wg    sync.WaitGroup
		wrote int
		werr  error
	)
	wg.Go(func() {
		for i := 0; !stop.Load(); i++ {
			if werr = write(i); werr != nil {
				return
			}
			wrote++
		}
	})
	scan()
	stop.Store(true)
	wg.Wait()
	require.NoError(t, werr)
	return wrote
}

// TestFindYieldsEachDocumentOnce: Find over old documents, which it
// writes back as it reads them, while another writer rewrites them (a
// new revision, as a Repo sets), yields each document once, in _id order.
// One cursor over the collection returned 362 results for 300 documents
// on FerretDB 2.x, whose cursors return rewritten documents again.
func TestFindYieldsEachDocumentOnce(t *testing.T) {
	t.Parallel() // beside TestFaults, which waits on its stalls
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, p versioning.Plan) {
		ctx := context.Background()
		db, coll := usersDB(t)
		n := mongotest.Scale(2000, 300)
		docs := make([]any, n)
		for i := range docs {
			docs[i] = v1(fmt.Sprintf("u%04d", i), "Ada Lovelace", "ada@example.com")
		}
		seed(t, coll, docs...)
		r := newUsers(t, db, p)
		var ids []string
		wrote := whileScanning(t, func(i int) error {
			_, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: fmt.Sprintf("u%04d", (i*7919)%n)}},
				bson.D{{Key: "$inc", Value: bson.D{{Key: "visits", Value: 1}}}, {Key: "$set", Value: bson.D{{Key: "_rev", Value: bson.NewObjectID()}}}})
			return err
		}, func() {
			for u, err := range r.Find(ctx, nil, options.Find().SetBatchSize(10)) {
				require.NoError(t, err)
				ids = append(ids, u.ID)
			}
		})
		seen := map[string]bool{}
		for _, id := range ids {
			seen[id] = true
		}
		require.Len(t, ids, n, "%d results for %d documents, %d of them distinct (%d writes meanwhile)", len(ids), n, len(seen), wrote)
		require.Len(t, seen, n)
		require.True(t, slices.IsSorted(ids), "in _id order")
	})
}

// TestFindPagesPastEveryIDType: _ids of different BSON types, which the
// range operators never compare with each other, are all reached, in the
// server's sort order, however the pages fall.
func TestFindPagesPastEveryIDType(t *testing.T) {
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, p versioning.Plan) {
		ctx := context.Background()
		db, coll := usersDB(t)
		oid := bson.NewObjectID()
		ids := []any{int32(1), int64(2), 2.5, "a", "b", bson.D{{Key: "k", Value: 1}}, bson.Binary{Data: []byte{1}}, oid, false, true,
			bson.DateTime(0), bson.Timestamp{T: 1, I: 1}}
		for _, id := range ids {
			seed(t, coll, bson.D{{Key: "_id", Value: id}, {Key: "schemaVersion", Value: 3}, {Key: "first", Value: "x"}})
		}
		type anyID struct {
			ID    bson.RawValue `bson:"_id"`
			First string        `bson:"first"`
		}
		r := newRepo[anyID](t, db, p, usersConfig())
		for _, size := range []int32{1, 2, 5, 100} {
			var got []string
			for d, err := range r.Find(ctx, nil, options.Find().SetBatchSize(size)) {
				require.NoError(t, err)
				got = append(got, d.ID.String())
			}
			var want []string
			for _, id := range ids {
				typ, data, err := bson.MarshalValue(id)
				require.NoError(t, err)
				want = append(want, bson.RawValue{Type: typ, Value: data}.String())
			}
			require.Equal(t, want, got, "pages of %d", size)
		}
	})
}

// TestFindRefusesOptionsThatBreakItsOrder: a sort other than {_id: 1} and
// Skip are refused before anything is sent; {_id: 1} and Limit work.
func TestFindRefusesOptionsThatBreakItsOrder(t *testing.T) {
	ctx := context.Background()
	db, coll := usersDB(t)
	seedNumbered(t, coll, 5)
	r := newUsers(t, db, serverPlan(), func(c *versioning.Config) { c.NoWriteBack = true })
	c := mongotest.NewCounter(t, db)
	for _, o := range []*options.FindOptionsBuilder{
		options.Find().SetSort(bson.D{{Key: "first", Value: 1}}),
		options.Find().SetSort(bson.D{{Key: "_id", Value: -1}}),
		options.Find().SetSkip(2),
	} {
		for _, err := range r.Find(ctx, nil, o) {
			require.ErrorIs(t, err, patterns.ErrInvalid)
		}
	}
	require.Empty(t, c.Commands(), "nothing is sent")
	var ids []string
	for u, err := range r.Find(ctx, nil, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(3).SetBatchSize(2)) {
		require.NoError(t, err)
		ids = append(ids, u.ID)
	}
	require.Equal(t, []string{"u00", "u01", "u02"}, ids)
	require.Equal(t, []string{"find", "find"}, c.Commands(), "a page of 2, then one of the 1 left")
}

// TestMigrateAllCountsEachDocumentOnce: MigrateAll over old documents
// while the previous release keeps updating them (it keeps the version
// and sets a new revision) counts each document once, as migrated or
// skipped, and loses no update: a second run migrates the skipped ones.
// One cursor returned Migrated 500 and Skipped 20 for 500 documents on
// FerretDB 2.x.
func TestMigrateAllCountsEachDocumentOnce(t *testing.T) {
	t.Parallel() // beside TestFaults, which waits on its stalls
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, p versioning.Plan) {
		ctx := context.Background()
		db, coll := usersDB(t)
		n := mongotest.Scale(1000, 200)
		seedOld(t, coll, n)
		require.NoError(t, patterns.EnsureIndexes(ctx, newUsers(t, db, p).Indexes()...))
		old := oldRelease(t, db, p)
		r := newUsers(t, db, p)
		var res versioning.MigrateResult
		var landed atomic.Int64
		wrote := whileScanning(t, func(i int) error {
			err := old.Update(ctx, fmt.Sprintf("u%04d", (i*7919)%n), incVisits)
			switch {
			case err == nil:
				landed.Add(1)
			case errors.Is(err, versioning.ErrNewerSchema): // migrated already
			default:
				return err
			}
			return nil
		}, func() {
			var err error
			res, err = r.MigrateAll(ctx, versioning.MigrateOptions{BatchSize: 10})
			require.NoError(t, err)
		})
		require.Empty(t, res.Failed)
		require.Equal(t, n, res.Migrated+res.Skipped, "each document counted once (%+v, %d writes meanwhile)", res, wrote)
		second, err := r.MigrateAll(ctx, versioning.MigrateOptions{})
		require.NoError(t, err)
		require.Equal(t, versioning.MigrateResult{Migrated: res.Skipped}, second, "the second run migrates what the first skipped")
		visits := 0
		for u, err := range r.Find(ctx, nil) {
			require.NoError(t, err)
			visits += u.Visits
		}
		require.EqualValues(t, landed.Load(), visits, "no update of the previous release is lost")
	})
}

// seedOld stores n v1 documents u0000, u0001, ... with distinct names.
func seedOld(t testing.TB, coll *mongo.Collection, n int) {
	t.Helper()
	docs := make([]any, n)
	for i := range docs {
		docs[i] = v1(fmt.Sprintf("u%04d", i), fmt.Sprintf("User%04d Last", i), "u@example.com")
	}
	seed(t, coll, docs...)
}

// TestFindSkipsADocumentDeletedDuringItsWriteBack: Find reads three old
// documents; as it writes the second back, another client deletes it, so
// the write-back misses and the re-read finds nothing. Find skips it, as
// it would a document deleted before its page was read, and yields the
// others; it used to yield ErrNotFound for it (issue 34).
func TestFindSkipsADocumentDeletedDuringItsWriteBack(t *testing.T) {
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, p versioning.Plan) {
		ctx := context.Background()
		db, coll := usersDB(t)
		seed(t, coll, v1("u1", "Ada Lovelace", "ada@example.com"), v1("u2", "Alan Turing", "alan@example.com"), v1("u3", "Grace Hopper", "grace@example.com"))
		r := newUsers(t, db, p)
		other := mongotest.NewClient(t).Database(db.Name()).Collection(coll.Name())
		updates := 0
		mongotest.OnCommand(t, db, "update", func(ctx context.Context) {
			if updates++; updates == 2 {
				_, err := other.DeleteOne(ctx, bson.D{{Key: "_id", Value: "u2"}})
				require.NoError(t, err)
			}
		})

		var ids []string
		for u, err := range r.Find(ctx, nil) {
			require.NoError(t, err)
			ids = append(ids, u.ID)
		}
		require.Equal(t, []string{"u1", "u3"}, ids)
		require.Equal(t, 3, updates, "three write-backs sent")
	})
}
