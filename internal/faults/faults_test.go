package faults_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/faults"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/internal/srverr"
)

func TestMain(m *testing.M) { mongotest.Main(m) }

func TestFaultsCoverEveryStepPlaceAndKind(t *testing.T) {
	fs := faults.Faults(3)
	require.Len(t, fs, 6)
	kinds := map[faults.Kind]bool{}
	for i, f := range fs {
		require.Equal(t, i/2+1, f.Step)
		require.Equal(t, faults.Place(i%2), f.Place)
		kinds[f.Kind] = true
		if i%2 == 1 {
			require.NotEqual(t, fs[i-1].Kind, f.Kind, "a command meets two kinds")
		}
	}
	require.Len(t, kinds, 3)
}

// TestSampleMeetsEveryKindAndPlace: the faults run under -short are about
// a third, with the first and the last, and meet every kind and place.
func TestSampleMeetsEveryKindAndPlace(t *testing.T) {
	for _, n := range []int{2, 5, 8} {
		fs := faults.Faults(n)
		kinds, places, picked := map[faults.Kind]bool{}, map[faults.Place]bool{}, 0
		for i, f := range fs {
			if faults.Sampled(i, len(fs)) {
				kinds[f.Kind], places[f.Place] = true, true
				picked++
			}
		}
		require.True(t, faults.Sampled(0, len(fs)) && faults.Sampled(len(fs)-1, len(fs)), "the first and the last")
		require.LessOrEqual(t, picked, len(fs)/3+2, "%d commands", n)
		if n >= 5 {
			require.Len(t, kinds, 3, "%d commands: every kind", n)
			require.Len(t, places, 2, "%d commands: both places", n)
		}
	}
}

// TestRunBreaksEveryStep breaks a two-step operation that is safe to
// retry (an upsert, then a guarded update) at each step, and checks that
// every fault struck and the retried operation ends in the same state.
func TestRunBreaksEveryStep(t *testing.T) {
	p := faults.New(t)
	var subtests int
	op := func(ctx context.Context, db *mongo.Database, _ struct{}) error {
		coll := db.Collection("c")
		if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$setOnInsert", Value: bson.D{{Key: "n", Value: 0}}}}, options.UpdateOne().SetUpsert(true)); err != nil {
			return err
		}
		_, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "done", Value: bson.D{{Key: "$ne", Value: true}}}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "done", Value: true}}}, {Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}})
		return err
	}
	faults.Run(t, p, faults.Case[struct{}]{
		Prepare: func(*testing.T, *mongo.Database) struct{} { subtests++; return struct{}{} },
		Op:      op,
		Check: func(t *testing.T, db *mongo.Database, _ struct{}) {
			var docs []bson.M
			cur, err := db.Collection("c").Find(context.Background(), bson.D{})
			require.NoError(t, err)
			require.NoError(t, cur.All(context.Background(), &docs))
			require.Len(t, docs, 1, "stored once")
			require.Equal(t, true, docs[0]["done"])
			require.EqualValues(t, 1, docs[0]["n"], "applied once")
		},
	})
	want := 1 + 4 // the healthy run, then before and inside each of 2 commands
	if testing.Short() {
		want = 1 + 2
	}
	require.Equal(t, want, subtests)
}

// TestRunReuse: with Reuse, every case runs in one database, emptied
// before each Prepare (a document stored with a fixed id by the last case
// is gone) with its indexes kept, and each case still starts from what
// Prepare stores.
func TestRunReuse(t *testing.T) {
	p := faults.New(t)
	ctx := context.Background()
	names := map[string]bool{}
	var prepared int
	faults.Run(t, p, faults.Case[struct{}]{
		Reuse: true,
		Prepare: func(t *testing.T, db *mongo.Database) struct{} {
			coll := db.Collection("c")
			n, err := coll.CountDocuments(ctx, bson.D{})
			require.NoError(t, err)
			require.Zero(t, n, "the database is emptied before Prepare")
			if prepared > 0 {
				specs, err := coll.Indexes().ListSpecifications(ctx)
				require.NoError(t, err)
				require.Len(t, specs, 2, "the index stays: %v", specs)
			}
			_, err = coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "n", Value: 1}}})
			require.NoError(t, err)
			_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 0}})
			require.NoError(t, err)
			names[db.Name()] = true
			prepared++
			return struct{}{}
		},
		Op: func(ctx context.Context, db *mongo.Database, _ struct{}) error {
			_, err := db.Collection("c").UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 0}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}})
			return err
		},
		Check: func(t *testing.T, db *mongo.Database, _ struct{}) {
			var doc struct{ N int }
			require.NoError(t, db.Collection("c").FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&doc))
			require.Equal(t, 1, doc.N, "applied once, on what this case's Prepare stored")
		},
	})
	require.GreaterOrEqual(t, prepared, 3, "the healthy run and the faults")
	require.Len(t, names, 1, "one database for every case")
}

// TestTransientSendsAgain: the transient proxy fails the armed write
// with an error srverr.Transient recognises, once; a write sent again
// after it (srverr.Retry) applies once, and RunTransient fails each write
// in turn.
func TestTransientSendsAgain(t *testing.T) {
	p := faults.NewTransient(t)
	var subtests int
	faults.RunTransient(t, p, faults.Case[struct{}]{
		Prepare: func(*testing.T, *mongo.Database) struct{} { subtests++; return struct{}{} },
		Op: func(ctx context.Context, db *mongo.Database, _ struct{}) error {
			coll := db.Collection("c")
			for i := range 2 {
				var first error
				err := srverr.Retry(ctx, func() error {
					_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}})
					if first == nil && err != nil {
						first = err
					}
					return err
				})
				if first != nil && !srverr.Transient(first) {
					return fmt.Errorf("the forged error is not transient: %w", first)
				}
				if err != nil {
					return err
				}
			}
			return nil
		},
		Check: func(t *testing.T, db *mongo.Database, _ struct{}) {
			n, err := db.Collection("c").CountDocuments(context.Background(), bson.D{})
			require.NoError(t, err)
			require.EqualValues(t, 2, n, "each insert applied once")
		},
	})
	require.Equal(t, 1+2, subtests, "the healthy run, then each of 2 writes failed")
}

// TestBroken: the errors a broken connection gives are told apart from
// the server's answers.
func TestBroken(t *testing.T) {
	require.True(t, faults.Broken(fmt.Errorf("subset: Add: %w", context.DeadlineExceeded)))
	require.True(t, faults.Broken(mongo.CommandError{Code: 43, Name: "CursorNotFound"}), "a cursor dropped with its connection")
	require.False(t, faults.Broken(mongo.CommandError{Code: 11000}), "a duplicate key is the server's answer")
	require.False(t, faults.Broken(errors.New("no documents")))
}

// TestQuiesceAfterADeadline: an updateMany whose caller's deadline passes
// while the server runs it goes on there to its end (the relay removes the
// maxTimeMS the driver derives from the deadline); once quiesce returns,
// it has ended: every document is updated, and nothing changes
// afterwards. The deadline is a third of the time the same update takes
// on a healthy connection, or less until the deadline passes first; a
// deadline that passed before the update reached the server (nothing
// updated after quiesce, nor later: the driver gave up before sending it)
// proves nothing, and the next one is half as long again.
func TestQuiesceAfterADeadline(t *testing.T) {
	ctx := context.Background()
	p := faults.New(t)
	db := mongotest.DB(t)
	const n = 300
	docs := make([]any, n)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "n", Value: 0}}
	}
	coll := db.Collection("c")
	_, err := coll.InsertMany(ctx, docs)
	require.NoError(t, err)
	inc := bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}
	start := time.Now()
	_, err = coll.UpdateMany(ctx, bson.D{}, inc)
	require.NoError(t, err)
	took := time.Since(start)
	updated := func() int64 {
		k, err := coll.CountDocuments(ctx, bson.D{{Key: "n", Value: 1}})
		require.NoError(t, err)
		return k
	}
	reset := func() {
		_, err := coll.UpdateMany(ctx, bson.D{}, bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: 0}}}})
		require.NoError(t, err)
	}
	reset()
	// A third of its time to begin with: a third of that while the update
	// beats its deadline (the server's speed varies), half as long again
	// when the deadline ended it before it reached the server (nothing
	// updated, then or later), until one reaches the server and fails.
	d := took / 3
	for attempt := 0; ; attempt++ {
		require.Less(t, attempt, 40, "no update reached the server and failed its deadline (the last deadline %s; the update took %s)", d, took)
		short, cancel := context.WithTimeout(ctx, d)
		_, err = p.Client().Database(db.Name()).Collection("c").UpdateMany(short, bson.D{}, inc)
		cancel()
		if err == nil {
			reset()
			d /= 3
			continue
		}
		faults.Quiesce(t, p)
		k := updated()
		time.Sleep(max(took/2, 100*time.Millisecond))
		require.EqualValues(t, k, updated(), "the update ran on after quiesce returned (it took %s on a healthy connection)", took)
		if k == n {
			return
		}
		require.Zero(t, k, "the update ended part way through: %d of %d updated", k, n)
		d += d/2 + time.Microsecond
	}
}
