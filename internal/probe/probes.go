package probe

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/srverr"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// probes holds one probe per feature. Each works in collections of its own
// in the scratch database, and returns what it measured with one line of
// evidence; an error writing its fixture makes it not measured, never a
// guess.
var probes = map[patterns.Feature]func(context.Context, *env) finding{
	patterns.FeatureTransactions:              probeTransactions,
	patterns.FeaturePushModifiers:             probePushModifiers,
	patterns.FeatureArrayFilters:              probeArrayFilters,
	patterns.FeatureTTLIndexes:                probeTTLIndexes,
	patterns.FeaturePartialIndexes:            probePartialIndexes,
	patterns.FeatureJSONSchema:                probeJSONSchema,
	patterns.FeatureTimeSeries:                probeTimeSeries,
	patterns.FeatureChangeStreams:             probeChangeStreams,
	patterns.FeatureLookup:                    probeLookup,
	patterns.FeatureGroupMinMaxAvg:            probeGroupMinMaxAvg,
	patterns.FeatureDateTrunc:                 probeDateTrunc,
	patterns.FeaturePipelineUpdates:           probePipelineUpdates,
	patterns.FeaturePullConditions:            probePullConditions,
	patterns.FeatureUpdateSizeLimit:           probeUpdateSizeLimit,
	patterns.FeatureFindAndModifyProjection:   probeFindAndModifyProjection,
	patterns.FeatureBatchedUpdates:            probeBatchedUpdates,
	patterns.FeatureTimeSeriesCustomBucketing: probeTimeSeriesCustomBucketing,
	patterns.FeatureTimeSeriesDeletes:         probeTimeSeriesDeletes,
	patterns.FeatureConcurrentUpdates:         probeConcurrentUpdates,
	patterns.FeatureCreateManyIndexes:         probeCreateManyIndexes,
	patterns.FeatureSortArray:                 probeSortArray,
	patterns.FeatureValidators:                probeValidators,
	patterns.FeatureWritesWithoutShardKey:     probeWritesWithoutShardKey,
}

// probeTransactions checks isolation and atomicity, not just the absence
// of an error: an insert inside a transaction must be unseen outside it
// before the commit and undone by an abort, and a committed one kept.
func probeTransactions(ctx context.Context, e *env) finding {
	coll := e.db.Collection("transactions")
	if err := e.db.CreateCollection(ctx, coll.Name()); err != nil {
		return notMeasured("create the collection: %v", short(err))
	}
	sess, err := e.db.Client().StartSession()
	if err != nil {
		return refused("start a session", err)
	}
	defer sess.EndSession(context.WithoutCancel(ctx))
	if err := sess.StartTransaction(); err != nil {
		return refused("start a transaction", err)
	}
	if _, err := coll.InsertOne(mongo.NewSessionContext(ctx, sess), bson.D{{Key: "_id", Value: 1}}); err != nil {
		_ = sess.AbortTransaction(ctx)
		return refused("insert inside a transaction", err)
	}
	seen, err := coll.CountDocuments(ctx, bson.D{})
	if err != nil {
		return notMeasured("count outside the transaction: %v", short(err))
	}
	abortErr := sess.AbortTransaction(ctx)
	kept, err := coll.CountDocuments(ctx, bson.D{})
	if err != nil {
		return notMeasured("count after the abort: %v", short(err))
	}
	if seen != 0 || kept != 0 {
		abort := ""
		if abortErr != nil {
			abort = "; the abort answered " + short(abortErr)
		}
		return wrong("an insert inside a transaction was seen outside it before commit (documents: %d) and after an abort (documents: %d)%s",
			seen, kept, abort)
	}
	if abortErr != nil {
		return refused("abort a transaction", abortErr)
	}
	_, err = sess.WithTransaction(ctx, func(ctx context.Context) (any, error) {
		return coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}})
	})
	if err != nil {
		return refused("commit a transaction", err)
	}
	n, err := coll.CountDocuments(ctx, bson.D{{Key: "_id", Value: 2}})
	if err != nil {
		return notMeasured("count after the commit: %v", short(err))
	}
	if n != 1 {
		return wrong("a committed transaction's insert left %d documents, want 1", n)
	}
	return works("an insert inside a transaction was unseen outside before commit and undone by abort; a committed one was kept")
}

// probePushModifiers checks each modifier's effect: FerretDB 1.x accepts
// them and appends as if they were not there.
func probePushModifiers(ctx context.Context, e *env) finding {
	coll := e.db.Collection("push")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: bson.A{}}}); err != nil {
		return notMeasured("insert the fixture: %v", short(err))
	}
	push := func(each bson.D) ([]int, error) {
		if _, err := coll.UpdateByID(ctx, 1, bson.D{{Key: "$push", Value: bson.D{{Key: "a", Value: each}}}}); err != nil {
			return nil, err
		}
		var doc struct{ A []int }
		return doc.A, coll.FindOne(ctx, bson.D{}).Decode(&doc)
	}
	sorted, err := push(bson.D{{Key: "$each", Value: bson.A{3, 1, 2}}, {Key: "$sort", Value: 1}, {Key: "$slice", Value: 2}})
	if err != nil {
		return refused("$push with $each, $sort and $slice", err)
	}
	placed, err := push(bson.D{{Key: "$each", Value: bson.A{7}}, {Key: "$position", Value: 1}})
	if err != nil {
		return refused("$push with $position", err)
	}
	got := fmt.Sprintf("$push $each [3 1 2] $sort 1 $slice 2 on [] gave %v; then $each [7] $position 1 gave %v", sorted, placed)
	if !slices.Equal(sorted, []int{1, 2}) || !slices.Equal(placed, []int{1, 7, 2}) {
		return wrong("%s, want [1 2] and [1 7 2]", got)
	}
	return works("%s", got)
}

func probeArrayFilters(ctx context.Context, e *env) finding {
	coll := e.db.Collection("arrayfilters")
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: bson.A{
		bson.D{{Key: "k", Value: 1}, {Key: "v", Value: 0}}, bson.D{{Key: "k", Value: 2}, {Key: "v", Value: 0}},
	}}})
	if err != nil {
		return notMeasured("insert the fixture: %v", short(err))
	}
	_, err = coll.UpdateByID(ctx, 1, bson.D{{Key: "$set", Value: bson.D{{Key: "a.$[e].v", Value: 5}}}},
		options.UpdateOne().SetArrayFilters([]any{bson.D{{Key: "e.k", Value: 2}}}))
	if err != nil {
		return refused("$set a.$[e].v with arrayFilters", err)
	}
	var doc struct{ A []struct{ K, V int } }
	js, err := readOne(ctx, coll, &doc)
	if err != nil {
		return notMeasured("read back: %v", short(err))
	}
	got := fmt.Sprintf("$set a.$[e].v: 5 with arrayFilters [{e.k: 2}] on {a: [{k: 1, v: 0}, {k: 2, v: 0}]} gave %s", js)
	if len(doc.A) != 2 || doc.A[0].V != 0 || doc.A[1].V != 5 {
		return wrong("%s, want v 5 in the second element only", got)
	}
	return works("%s", got)
}

// probeTTLIndexes checks that the option is kept; the deletion itself is
// not awaited (the server's TTL monitor runs once a minute).
func probeTTLIndexes(ctx context.Context, e *env) finding {
	coll := e.db.Collection("ttl")
	_, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "at", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(3600)})
	if err != nil {
		return refused("createIndexes with expireAfterSeconds", err)
	}
	specs, err := coll.Indexes().ListSpecifications(ctx)
	if err != nil {
		return notMeasured("listIndexes: %v", short(err))
	}
	for _, s := range specs {
		if s.Name == "at_1" && s.ExpireAfterSeconds != nil && *s.ExpireAfterSeconds == 3600 {
			return works("an index with expireAfterSeconds 3600 is listed with it (deletions, made once a minute, not awaited)")
		}
	}
	return wrong("createIndexes accepted expireAfterSeconds 3600, but listIndexes does not show it")
}

// probePartialIndexes checks the filter's effect through a unique partial
// index: documents outside the filter may repeat a key, documents inside
// it may not.
func probePartialIndexes(ctx context.Context, e *env) finding {
	coll := e.db.Collection("partial")
	_, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "k", Value: 1}}, Options: options.Index().
		SetUnique(true).SetPartialFilterExpression(bson.D{{Key: "p", Value: true}})})
	if err != nil {
		return refused("createIndexes with partialFilterExpression", err)
	}
	doc := func(id, k int, p bool) bson.D {
		return bson.D{{Key: "_id", Value: id}, {Key: "k", Value: k}, {Key: "p", Value: p}}
	}
	for i := range 2 {
		if _, err := coll.InsertOne(ctx, doc(i, 1, false)); err != nil {
			return wrong("a unique index on k for p: true refused a second k: 1 with p: false, outside its filter: %s", short(err))
		}
	}
	if _, err := coll.InsertOne(ctx, doc(2, 2, true)); err != nil {
		return notMeasured("insert the first document inside the filter: %v", short(err))
	}
	_, err = coll.InsertOne(ctx, doc(3, 2, true))
	if !mongo.IsDuplicateKeyError(err) {
		return wrong("a unique index on k for p: true let a second k: 2 with p: true in (insert answered %v)", err)
	}
	return works("a unique index on k for p: true stored two k: 1 with p: false and refused a second k: 2 with p: true as a duplicate key")
}

// probeJSONSchema checks that a validator given at create is enforced:
// FerretDB 2.x accepts it and ignores it.
func probeJSONSchema(ctx context.Context, e *env) finding {
	err := e.db.CreateCollection(ctx, "schema", options.CreateCollection().SetValidator(bson.D{{Key: "$jsonSchema", Value: bson.D{
		{Key: "bsonType", Value: "object"},
		{Key: "required", Value: bson.A{"a"}},
		{Key: "properties", Value: bson.D{{Key: "a", Value: bson.D{{Key: "bsonType", Value: "int"}}}}},
	}}}))
	if err != nil {
		return refused("create with a $jsonSchema validator", err)
	}
	coll := e.db.Collection("schema")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "a", Value: 1}}); err != nil {
		return wrong("create with a $jsonSchema validator requiring an int a: {a: 1} was refused: %s", short(err))
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "b", Value: 1}}); err == nil {
		return wrong("create accepted a $jsonSchema validator requiring a, then stored {b: 1}, which lacks it")
	} else if !srverr.Refused(err) {
		return notMeasured("insert {b: 1}: %v", short(err))
	} else {
		return works("create with a $jsonSchema validator requiring an int a: {a: 1} stored, {b: 1} refused (%s)", short(err))
	}
}

// probeValidators checks that a validator set by collMod, in the form the
// validation package sends where create ignores validators (core
// $jsonSchema keywords beside query operators), is enforced and read back:
// a document without a, and one with a below the minimum, refused; a
// valid one stored; the collection's options listing the validator.
func probeValidators(ctx context.Context, e *env) finding {
	coll := e.db.Collection("validated")
	if err := e.db.CreateCollection(ctx, coll.Name()); err != nil {
		return notMeasured("create the collection: %v", short(err))
	}
	validator := bson.D{{Key: "$and", Value: bson.A{
		bson.D{{Key: "$jsonSchema", Value: bson.D{{Key: "properties", Value: bson.D{{Key: "a", Value: bson.D{
			{Key: "bsonType", Value: "int"}, {Key: "minimum", Value: 0},
		}}}}}}},
		bson.D{{Key: "$nor", Value: bson.A{bson.D{{Key: "a", Value: bson.D{{Key: "$exists", Value: false}}}}}}},
	}}}
	if err := e.db.RunCommand(ctx, bson.D{{Key: "collMod", Value: coll.Name()}, {Key: "validator", Value: validator}}).Err(); err != nil {
		return refused("collMod with a validator", err)
	}
	_, missing := coll.InsertOne(ctx, bson.D{{Key: "b", Value: 1}})
	_, negative := coll.InsertOne(ctx, bson.D{{Key: "a", Value: int32(-1)}})
	_, valid := coll.InsertOne(ctx, bson.D{{Key: "a", Value: int32(1)}})
	specs, err := e.db.ListCollectionSpecifications(ctx, bson.D{{Key: "name", Value: coll.Name()}})
	if err != nil {
		return notMeasured("listCollections: %v", short(err))
	}
	kept := len(specs) == 1 && specs[0].Options.Lookup("validator").Type == bson.TypeEmbeddedDocument
	switch {
	case valid != nil:
		return wrong("a validator set by collMod refused the valid {a: 1}: %s", short(valid))
	case missing == nil || negative == nil:
		return wrong("a validator set by collMod stored {b: 1} (refused: %v) or {a: -1} (refused: %v), which it rejects", missing != nil, negative != nil)
	case !kept:
		return wrong("a validator set by collMod was enforced but listCollections does not show it")
	}
	return works("a validator set by collMod refused {b: 1} and {a: -1}, stored {a: 1}, and is listed in the collection's options")
}

// timeSeries creates the collection name with the create options given
// and returns its options as listCollections shows them when it is a
// time-series collection, else the finding to return.
func timeSeries(ctx context.Context, e *env, name string, create bson.D) (bson.Raw, *finding) {
	if err := e.db.RunCommand(ctx, append(bson.D{{Key: "create", Value: name}}, create...)).Err(); err != nil {
		f := refused("create a time-series collection", err)
		return nil, &f
	}
	specs, err := e.db.ListCollectionSpecifications(ctx, bson.D{{Key: "name", Value: name}})
	if err != nil {
		f := notMeasured("listCollections: %v", short(err))
		return nil, &f
	}
	if len(specs) != 1 || specs[0].Type != "timeseries" {
		kinds := make([]string, len(specs))
		for i, s := range specs {
			kinds[i] = s.Type
		}
		f := wrong("create with timeseries answered ok but made a collection of type %q, not a time-series one", strings.Join(kinds, ", "))
		return nil, &f
	}
	return specs[0].Options, nil
}

func probeTimeSeries(ctx context.Context, e *env) finding {
	if _, f := timeSeries(ctx, e, "ts", bson.D{{Key: "timeseries", Value: bson.D{{Key: "timeField", Value: "t"}, {Key: "metaField", Value: "m"}}}}); f != nil {
		return *f
	}
	coll := e.db.Collection("ts")
	at := time.Date(2026, 11, 30, 12, 42, 7, 0, time.UTC)
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "t", Value: at}, {Key: "m", Value: "s1"}, {Key: "v", Value: 7}}); err != nil {
		return refused("insert a measurement", err)
	}
	var got struct{ V int }
	if err := coll.FindOne(ctx, bson.D{{Key: "t", Value: at}, {Key: "m", Value: "s1"}}).Decode(&got); err != nil {
		return wrong("a measurement inserted into a time-series collection was not found by time and meta: %s", short(err))
	}
	return works("create with timeseries made a collection of type timeseries; a measurement was stored and found by time and meta")
}

// changeWait bounds the wait for a change event: a stream that opens but
// stays silent is wrong, not slow.
const changeWait = 5 * time.Second

func probeChangeStreams(ctx context.Context, e *env) finding {
	coll := e.db.Collection("changes")
	if err := e.db.CreateCollection(ctx, coll.Name()); err != nil {
		return notMeasured("create the collection: %v", short(err))
	}
	stream, err := coll.Watch(ctx, mongo.Pipeline{})
	if err != nil {
		return refused("open a change stream", err)
	}
	defer func() { _ = stream.Close(context.WithoutCancel(ctx)) }()
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		return notMeasured("insert: %v", short(err))
	}
	wctx, cancel := context.WithTimeout(ctx, changeWait)
	defer cancel()
	if !stream.Next(wctx) {
		if ctx.Err() == nil && wctx.Err() != nil {
			return wrong("a change stream opened, but no event came within %s of an insert", changeWait)
		}
		return refused("read the change stream", stream.Err())
	}
	op := stream.Current.Lookup("operationType").StringValue()
	id, _ := stream.Current.Lookup("documentKey", "_id").AsInt64OK()
	if op != "insert" || id != 1 {
		return wrong("the insert of _id 1 came as an event %q for _id %d", op, id)
	}
	return works("the insert of _id 1 came as an insert event for _id 1")
}

// aggregate runs p on coll and decodes every result into out.
func aggregate(ctx context.Context, coll *mongo.Collection, p mongo.Pipeline, out any) error {
	cur, err := coll.Aggregate(ctx, p)
	if err != nil {
		return err
	}
	return cur.All(ctx, out)
}

// readOne reads the one document of coll, without its _id, into out, and
// returns it as relaxed extended JSON, for the evidence.
func readOne(ctx context.Context, coll *mongo.Collection, out any) (string, error) {
	raw, err := coll.FindOne(ctx, bson.D{}, options.FindOne().SetProjection(bson.D{{Key: "_id", Value: 0}})).Raw()
	if err != nil {
		return "", err
	}
	return jsonOf(raw), bson.Unmarshal(raw, out)
}

// jsonOf returns doc as relaxed extended JSON.
func jsonOf(doc bson.Raw) string {
	b, err := bson.MarshalExtJSON(doc, false, false)
	if err != nil {
		return doc.String()
	}
	return string(b)
}

func probeLookup(ctx context.Context, e *env) finding {
	if _, err := e.db.Collection("lookup_local").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "r", Value: 7}}); err != nil {
		return notMeasured("insert the fixture: %v", short(err))
	}
	if _, err := e.db.Collection("lookup_foreign").InsertOne(ctx, bson.D{{Key: "_id", Value: 7}, {Key: "name", Value: "seven"}}); err != nil {
		return notMeasured("insert the fixture: %v", short(err))
	}
	var out []bson.Raw
	err := aggregate(ctx, e.db.Collection("lookup_local"), mongo.Pipeline{{{Key: "$lookup", Value: bson.D{
		{Key: "from", Value: "lookup_foreign"}, {Key: "localField", Value: "r"}, {Key: "foreignField", Value: "_id"}, {Key: "as", Value: "j"},
	}}}, {{Key: "$project", Value: bson.D{{Key: "_id", Value: 0}, {Key: "j", Value: 1}}}}}, &out)
	if err != nil {
		return refused("$lookup", err)
	}
	if len(out) != 1 {
		return wrong("$lookup of one document gave %d", len(out))
	}
	var doc struct{ J []struct{ Name string } }
	if err := bson.Unmarshal(out[0], &doc); err != nil {
		return wrong("$lookup gave %s: %s", jsonOf(out[0]), short(err))
	}
	got := fmt.Sprintf("$lookup of {r: 7} as j in a collection holding {_id: 7, name: seven} gave %s", jsonOf(out[0]))
	if len(doc.J) != 1 || doc.J[0].Name != "seven" {
		return wrong("%s, want the one document of _id 7", got)
	}
	return works("%s", got)
}

// probeGroupMinMaxAvg checks the forms bucket's summaries rely on:
// $min, $max and $avg of a field every document of a group has, per
// group, and $max of an expression object, which compares objects field by
// field (the copy of a bucket with the higher count wins). What a server
// does with missing values is checked apart, as server behaviours
// (BehaviourMinOverMissing, BehaviourMissingInAccumulatedObject), which
// the library does not rely on.
func probeGroupMinMaxAvg(ctx context.Context, e *env) finding {
	coll := e.db.Collection("group")
	_, err := coll.InsertMany(ctx, []any{
		bson.D{{Key: "k", Value: 1}, {Key: "v", Value: 1}}, bson.D{{Key: "k", Value: 1}, {Key: "v", Value: 2}},
		bson.D{{Key: "k", Value: 1}, {Key: "v", Value: 6}}, bson.D{{Key: "k", Value: 2}, {Key: "v", Value: 4}},
	})
	if err != nil {
		return notMeasured("insert the fixture: %v", short(err))
	}
	type group struct {
		ID         int `bson:"_id"`
		Mn, Mx, Av float64
		Ob         struct{ V, K int }
	}
	var out []group
	err = aggregate(ctx, coll, mongo.Pipeline{{{Key: "$group", Value: bson.D{
		{Key: "_id", Value: "$k"},
		{Key: "mn", Value: bson.D{{Key: "$min", Value: "$v"}}},
		{Key: "mx", Value: bson.D{{Key: "$max", Value: "$v"}}},
		{Key: "av", Value: bson.D{{Key: "$avg", Value: "$v"}}},
		{Key: "ob", Value: bson.D{{Key: "$max", Value: bson.D{{Key: "v", Value: "$v"}, {Key: "k", Value: "$k"}}}}},
	}}}, {{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}}}, &out)
	if err != nil {
		return refused("$group with $min, $max and $avg", err)
	}
	if len(out) != 2 {
		return wrong("$group by k of 4 documents with 2 values of k gave %d groups", len(out))
	}
	got := fmt.Sprintf("$group by k of v 1, 2, 6 (k 1) and 4 (k 2): $min, $max, $avg gave %v, %v, %v and %v, %v, %v; $max of {v: $v, k: $k} gave {v: %d} and {v: %d}",
		out[0].Mn, out[0].Mx, out[0].Av, out[1].Mn, out[1].Mx, out[1].Av, out[0].Ob.V, out[1].Ob.V)
	if want := []group{{1, 1, 6, 3, struct{ V, K int }{6, 1}}, {2, 4, 4, 4, struct{ V, K int }{4, 2}}}; !slices.Equal(out, want) {
		return wrong("%s, want 1, 6, 3 and 4, 4, 4; {v: 6} and {v: 4}", got)
	}
	return works("%s", got)
}

// probeDateTrunc checks every unit a server was seen to get wrong:
// FerretDB 2.x truncates 2026-11-30T12:42Z to day as 11-26 (hours and
// months are right).
func probeDateTrunc(ctx context.Context, e *env) finding {
	coll := e.db.Collection("datetrunc")
	at := time.Date(2026, 11, 30, 12, 42, 7, 0, time.UTC) // a Monday
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "t", Value: at}}); err != nil {
		return notMeasured("insert the fixture: %v", short(err))
	}
	want := []struct {
		unit string
		at   time.Time
	}{
		{"minute", at.Truncate(time.Minute)},
		{"hour", at.Truncate(time.Hour)},
		{"day", time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)},
		{"week", time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)}, // weeks start on Sunday
		{"month", time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)},
	}
	project := bson.D{{Key: "_id", Value: 0}}
	for _, w := range want {
		project = append(project, bson.E{Key: w.unit, Value: bson.D{{Key: "$dateTrunc", Value: bson.D{{Key: "date", Value: "$t"}, {Key: "unit", Value: w.unit}}}}})
	}
	var out []map[string]time.Time
	if err := aggregate(ctx, coll, mongo.Pipeline{{{Key: "$project", Value: project}}}, &out); err != nil {
		return refused("$dateTrunc", err)
	}
	if len(out) != 1 {
		return wrong("$project of one document gave %d", len(out))
	}
	var bad []string
	for _, w := range want {
		if got := out[0][w.unit]; !got.Equal(w.at) {
			bad = append(bad, fmt.Sprintf("to %s gave %s, want %s", w.unit, got.UTC().Format(time.RFC3339), w.at.Format(time.RFC3339)))
		}
	}
	if len(bad) > 0 {
		return wrong("$dateTrunc of %s %s", at.Format(time.RFC3339), strings.Join(bad, "; "))
	}
	return works("$dateTrunc of %s to minute, hour, day, week and month gave %s, %s, %s, %s, %s", at.Format(time.RFC3339),
		want[0].at.Format("15:04"), want[1].at.Format("15:04"), want[2].at.Format(time.DateOnly), want[3].at.Format(time.DateOnly), want[4].at.Format(time.DateOnly))
}

func probePipelineUpdates(ctx context.Context, e *env) finding {
	coll := e.db.Collection("pipelineupdate")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}}); err != nil {
		return notMeasured("insert the fixture: %v", short(err))
	}
	_, err := coll.UpdateByID(ctx, 1, mongo.Pipeline{{{Key: "$set", Value: bson.D{
		{Key: "b", Value: bson.D{{Key: "$add", Value: bson.A{"$a", 1}}}},
	}}}})
	if err != nil {
		return refused("an update given as a pipeline", err)
	}
	var doc struct{ B int }
	if err := coll.FindOne(ctx, bson.D{}).Decode(&doc); err != nil {
		return notMeasured("read back: %v", short(err))
	}
	if doc.B != 2 {
		return wrong("the pipeline update [{$set: {b: {$add: [$a, 1]}}}] of {a: 1} gave b %d, want 2", doc.B)
	}
	return works("the pipeline update [{$set: {b: {$add: [$a, 1]}}}] of {a: 1} gave b 2")
}

// probePullConditions: FerretDB 1.x compares the condition with whole
// elements and removes nothing.
func probePullConditions(ctx context.Context, e *env) finding {
	coll := e.db.Collection("pull")
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: bson.A{
		bson.D{{Key: "k", Value: 1}, {Key: "v", Value: "x"}}, bson.D{{Key: "k", Value: 2}, {Key: "v", Value: "y"}},
	}}})
	if err != nil {
		return notMeasured("insert the fixture: %v", short(err))
	}
	if _, err := coll.UpdateByID(ctx, 1, bson.D{{Key: "$pull", Value: bson.D{{Key: "a", Value: bson.D{{Key: "k", Value: 1}}}}}}); err != nil {
		return refused("$pull with a condition", err)
	}
	var doc struct{ A []struct{ K int } }
	js, err := readOne(ctx, coll, &doc)
	if err != nil {
		return notMeasured("read back: %v", short(err))
	}
	got := fmt.Sprintf("$pull {a: {k: 1}} from {a: [{k: 1, v: x}, {k: 2, v: y}]} left %s", js)
	if len(doc.A) != 1 || doc.A[0].K != 2 {
		return wrong("%s, want only the element of k 2", got)
	}
	return works("%s", got)
}

// bigHalf is the size of each of the two strings that together take a
// document past 16 MiB: 17 MiB in all, as little as makes the point.
const bigHalf = 17 << 19

// probeUpdateSizeLimit checks that an update taking a document past
// 16 MiB is refused with an error the library reads as too large, and
// leaves the document as it was: FerretDB 1.x stores it.
func probeUpdateSizeLimit(ctx context.Context, e *env) finding {
	coll := e.db.Collection("big")
	half := strings.Repeat("x", bigHalf)
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: half}}); err != nil {
		return notMeasured("insert a document of 8.5 MiB: %v", short(err))
	}
	_, err := coll.UpdateByID(ctx, 1, bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: half}}}})
	if err == nil {
		// Wrong whether it stored it or not; reading 17 MiB back to say
		// which would double the probe's time on the slowest servers.
		return wrong("an update taking a document to 17 MiB answered ok")
	}
	grown, cerr := coll.CountDocuments(ctx, bson.D{{Key: "b", Value: bson.D{{Key: "$exists", Value: true}}}})
	if cerr != nil {
		return notMeasured("count after the update: %v", short(cerr))
	}
	switch {
	case grown != 0:
		return wrong("an update taking a document to 17 MiB was stored, yet answered %s", short(err))
	case !srverr.TooLarge(err):
		return wrong("an update taking a document to 17 MiB was refused with an error the library does not read as too large: %s", short(err))
	}
	return works("an update taking a document to 17 MiB was refused as too large and not stored: %s", short(err))
}

func probeFindAndModifyProjection(ctx context.Context, e *env) finding {
	coll := e.db.Collection("findandmodify")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}, {Key: "b", Value: 2}}); err != nil {
		return notMeasured("insert the fixture: %v", short(err))
	}
	raw, err := coll.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "a", Value: 1}}}},
		options.FindOneAndUpdate().SetProjection(bson.D{{Key: "_id", Value: 0}, {Key: "a", Value: 1}}).SetReturnDocument(options.After)).Raw()
	if err != nil {
		return refused("findAndModify with a projection", err)
	}
	got := fmt.Sprintf("findAndModify $inc a with fields {_id: 0, a: 1} of {_id: 1, a: 1, b: 2} returned %s", jsonOf(raw))
	if a, ok := raw.Lookup("a").AsInt64OK(); !ok || a != 2 || len(mustElements(raw)) != 1 {
		return wrong("%s, want {a: 2}", got)
	}
	return works("%s", got)
}

// mustElements returns raw's elements, none when raw is malformed.
func mustElements(raw bson.Raw) []bson.RawElement {
	els, _ := raw.Elements()
	return els
}

// probeBatchedUpdates checks MongoDB's semantics of an unordered update
// command: every statement runs, and a failure is reported at its own
// index.
func probeBatchedUpdates(ctx context.Context, e *env) finding {
	coll := e.db.Collection("batched")
	_, err := coll.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 0}},
		bson.D{{Key: "_id", Value: 2}, {Key: "n", Value: "not a number"}},
		bson.D{{Key: "_id", Value: 3}, {Key: "n", Value: 0}},
	})
	if err != nil {
		return notMeasured("insert the fixture: %v", short(err))
	}
	inc := bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}
	_, err = coll.BulkWrite(ctx, []mongo.WriteModel{
		mongo.NewUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: 1}}).SetUpdate(inc),
		mongo.NewUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: 2}}).SetUpdate(inc),
		mongo.NewUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: 3}}).SetUpdate(inc),
	}, options.BulkWrite().SetOrdered(false))
	bwe, ok := errors.AsType[mongo.BulkWriteException](err)
	if !ok {
		if err == nil {
			return wrong("an unordered update of 3 statements, the second an $inc of a string, answered ok")
		}
		return refused("an unordered update of 3 statements", err)
	}
	n, err := coll.CountDocuments(ctx, bson.D{{Key: "n", Value: 1}})
	if err != nil {
		return notMeasured("count after the update: %v", short(err))
	}
	at := make([]int, len(bwe.WriteErrors))
	for i, we := range bwe.WriteErrors {
		at[i] = we.Index
	}
	got := fmt.Sprintf("an unordered update of 3 statements, the second an $inc of a string, failed at %v and applied %d", at, n)
	if !slices.Equal(at, []int{1}) || n != 2 {
		return wrong("%s, want [1] and 2", got)
	}
	return works("%s", got)
}

func probeTimeSeriesCustomBucketing(ctx context.Context, e *env) finding {
	opts, f := timeSeries(ctx, e, "tsbucketing", bson.D{{Key: "timeseries", Value: bson.D{
		{Key: "timeField", Value: "t"}, {Key: "bucketMaxSpanSeconds", Value: 3600}, {Key: "bucketRoundingSeconds", Value: 3600},
	}}})
	if f != nil {
		return *f
	}
	span, ok := opts.Lookup("timeseries", "bucketMaxSpanSeconds").AsInt64OK()
	rounding, ok2 := opts.Lookup("timeseries", "bucketRoundingSeconds").AsInt64OK()
	if !ok || !ok2 || span != 3600 || rounding != 3600 {
		return wrong("a time-series collection created with bucketMaxSpanSeconds and bucketRoundingSeconds 3600 lists them as %d and %d", span, rounding)
	}
	return works("a time-series collection created with bucketMaxSpanSeconds and bucketRoundingSeconds 3600 lists them so")
}

func probeTimeSeriesDeletes(ctx context.Context, e *env) finding {
	if _, f := timeSeries(ctx, e, "tsdeletes", bson.D{{Key: "timeseries", Value: bson.D{{Key: "timeField", Value: "t"}, {Key: "metaField", Value: "m"}}}}); f != nil {
		return *f
	}
	coll := e.db.Collection("tsdeletes")
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	_, err := coll.InsertMany(ctx, []any{
		bson.D{{Key: "t", Value: at}, {Key: "m", Value: 1}}, bson.D{{Key: "t", Value: at.Add(time.Hour)}, {Key: "m", Value: 1}},
	})
	if err != nil {
		return notMeasured("insert the measurements: %v", short(err))
	}
	res, err := coll.DeleteMany(ctx, bson.D{{Key: "t", Value: bson.D{{Key: "$lt", Value: at.Add(time.Minute)}}}})
	if err != nil {
		return refused("deleteMany with a filter on the time field", err)
	}
	left, err := coll.CountDocuments(ctx, bson.D{})
	if err != nil {
		return notMeasured("count after the delete: %v", short(err))
	}
	if res.DeletedCount != 1 || left != 1 {
		return wrong("deleteMany of the first of 2 measurements by time deleted %d and left %d", res.DeletedCount, left)
	}
	return works("deleteMany of the first of 2 measurements by time deleted 1 and left 1")
}

// The concurrency probe's size: enough writers on one document to meet,
// few enough updates to finish in about a second on FerretDB 1.x.
const (
	concurrentWriters = 8
	concurrentEach    = 50
)

// probeConcurrentUpdates sends $inc to one document from several
// connections at once (a client of its own, whatever pool the caller
// uses) and counts them: FerretDB 1.x loses most of them silently. An
// update that fails transiently is sent again, as the repositories do.
func probeConcurrentUpdates(ctx context.Context, e *env) finding {
	c, err := e.connect(ctx, func(o *options.ClientOptions) { o.SetMaxPoolSize(concurrentWriters) })
	if err != nil {
		return notMeasured("%v", short(err))
	}
	defer func() { _ = c.Disconnect(context.WithoutCancel(ctx)) }()
	coll := c.Database(e.db.Name()).Collection("concurrent")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 0}}); err != nil {
		return notMeasured("insert the fixture: %v", short(err))
	}
	var acked atomic.Int64
	var mu sync.Mutex
	var failed []error
	var wg sync.WaitGroup
	for range concurrentWriters {
		wg.Go(func() {
			for range concurrentEach {
				err := srverr.Retry(ctx, func() error {
					_, err := coll.UpdateByID(ctx, 1, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}})
					return err
				})
				if err != nil {
					mu.Lock()
					failed = append(failed, err)
					mu.Unlock()
					if ctx.Err() != nil {
						return
					}
					continue
				}
				acked.Add(1)
			}
		})
	}
	wg.Wait()
	var doc struct{ N int64 }
	if err := coll.FindOne(ctx, bson.D{}).Decode(&doc); err != nil {
		return notMeasured("read back: %v", short(err))
	}
	total := concurrentWriters * concurrentEach
	got := fmt.Sprintf("%d concurrent $inc of one document from %d connections: %d acknowledged, n = %d", total, concurrentWriters, acked.Load(), doc.N)
	switch {
	case doc.N != acked.Load():
		return wrong("%s", got)
	case len(failed) > 0:
		return refused(fmt.Sprintf("%s; %d failed", got, len(failed)), failed[0])
	}
	return works("%s", got)
}

// probeCreateManyIndexes sends createIndexes of two indexes twice, the
// second time when both exist: FerretDB 1.x drops the connection then. It
// uses a client of its own, so that a dropped connection breaks no other
// probe.
func probeCreateManyIndexes(ctx context.Context, e *env) finding {
	c, err := e.connect(ctx, nil)
	if err != nil {
		return notMeasured("%v", short(err))
	}
	defer func() { _ = c.Disconnect(context.WithoutCancel(ctx)) }()
	coll := c.Database(e.db.Name()).Collection("indexes")
	models := []mongo.IndexModel{{Keys: bson.D{{Key: "a", Value: 1}}}, {Keys: bson.D{{Key: "b", Value: 1}}}}
	for _, when := range []string{"first", "second"} {
		if _, err := coll.Indexes().CreateMany(ctx, models); err != nil {
			return refused(fmt.Sprintf("createIndexes of a_1 and b_1, the %s time", when), err)
		}
	}
	specs, err := e.db.Collection("indexes").Indexes().ListSpecifications(ctx)
	if err != nil {
		return notMeasured("listIndexes: %v", short(err))
	}
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"_id_", "a_1", "b_1"}) {
		return wrong("createIndexes of a_1 and b_1, twice, answered ok; listIndexes shows %v", names)
	}
	return works("createIndexes of a_1 and b_1 answered ok twice (the second time both existed); listIndexes shows both")
}

func probeSortArray(ctx context.Context, e *env) finding {
	coll := e.db.Collection("sortarray")
	_, err := coll.InsertOne(ctx, bson.D{{Key: "a", Value: bson.A{
		bson.D{{Key: "k", Value: 1}, {Key: "i", Value: 2}},
		bson.D{{Key: "k", Value: 2}, {Key: "i", Value: 1}},
		bson.D{{Key: "k", Value: 1}, {Key: "i", Value: 1}},
	}}})
	if err != nil {
		return notMeasured("insert the fixture: %v", short(err))
	}
	var out []bson.Raw
	err = aggregate(ctx, coll, mongo.Pipeline{{{Key: "$project", Value: bson.D{
		{Key: "_id", Value: 0},
		{Key: "s", Value: bson.D{{Key: "$sortArray", Value: bson.D{{Key: "input", Value: "$a"}, {Key: "sortBy", Value: bson.D{{Key: "k", Value: -1}, {Key: "i", Value: 1}}}}}}},
	}}}}, &out)
	if err != nil {
		return refused("$sortArray", err)
	}
	if len(out) != 1 {
		return wrong("$project of one document gave %d", len(out))
	}
	var doc struct{ S []struct{ K, I int } }
	if err := bson.Unmarshal(out[0], &doc); err != nil {
		return wrong("$sortArray gave %s: %s", jsonOf(out[0]), short(err))
	}
	got := fmt.Sprintf("$sortArray of [{k: 1, i: 2}, {k: 2, i: 1}, {k: 1, i: 1}] by {k: -1, i: 1} gave %s", jsonOf(out[0]))
	if !slices.Equal(doc.S, []struct{ K, I int }{{2, 1}, {1, 1}, {1, 2}}) {
		return wrong("%s, want k 2, then k 1 by i", got)
	}
	return works("%s", got)
}

// probeWritesWithoutShardKey shards a scratch collection on {k: 1} (on a
// mongos only) and sends a findAndModify by _id alone, which mongos
// accepts from 7.1 (a two-phase write) and refuses before (61); the
// document must come back updated.
func probeWritesWithoutShardKey(ctx context.Context, e *env) finding {
	srv, err := patterns.Capabilities(ctx, e.db.Client())
	if err != nil {
		return notMeasured("hello: %v", short(err))
	}
	if srv.Topology != patterns.Sharded {
		return notMeasured("the deployment is not sharded")
	}
	coll := e.db.Collection("keyless")
	admin := e.db.Client().Database("admin")
	if err := admin.RunCommand(ctx, bson.D{{Key: "enableSharding", Value: e.db.Name()}}).Err(); err != nil {
		return notMeasured("enableSharding: %v", short(err))
	}
	ns := e.db.Name() + "." + coll.Name()
	if err := admin.RunCommand(ctx, bson.D{{Key: "shardCollection", Value: ns}, {Key: "key", Value: bson.D{{Key: "k", Value: 1}}}}).Err(); err != nil {
		return notMeasured("shardCollection %s on {k: 1}: %v", ns, short(err))
	}
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: 7}}); err != nil {
		return notMeasured("insert the fixture: %v", short(err))
	}
	raw, err := coll.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: 1}}}},
		options.FindOneAndUpdate().SetReturnDocument(options.After)).Raw()
	if err != nil {
		return refused("findAndModify by _id on a collection sharded on {k: 1}", err)
	}
	if n, ok := raw.Lookup("n").AsInt64OK(); !ok || n != 1 {
		return wrong("findAndModify by _id on a collection sharded on {k: 1} gave %s, want n: 1", jsonOf(raw))
	}
	return works("findAndModify by _id on a collection sharded on {k: 1} updated %s", jsonOf(raw))
}
