package patterns_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

func TestMain(m *testing.M) { mongotest.Main(m) }

// probes try each feature on the server and report whether it really did
// what MongoDB does: no error is not enough (FerretDB accepts $slice and
// ignores it), so each probe checks the result.
var probes = map[patterns.Feature]func(ctx context.Context, t *testing.T, db *mongo.Database) bool{
	patterns.FeatureTransactions: func(ctx context.Context, t *testing.T, db *mongo.Database) bool {
		// Isolation and atomicity, not just the absence of an error:
		// FerretDB 2.x refuses startTransaction yet applies the writes
		// made "inside" at once, and keeps them after an abort.
		coll := db.Collection("tx")
		require.NoError(t, db.CreateCollection(ctx, "tx"))
		count := func() int64 {
			n, err := coll.CountDocuments(ctx, bson.D{})
			require.NoError(t, err)
			return n
		}
		sess, err := db.Client().StartSession()
		require.NoError(t, err)
		defer sess.EndSession(ctx)
		if err := sess.StartTransaction(); err != nil {
			t.Logf("start transaction: %v", err)
			return false
		}
		_, err = coll.InsertOne(mongo.NewSessionContext(ctx, sess), bson.D{{Key: "_id", Value: 1}})
		seen := count()
		abortErr := sess.AbortTransaction(ctx)
		t.Logf("insert in a transaction: %v; seen outside before commit: %d; abort: %v; kept after abort: %d", err, seen, abortErr, count())
		if err != nil || abortErr != nil || seen != 0 || count() != 0 {
			return false
		}
		_, err = sess.WithTransaction(ctx, func(ctx context.Context) (any, error) {
			return coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}})
		})
		t.Logf("committed transaction: %v", err)
		return err == nil && count() == 1
	},
	patterns.FeaturePushModifiers: func(ctx context.Context, t *testing.T, db *mongo.Database) bool {
		coll := db.Collection("push")
		_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: bson.A{}}})
		require.NoError(t, err)
		_, err = coll.UpdateByID(ctx, 1, bson.D{{Key: "$push", Value: bson.D{{Key: "a", Value: bson.D{
			{Key: "$each", Value: bson.A{3, 1, 2}}, {Key: "$sort", Value: 1}, {Key: "$slice", Value: 2},
		}}}}})
		if err != nil {
			t.Logf("$push modifiers: %v", err)
			return false
		}
		var doc struct{ A []int }
		require.NoError(t, coll.FindOne(ctx, bson.D{}).Decode(&doc))
		t.Logf("$push $each [3 1 2] $sort 1 $slice 2 gave %v", doc.A)
		return len(doc.A) == 2 && doc.A[0] == 1 && doc.A[1] == 2
	},
	patterns.FeatureArrayFilters: func(ctx context.Context, t *testing.T, db *mongo.Database) bool {
		coll := db.Collection("af")
		_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: bson.A{
			bson.D{{Key: "k", Value: 1}, {Key: "v", Value: 0}}, bson.D{{Key: "k", Value: 2}, {Key: "v", Value: 0}},
		}}})
		require.NoError(t, err)
		_, err = coll.UpdateByID(ctx, 1, bson.D{{Key: "$set", Value: bson.D{{Key: "a.$[e].v", Value: 5}}}},
			options.UpdateOne().SetArrayFilters([]any{bson.D{{Key: "e.k", Value: 2}}}))
		if err != nil {
			t.Logf("arrayFilters: %v", err)
			return false
		}
		var doc struct{ A []struct{ K, V int } }
		require.NoError(t, coll.FindOne(ctx, bson.D{}).Decode(&doc))
		return len(doc.A) == 2 && doc.A[0].V == 0 && doc.A[1].V == 5
	},
	patterns.FeatureTTLIndexes: func(ctx context.Context, t *testing.T, db *mongo.Database) bool {
		return indexOptionSticks(ctx, t, db.Collection("ttl"), options.Index().SetExpireAfterSeconds(3600), "expireAfterSeconds")
	},
	patterns.FeaturePartialIndexes: func(ctx context.Context, t *testing.T, db *mongo.Database) bool {
		return indexOptionSticks(ctx, t, db.Collection("partial"),
			options.Index().SetPartialFilterExpression(bson.D{{Key: "a", Value: bson.D{{Key: "$exists", Value: true}}}}),
			"partialFilterExpression")
	},
	patterns.FeatureJSONSchema: func(ctx context.Context, t *testing.T, db *mongo.Database) bool {
		err := db.CreateCollection(ctx, "schema", options.CreateCollection().SetValidator(bson.D{{Key: "$jsonSchema", Value: bson.D{
			{Key: "required", Value: bson.A{"a"}},
		}}}))
		if err != nil {
			t.Logf("$jsonSchema validator: %v", err)
			return false
		}
		_, err = db.Collection("schema").InsertOne(ctx, bson.D{{Key: "b", Value: 1}})
		t.Logf("insert violating the schema: %v", err)
		return err != nil
	},
	patterns.FeatureValidators: func(ctx context.Context, t *testing.T, db *mongo.Database) bool {
		// Enforced and read back, not just accepted: FerretDB 2.x accepts a
		// validator at create and ignores it, so the probe sets it by
		// collMod, the way the validation package does.
		require.NoError(t, db.CreateCollection(ctx, "validated"))
		validator := bson.D{{Key: "$and", Value: bson.A{
			bson.D{{Key: "$jsonSchema", Value: bson.D{{Key: "properties", Value: bson.D{{Key: "a", Value: bson.D{
				{Key: "bsonType", Value: "int"}, {Key: "minimum", Value: 0},
			}}}}}}},
			bson.D{{Key: "$nor", Value: bson.A{bson.D{{Key: "a", Value: bson.D{{Key: "$exists", Value: false}}}}}}},
		}}}
		err := db.RunCommand(ctx, bson.D{{Key: "collMod", Value: "validated"}, {Key: "validator", Value: validator}}).Err()
		if err != nil {
			t.Logf("collMod validator: %v", err)
			return false
		}
		coll := db.Collection("validated")
		_, missing := coll.InsertOne(ctx, bson.D{{Key: "b", Value: 1}})
		_, negative := coll.InsertOne(ctx, bson.D{{Key: "a", Value: -1}})
		_, valid := coll.InsertOne(ctx, bson.D{{Key: "a", Value: 1}})
		t.Logf("insert without a: %v; a below minimum: %v; valid: %v", missing, negative, valid)
		specs, err := db.ListCollectionSpecifications(ctx, bson.D{{Key: "name", Value: "validated"}})
		require.NoError(t, err)
		return missing != nil && negative != nil && valid == nil && len(specs) == 1 &&
			specs[0].Options.Lookup("validator").Type == bson.TypeEmbeddedDocument
	},
	patterns.FeatureTimeSeries: func(ctx context.Context, t *testing.T, db *mongo.Database) bool {
		err := db.CreateCollection(ctx, "ts", options.CreateCollection().SetTimeSeriesOptions(options.TimeSeries().SetTimeField("t")))
		if err != nil {
			t.Logf("time-series collection: %v", err)
			return false
		}
		specs, err := db.ListCollectionSpecifications(ctx, bson.D{{Key: "name", Value: "ts"}})
		require.NoError(t, err)
		return len(specs) == 1 && specs[0].Type == "timeseries"
	},
	patterns.FeatureChangeStreams: func(ctx context.Context, t *testing.T, db *mongo.Database) bool {
		coll := db.Collection("cs")
		require.NoError(t, db.CreateCollection(ctx, "cs"))
		stream, err := coll.Watch(ctx, mongo.Pipeline{})
		if err != nil {
			t.Logf("change stream: %v", err)
			return false
		}
		defer stream.Close(ctx)
		_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}})
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		return stream.Next(ctx) && stream.Current.Lookup("operationType").StringValue() == "insert"
	},
	patterns.FeatureLookup: func(ctx context.Context, t *testing.T, db *mongo.Database) bool {
		_, err := db.Collection("l").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "r", Value: 7}})
		require.NoError(t, err)
		_, err = db.Collection("r").InsertOne(ctx, bson.D{{Key: "_id", Value: 7}, {Key: "name", Value: "seven"}})
		require.NoError(t, err)
		var out []struct{ J []bson.M }
		if !aggregate(ctx, t, db.Collection("l"), mongo.Pipeline{{{Key: "$lookup", Value: bson.D{
			{Key: "from", Value: "r"}, {Key: "localField", Value: "r"}, {Key: "foreignField", Value: "_id"}, {Key: "as", Value: "j"},
		}}}}, &out) {
			return false
		}
		return len(out) == 1 && len(out[0].J) == 1 && out[0].J[0]["name"] == "seven"
	},
	patterns.FeatureGroupMinMaxAvg: func(ctx context.Context, t *testing.T, db *mongo.Database) bool {
		coll := db.Collection("g")
		_, err := coll.InsertMany(ctx, []any{bson.D{{Key: "v", Value: 1}}, bson.D{{Key: "v", Value: 2}}, bson.D{{Key: "v", Value: 6}}})
		require.NoError(t, err)
		var out []struct{ Mn, Mx, Av float64 }
		if !aggregate(ctx, t, coll, mongo.Pipeline{{{Key: "$group", Value: bson.D{
			{Key: "_id", Value: nil},
			{Key: "mn", Value: bson.D{{Key: "$min", Value: "$v"}}},
			{Key: "mx", Value: bson.D{{Key: "$max", Value: "$v"}}},
			{Key: "av", Value: bson.D{{Key: "$avg", Value: "$v"}}},
		}}}}, &out) {
			return false
		}
		return len(out) == 1 && out[0].Mn == 1 && out[0].Mx == 6 && out[0].Av == 3
	},
	patterns.FeatureDateTrunc: func(ctx context.Context, t *testing.T, db *mongo.Database) bool {
		// Every unit a server was seen to get wrong: FerretDB 2.x truncates
		// 2026-11-30T12:00Z to day as 11-26 (hours and months are right).
		coll := db.Collection("d")
		at := time.Date(2026, 11, 30, 12, 42, 7, 0, time.UTC) // a Monday
		_, err := coll.InsertOne(ctx, bson.D{{Key: "t", Value: at}})
		require.NoError(t, err)
		want := map[string]time.Time{
			"minute": at.Truncate(time.Minute),
			"hour":   at.Truncate(time.Hour),
			"day":    time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC),
			"week":   time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC), // weeks start on Sunday
			"month":  time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC),
		}
		project := bson.D{}
		for unit := range want {
			project = append(project, bson.E{Key: unit, Value: bson.D{{Key: "$dateTrunc", Value: bson.D{{Key: "date", Value: "$t"}, {Key: "unit", Value: unit}}}}})
		}
		var out []map[string]time.Time
		if !aggregate(ctx, t, coll, mongo.Pipeline{{{Key: "$project", Value: append(project, bson.E{Key: "_id", Value: 0})}}}, &out) {
			return false
		}
		require.Len(t, out, 1)
		ok := true
		for unit, w := range want {
			if got := out[0][unit]; !got.Equal(w) {
				t.Logf("$dateTrunc of %s to %s gave %s, want %s", at, unit, got, w)
				ok = false
			}
		}
		return ok
	},
	patterns.FeaturePipelineUpdates: func(ctx context.Context, t *testing.T, db *mongo.Database) bool {
		coll := db.Collection("pu")
		_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}})
		require.NoError(t, err)
		_, err = coll.UpdateByID(ctx, 1, mongo.Pipeline{{{Key: "$set", Value: bson.D{
			{Key: "b", Value: bson.D{{Key: "$add", Value: bson.A{"$a", 1}}}},
		}}}})
		if err != nil {
			t.Logf("pipeline update: %v", err)
			return false
		}
		var doc struct{ B int }
		require.NoError(t, coll.FindOne(ctx, bson.D{}).Decode(&doc))
		return doc.B == 2
	},
	patterns.FeaturePullConditions: func(ctx context.Context, t *testing.T, db *mongo.Database) bool {
		coll := db.Collection("pull")
		_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: bson.A{
			bson.D{{Key: "k", Value: 1}, {Key: "v", Value: "x"}}, bson.D{{Key: "k", Value: 2}, {Key: "v", Value: "y"}},
		}}})
		require.NoError(t, err)
		_, err = coll.UpdateByID(ctx, 1, bson.D{{Key: "$pull", Value: bson.D{{Key: "a", Value: bson.D{{Key: "k", Value: 1}}}}}})
		if err != nil {
			t.Logf("$pull condition: %v", err)
			return false
		}
		var doc struct{ A []struct{ K int } }
		require.NoError(t, coll.FindOne(ctx, bson.D{}).Decode(&doc))
		t.Logf("$pull {k: 1} from [{k 1} {k 2}] left %v", doc.A)
		return len(doc.A) == 1 && doc.A[0].K == 2
	},
	patterns.FeatureUpdateSizeLimit: func(ctx context.Context, t *testing.T, db *mongo.Database) bool {
		coll := db.Collection("big")
		half := strings.Repeat("x", 9<<20)
		_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: half}})
		require.NoError(t, err)
		_, err = coll.UpdateByID(ctx, 1, bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: half}}}})
		t.Logf("update to 18 MiB: %v", err)
		return err != nil
	},
	patterns.FeatureFindAndModifyProjection: func(ctx context.Context, t *testing.T, db *mongo.Database) bool {
		coll := db.Collection("fam")
		_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}, {Key: "b", Value: 2}})
		require.NoError(t, err)
		raw, err := coll.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "a", Value: 1}}}},
			options.FindOneAndUpdate().SetProjection(bson.D{{Key: "a", Value: 1}}).SetReturnDocument(options.After)).Raw()
		if err != nil {
			t.Logf("findAndModify with a projection: %v", err)
			return false
		}
		_, hasB := raw.Lookup("b").Int32OK()
		return raw.Lookup("a").Int32() == 2 && !hasB
	},
	patterns.FeatureBatchedUpdates: func(ctx context.Context, t *testing.T, db *mongo.Database) bool {
		coll := db.Collection("bulk")
		_, err := coll.InsertMany(ctx, []any{
			bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 0}},
			bson.D{{Key: "_id", Value: 2}, {Key: "n", Value: "not a number"}},
			bson.D{{Key: "_id", Value: 3}, {Key: "n", Value: 0}},
		})
		require.NoError(t, err)
		inc := bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}
		_, err = coll.BulkWrite(ctx, []mongo.WriteModel{
			mongo.NewUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: 1}}).SetUpdate(inc),
			mongo.NewUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: 2}}).SetUpdate(inc),
			mongo.NewUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: 3}}).SetUpdate(inc),
		}, options.BulkWrite().SetOrdered(false))
		bwe, ok := errors.AsType[mongo.BulkWriteException](err)
		require.True(t, ok, "the $inc of a string fails: %v", err)
		n, err := coll.CountDocuments(ctx, bson.D{{Key: "n", Value: 1}})
		require.NoError(t, err)
		t.Logf("unordered bulk of 3 with statement 1 failing: errors at %v, %d applied", bwe.WriteErrors, n)
		return len(bwe.WriteErrors) == 1 && bwe.WriteErrors[0].Index == 1 && n == 2
	},
	patterns.FeatureTimeSeriesCustomBucketing: func(ctx context.Context, t *testing.T, db *mongo.Database) bool {
		err := db.RunCommand(ctx, bson.D{{Key: "create", Value: "tsb"}, {Key: "timeseries", Value: bson.D{
			{Key: "timeField", Value: "t"}, {Key: "bucketMaxSpanSeconds", Value: 3600}, {Key: "bucketRoundingSeconds", Value: 3600},
		}}}).Err()
		if err != nil {
			t.Logf("custom bucketing: %v", err)
			return false
		}
		specs, err := db.ListCollectionSpecifications(ctx, bson.D{{Key: "name", Value: "tsb"}})
		require.NoError(t, err)
		if len(specs) != 1 || specs[0].Type != "timeseries" {
			t.Logf("created %v, not a time-series collection", specs)
			return false
		}
		span, ok := specs[0].Options.Lookup("timeseries", "bucketMaxSpanSeconds").AsInt64OK()
		t.Logf("bucketMaxSpanSeconds: %d (%v)", span, ok)
		return ok && span == 3600
	},
	patterns.FeatureTimeSeriesDeletes: func(ctx context.Context, t *testing.T, db *mongo.Database) bool {
		err := db.CreateCollection(ctx, "tsd", options.CreateCollection().SetTimeSeriesOptions(
			options.TimeSeries().SetTimeField("t").SetMetaField("m")))
		if err != nil {
			t.Logf("time-series collection: %v", err)
			return false
		}
		specs, err := db.ListCollectionSpecifications(ctx, bson.D{{Key: "name", Value: "tsd"}})
		require.NoError(t, err)
		if len(specs) != 1 || specs[0].Type != "timeseries" {
			t.Logf("created %v, not a time-series collection", specs)
			return false
		}
		at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		_, err = db.Collection("tsd").InsertMany(ctx, []any{
			bson.D{{Key: "t", Value: at}, {Key: "m", Value: 1}}, bson.D{{Key: "t", Value: at.Add(time.Hour)}, {Key: "m", Value: 1}},
		})
		require.NoError(t, err)
		res, err := db.Collection("tsd").DeleteMany(ctx, bson.D{{Key: "t", Value: bson.D{{Key: "$lt", Value: at.Add(time.Minute)}}}})
		if err != nil {
			t.Logf("delete by time: %v", err)
			return false
		}
		return res.DeletedCount == 1
	},
	patterns.FeatureConcurrentUpdates: func(ctx context.Context, t *testing.T, db *mongo.Database) bool {
		// A client of its own, with a pool of several connections: the
		// shared client of the tests may have one.
		c, err := mongo.Connect(options.Client().ApplyURI(mongotest.URI()).SetMaxPoolSize(8))
		require.NoError(t, err)
		defer func() { _ = c.Disconnect(ctx) }()
		coll := c.Database(db.Name()).Collection("inc")
		_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 0}})
		require.NoError(t, err)
		const writers, each = 8, 50
		var wg sync.WaitGroup
		for range writers {
			wg.Go(func() {
				for range each {
					_, err := coll.UpdateByID(ctx, 1, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}})
					require.NoError(t, err)
				}
			})
		}
		wg.Wait()
		var doc struct{ N int }
		require.NoError(t, coll.FindOne(ctx, bson.D{}).Decode(&doc))
		t.Logf("%d concurrent $inc on one document over %d connections: n = %d", writers*each, writers, doc.N)
		return doc.N == writers*each
	},
	patterns.FeatureCreateManyIndexes: func(ctx context.Context, t *testing.T, db *mongo.Database) bool {
		c, err := mongo.Connect(options.Client().ApplyURI(mongotest.URI()))
		require.NoError(t, err)
		defer func() { _ = c.Disconnect(ctx) }()
		coll := c.Database(db.Name()).Collection("ix")
		models := []mongo.IndexModel{{Keys: bson.D{{Key: "a", Value: 1}}}, {Keys: bson.D{{Key: "b", Value: 1}}}}
		for i := range 2 { // the second time, both exist already
			if _, err := coll.Indexes().CreateMany(ctx, models); err != nil {
				t.Logf("createIndexes of two indexes, time %d: %v", i+1, err)
				return false
			}
		}
		return true
	},
	patterns.FeatureSortArray: func(ctx context.Context, t *testing.T, db *mongo.Database) bool {
		coll := db.Collection("sa")
		_, err := coll.InsertOne(ctx, bson.D{{Key: "a", Value: bson.A{
			bson.D{{Key: "k", Value: 1}, {Key: "i", Value: 2}},
			bson.D{{Key: "k", Value: 2}, {Key: "i", Value: 1}},
			bson.D{{Key: "k", Value: 1}, {Key: "i", Value: 1}},
		}}})
		require.NoError(t, err)
		var out []struct{ S []struct{ K, I int } }
		if !aggregate(ctx, t, coll, mongo.Pipeline{{{Key: "$project", Value: bson.D{
			{Key: "s", Value: bson.D{{Key: "$sortArray", Value: bson.D{{Key: "input", Value: "$a"}, {Key: "sortBy", Value: bson.D{{Key: "k", Value: -1}, {Key: "i", Value: 1}}}}}}},
		}}}}, &out) {
			return false
		}
		t.Logf("$sortArray by {k: -1, i: 1} gave %v", out)
		return len(out) == 1 && len(out[0].S) == 3 && out[0].S[0].K == 2 && out[0].S[1].I == 1 && out[0].S[2].I == 2
	},
}

func aggregate(ctx context.Context, t *testing.T, coll *mongo.Collection, p mongo.Pipeline, out any) bool {
	cur, err := coll.Aggregate(ctx, p)
	if err == nil {
		err = cur.All(ctx, out)
	}
	if err != nil {
		t.Logf("aggregate %v: %v", p, err)
		return false
	}
	return true
}

// indexOptionSticks creates an index with opts and reports whether the
// server kept the option (listIndexes shows it).
func indexOptionSticks(ctx context.Context, t *testing.T, coll *mongo.Collection, opts *options.IndexOptionsBuilder, option string) bool {
	_, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "a", Value: 1}}, Options: opts})
	if err != nil {
		t.Logf("index with %s: %v", option, err)
		return false
	}
	specs, err := coll.Indexes().ListSpecifications(ctx)
	require.NoError(t, err)
	for _, s := range specs {
		if s.Name == "a_1" {
			switch option {
			case "expireAfterSeconds":
				return s.ExpireAfterSeconds != nil
			default:
				var raw bson.M
				require.NoError(t, coll.Database().RunCommand(ctx, bson.D{{Key: "listIndexes", Value: coll.Name()}}).Decode(&raw))
				return bson.Raw(mustMarshalM(t, raw)).Lookup("cursor", "firstBatch", "1", option).Type != 0
			}
		}
	}
	return false
}

func mustMarshalM(t *testing.T, m bson.M) []byte {
	b, err := bson.Marshal(m)
	require.NoError(t, err)
	return b
}

// TestCapabilitiesMatchTheServer runs every probe and checks that the flag
// Capabilities reports is what the server really does.
func TestCapabilitiesMatchTheServer(t *testing.T) {
	srv := mongotest.Server()
	t.Logf("server: %s", srv)
	for _, f := range patterns.AllFeatures() {
		probe, ok := probes[f]
		require.True(t, ok, "no probe for %s", f)
		t.Run(string(f), func(t *testing.T) {
			ctx := context.Background()
			works := probe(ctx, t, mongotest.DB(t))
			require.Equal(t, works, srv.Has(f), "%s: Capabilities says %v, the server really does %v", f, srv.Has(f), works)
		})
	}
}

// TestCapabilitiesSendsTwoReadsOncePerClient checks the cache: 8
// concurrent first callers on a new client share one detection of two
// commands (hello, buildInfo) to the admin database, and later calls send
// nothing.
func TestCapabilitiesSendsTwoReadsOncePerClient(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var sent []string
	monitor := &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		mu.Lock()
		sent = append(sent, e.DatabaseName+"."+e.CommandName)
		mu.Unlock()
	}}
	c, err := mongo.Connect(options.Client().ApplyURI(mongotest.URI()).SetMonitor(monitor))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Disconnect(ctx) })

	var wg sync.WaitGroup
	got := make([]*patterns.Server, 8)
	for i := range got {
		wg.Go(func() {
			s, err := patterns.Capabilities(ctx, c)
			require.NoError(t, err)
			got[i] = s
		})
	}
	wg.Wait()
	again, err := patterns.Capabilities(ctx, c)
	require.NoError(t, err)
	for _, s := range got {
		require.Same(t, again, s)
	}
	require.Equal(t, []string{"admin.hello", "admin.buildInfo"}, sent)
	require.Equal(t, mongotest.Server().Kind, again.Kind)
	require.Equal(t, mongotest.Server().Features(), again.Features())
}

func TestEnsureIndexesIsIdempotent(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	key := bson.D{{Key: "sensor", Value: 1}, {Key: "at", Value: 1}}
	indexes := []patterns.Index{
		{Collection: db.Collection("a"), Model: mongo.IndexModel{Keys: key}},
		{Collection: db.Collection("b"), Model: mongo.IndexModel{Keys: bson.D{{Key: "k", Value: 1}}, Options: options.Index().SetUnique(true)}},
		{Collection: db.Collection("a"), Model: mongo.IndexModel{Keys: bson.D{{Key: "other", Value: -1}}}},
	}
	counter := mongotest.NewCounter(t, db)
	want := []string{"createIndexes", "createIndexes"} // one per collection
	if !mongotest.Server().Has(patterns.FeatureCreateManyIndexes) {
		want = append(want, "createIndexes") // one per index
	}
	for range 2 {
		sent := counter.Count(func() { require.NoError(t, patterns.EnsureIndexes(ctx, indexes...)) })
		require.Equal(t, want, sent)
	}
	names := func(coll string) []string {
		specs, err := db.Collection(coll).Indexes().ListSpecifications(ctx)
		require.NoError(t, err)
		var out []string
		for _, s := range specs {
			out = append(out, s.Name)
		}
		return out
	}
	require.ElementsMatch(t, []string{"_id_", "sensor_1_at_1", "other_-1"}, names("a"))
	require.ElementsMatch(t, []string{"_id_", "k_1"}, names("b"))

	err := patterns.EnsureIndexes(ctx, patterns.Index{Model: mongo.IndexModel{Keys: key}})
	require.ErrorIs(t, err, patterns.ErrInvalid)
}
