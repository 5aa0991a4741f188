package mongopatterns_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/bucket"
	"github.com/mongopatterns/mongopatterns/extref"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/outlier"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/subset"
	"github.com/mongopatterns/mongopatterns/versioning"
)

type sessItem struct {
	ID       string    `bson:"_id"`
	ParentID string    `bson:"parentId,omitempty"`
	At       time.Time `bson:"at"`
}

type sessParent struct {
	ID    string     `bson:"_id"`
	Items []sessItem `bson:"items,omitempty"`
}

type sessRef struct {
	ID   string `bson:"id"`
	Name string `bson:"name"`
}

type sessReading struct {
	At time.Time `bson:"at"`
	V  float64   `bson:"v"`
}

type sessDoc struct {
	ID   string `bson:"_id"`
	Name string `bson:"name"`
}

// firstErr runs an iterator to its first error.
func firstErr[T any](seq iter.Seq2[T, error]) error {
	for _, err := range seq {
		if err != nil {
			return err
		}
	}
	return nil
}

// operations returns every operation of the five pattern repositories
// that sends commands, each as a call on ctx with valid arguments.
func operations(t *testing.T, db *mongo.Database) map[string]func(ctx context.Context) error {
	t.Helper()
	sub, err := subset.New[sessParent, sessItem](db, subset.Config{
		Parents: "parents", Field: "items", Items: "items", ParentField: "parentId", SortField: "at", Cap: 2,
	})
	require.NoError(t, err)
	ref, err := extref.New[sessRef](db, extref.Config{
		Source: "customers", Targets: []extref.Target{{Collection: "orders", Path: "customer"}},
	})
	require.NoError(t, err)
	out, err := outlier.New[sessParent, sessItem](db, outlier.Config{Parents: "posts", Field: "items", Cap: 2, OverflowCap: 2})
	require.NoError(t, err)
	cfg := bucket.Config{Collection: "readings", TimeField: "at", ValueFields: []string{"v"}, Window: time.Hour, Cap: 10}
	bk, err := bucket.New[string, sessReading](db, cfg)
	require.NoError(t, err)
	cfg.Collection = "series"
	ts, err := bucket.NewTimeSeries[string, sessReading](db, cfg)
	require.NoError(t, err)
	ver, err := versioning.New[sessDoc](db, versioning.Config{Collection: "docs", Current: 1})
	require.NoError(t, err)

	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	item := sessItem{ID: "i1", At: now}
	reading := sessReading{At: now, V: 1}
	points := []bucket.Point[string, sessReading]{{Meta: "s1", Value: reading}}
	set := bson.D{{Key: "$set", Value: bson.D{{Key: "name", Value: "x"}}}}
	ops := map[string]func(ctx context.Context) error{
		"subset.Add":        func(ctx context.Context) error { return sub.Add(ctx, "p1", item) },
		"subset.Update":     func(ctx context.Context) error { return sub.Update(ctx, "p1", item) },
		"subset.Remove":     func(ctx context.Context) error { return sub.Remove(ctx, "p1", "i1") },
		"subset.Rebuild":    func(ctx context.Context) error { return sub.Rebuild(ctx, "p1") },
		"subset.RebuildAll": func(ctx context.Context) error { _, err := sub.RebuildAll(ctx, nil); return err },
		"subset.Count":      func(ctx context.Context) error { _, err := sub.Count(ctx, "p1"); return err },
		"subset.Item":       func(ctx context.Context) error { _, err := sub.Item(ctx, "p1", "i1"); return err },
		"subset.All":        func(ctx context.Context) error { return firstErr(sub.All(ctx, "p1")) },
		"subset.Page":       func(ctx context.Context) error { _, _, err := sub.Page(ctx, "p1", subset.Cursor{}, 2); return err },
		"subset.Get":        func(ctx context.Context) error { _, err := sub.Get(ctx, "p1"); return err },
		"subset.Delete":     func(ctx context.Context) error { return sub.Delete(ctx, "p1") },

		"extref.Of":     func(ctx context.Context) error { _, err := ref.Of(ctx, "c1"); return err },
		"extref.OfMany": func(ctx context.Context) error { _, err := ref.OfMany(ctx, []any{"c1"}); return err },
		"extref.Sync":   func(ctx context.Context) error { _, err := ref.Sync(ctx, "c1"); return err },
		"extref.Update": func(ctx context.Context) error { _, err := ref.Update(ctx, "c1", set); return err },
		"extref.Verify": func(ctx context.Context) error { _, err := ref.Verify(ctx); return err },
		"extref.Repair": func(ctx context.Context) error { _, err := ref.Repair(ctx); return err },

		"outlier.Insert": func(ctx context.Context) error { _, err := out.Insert(ctx, sessParent{ID: "p1"}); return err },
		"outlier.Append": func(ctx context.Context) error { return out.Append(ctx, "p1", item) },
		"outlier.Get":    func(ctx context.Context) error { _, _, err := out.Get(ctx, "p1"); return err },
		"outlier.Items":  func(ctx context.Context) error { return firstErr(out.Items(ctx, "p1")) },
		"outlier.Page":   func(ctx context.Context) error { _, _, err := out.Page(ctx, "p1", outlier.Cursor{}, 2); return err },
		"outlier.Count":  func(ctx context.Context) error { _, err := out.Count(ctx, "p1"); return err },
		"outlier.Update": func(ctx context.Context) error { return out.Update(ctx, "p1", item) },
		"outlier.Remove": func(ctx context.Context) error { return out.Remove(ctx, "p1", "i1") },
		"outlier.Delete": func(ctx context.Context) error { return out.Delete(ctx, "p1") },

		"versioning.Get":     func(ctx context.Context) error { _, err := ver.Get(ctx, "d1"); return err },
		"versioning.Find":    func(ctx context.Context) error { return firstErr(ver.Find(ctx, bson.D{})) },
		"versioning.Insert":  func(ctx context.Context) error { _, err := ver.Insert(ctx, sessDoc{ID: "d1"}); return err },
		"versioning.Replace": func(ctx context.Context) error { return ver.Replace(ctx, "d1", sessDoc{ID: "d1"}) },
		"versioning.Update":  func(ctx context.Context) error { return ver.Update(ctx, "d1", set) },
		"versioning.Delete":  func(ctx context.Context) error { return ver.Delete(ctx, "d1") },
		"versioning.MigrateAll": func(ctx context.Context) error {
			_, err := ver.MigrateAll(ctx, versioning.MigrateOptions{})
			return err
		},
		"versioning.Stats": func(ctx context.Context) error { _, err := ver.Stats(ctx); return err },
	}
	for name, s := range map[string]bucket.Store[string, sessReading]{"bucket.Buckets": bk, "bucket.TimeSeries": ts} {
		ops[name+".Add"] = func(ctx context.Context) error { return s.Add(ctx, "s1", reading) }
		ops[name+".AddMany"] = func(ctx context.Context) error { return s.AddMany(ctx, points) }
		ops[name+".Range"] = func(ctx context.Context) error { return firstErr(s.Range(ctx, "s1", now, now.Add(time.Hour))) }
		ops[name+".Summaries"] = func(ctx context.Context) error {
			return firstErr(s.Summaries(ctx, "s1", now, now.Add(time.Hour), time.Hour))
		}
		ops[name+".SummariesBySeries"] = func(ctx context.Context) error {
			return firstErr(s.SummariesBySeries(ctx, now, now.Add(time.Hour)))
		}
		ops[name+".Latest"] = func(ctx context.Context) error { _, err := s.Latest(ctx, "s1"); return err }
		ops[name+".DeleteBefore"] = func(ctx context.Context) error { return s.DeleteBefore(ctx, now) }
		ops[name+".DeleteSeriesBefore"] = func(ctx context.Context) error { return s.DeleteSeriesBefore(ctx, "s1", now) }
	}
	return ops
}

// Every operation of the pattern repositories refuses a context that
// carries a transaction, with an error wrapping patterns.ErrInvalid and
// before it sends anything: each is its own atomic step, or steps with
// retries of their own, which a transaction would bundle into one unit
// that a write conflict aborts. (Starting a transaction sends nothing:
// the driver starts it with the first command, so this holds on every
// server.)
func TestOperationsRefuseATransactionInTheContext(t *testing.T) {
	db := mongotest.DB(t)
	ops := operations(t, db)
	sess, err := db.Client().StartSession()
	require.NoError(t, err)
	defer sess.EndSession(context.Background())
	require.NoError(t, sess.StartTransaction())
	defer func() { _ = sess.AbortTransaction(context.Background()) }()
	ctx := mongo.NewSessionContext(context.Background(), sess)
	counter := mongotest.NewCounter(t, db)
	var wrong []string
	for _, name := range slices.Sorted(maps.Keys(ops)) {
		var err error
		sent := counter.Count(func() { err = ops[name](ctx) })
		if !errors.Is(err, patterns.ErrInvalid) || !strings.Contains(err.Error(), "the context carries a transaction") || len(sent) > 0 {
			wrong = append(wrong, fmt.Sprintf("%s: %v, sent %v", name, err, sent))
		}
	}
	require.Empty(t, wrong, "each refuses the transaction, sending nothing")
}

// A session without a transaction is joined: every command an operation
// sends carries the session's id, and none a transaction number.
func TestOperationsJoinASessionWithoutATransaction(t *testing.T) {
	db := mongotest.DB(t)
	ops := operations(t, db)
	sess, err := db.Client().StartSession()
	require.NoError(t, err)
	defer sess.EndSession(context.Background())
	ctx := mongo.NewSessionContext(context.Background(), sess)
	want := sess.ID().Lookup("id")
	counter := mongotest.NewCounter(t, db)
	for name, op := range ops {
		counter.Reset()
		if err := op(ctx); err != nil && !errors.Is(err, patterns.ErrNotFound) && !errors.Is(err, patterns.ErrUnsupported) {
			// What an operation answers here (a missing parent, a
			// feature the server lacks) is its own tests' business.
			mongotest.Detail(t, "%s: %v", name, err)
		}
		for _, cmd := range counter.Sent() {
			lsid, err := cmd.LookupErr("lsid", "id")
			require.NoError(t, err, "%s: %s carries the session", name, cmd)
			require.True(t, want.Equal(lsid), "%s: %s carries the caller's session", name, cmd)
			_, err = cmd.LookupErr("txnNumber")
			if cmd.Index(0).Key() != "update" && cmd.Index(0).Key() != "insert" && cmd.Index(0).Key() != "delete" && cmd.Index(0).Key() != "findAndModify" {
				require.Error(t, err, "%s: %s: a read has no transaction number", name, cmd)
			}
			_, err = cmd.LookupErr("autocommit")
			require.Error(t, err, "%s: %s is in no transaction", name, cmd)
		}
	}
}

// versioning's and extref's Update find their document by _id: under a
// collation that ignores case, {_id: "ann"} would also match "ANN". Both
// refuse a collation other than the simple one, send nothing, and leave
// "ANN" as it was.
func TestUpdatesByIDRefuseACollation(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	ver, err := versioning.New[sessDoc](db, versioning.Config{Collection: "docs", Current: 1})
	require.NoError(t, err)
	ref, err := extref.New[sessRef](db, extref.Config{
		Source: "customers", Targets: []extref.Target{{Collection: "orders", Path: "customer"}},
	})
	require.NoError(t, err)
	_, err = ver.Insert(ctx, sessDoc{ID: "ANN", Name: "a"})
	require.NoError(t, err)
	_, err = db.Collection("customers").InsertOne(ctx, bson.D{{Key: "_id", Value: "ANN"}, {Key: "name", Value: "a"}})
	require.NoError(t, err)
	caseless := &options.Collation{Locale: "en", Strength: 2}
	set := bson.D{{Key: "$set", Value: bson.D{{Key: "name", Value: "b"}}}}
	counter := mongotest.NewCounter(t, db)
	sent := counter.Count(func() {
		err := ver.Update(ctx, "ann", set, options.UpdateOne().SetCollation(caseless))
		require.ErrorIs(t, err, patterns.ErrInvalid)
		_, err = ref.Update(ctx, "ann", set, options.FindOneAndUpdate().SetCollation(caseless))
		require.ErrorIs(t, err, patterns.ErrInvalid)
	})
	require.Empty(t, sent)
	got, err := ver.Get(ctx, "ANN")
	require.NoError(t, err)
	require.Equal(t, "a", got.Name)
	name, err := db.Collection("customers").FindOne(ctx, bson.D{{Key: "_id", Value: "ANN"}}).Raw()
	require.NoError(t, err)
	require.Equal(t, "a", name.Lookup("name").StringValue())
}
