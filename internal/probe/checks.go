package probe

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/srverr"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Behaviour names a server behaviour that some server gets wrong where
// the library guards against it on every server: so it is not a
// [patterns.Feature], whose detection decides a path, and a server that
// gets it wrong is never over-claimed. The probe checks it all the same,
// for code of one's own that relies on it.
type Behaviour string

// The behaviours checked.
const (
	// BehaviourMinOverMissing: $group's $min over documents some of which
	// lack the field is the least of the values present (MongoDB skips
	// missing and null values). FerretDB 2.7 gives null.
	BehaviourMinOverMissing Behaviour = "$group $min over documents some of which lack the field"
	// BehaviourMissingInAccumulatedObject: a field path to a missing field
	// inside an expression object that $group's $max accumulates leaves
	// the field out of the object, as everywhere in MongoDB's expression
	// objects. FerretDB 2.7 sets it to null (a $project of the same object
	// leaves it out).
	BehaviourMissingInAccumulatedObject Behaviour = "a missing field in an expression object that $group's $max accumulates"
	// BehaviourDeleteWhileRewritten: a deleteOne by _id of a document that
	// concurrent updates are rewriting deletes it (MongoDB retries such a
	// write conflict itself). FerretDB 2.7 answers n: 0 and leaves the
	// document in place.
	BehaviourDeleteWhileRewritten Behaviour = "deleteOne of a document concurrent updates are rewriting"
)

// AllBehaviours returns every [Behaviour] that [Run] checks, in a fixed
// order.
func AllBehaviours() []Behaviour {
	return []Behaviour{BehaviourMinOverMissing, BehaviourMissingInAccumulatedObject, BehaviourDeleteWhileRewritten}
}

// checks holds, per behaviour, its check, the feature whose use it
// concerns and how the library guards against it.
var checks = map[Behaviour]struct {
	run     func(context.Context, *env) finding
	feature patterns.Feature
	guard   string
}{
	BehaviourMinOverMissing: {checkMinOverMissing, patterns.FeatureGroupMinMaxAvg,
		"no pipeline of the library groups documents that lack a field with documents that have it: bucket's summaries group measurements and stored summaries apart, and a measurement without a value field is an error"},
	BehaviourMissingInAccumulatedObject: {checkMissingInAccumulatedObject, patterns.FeatureGroupMinMaxAvg,
		"the library reads such a field with {f: null}, which matches a missing field and a null alike (bucket's summary pipelines)"},
	BehaviourDeleteWhileRewritten: {checkDeleteWhileRewritten, "",
		"subset's and outlier's Delete of a parent, subset's Remove of an item and versioning's Delete go through srverr.DeleteOne: a delete that matched nothing is checked with a find of the document and sent again without a limit (which FerretDB 2.x applies) while the document is there"},
}

// checkMinOverMissing groups {v: 2}, {}, {v: 5}: MongoDB's $min and $max
// skip the missing value.
func checkMinOverMissing(ctx context.Context, e *env) finding {
	coll := e.db.Collection("minmissing")
	_, err := coll.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: 2}}, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "_id", Value: 3}, {Key: "v", Value: 5}},
	})
	if err != nil {
		return notMeasured("insert the fixture: %v", short(err))
	}
	var out []bson.Raw
	err = aggregate(ctx, coll, mongo.Pipeline{{{Key: "$group", Value: bson.D{
		{Key: "_id", Value: nil},
		{Key: "mn", Value: bson.D{{Key: "$min", Value: "$v"}}},
		{Key: "mx", Value: bson.D{{Key: "$max", Value: "$v"}}},
	}}}}, &out)
	if err != nil {
		return refused("$group with $min and $max", err)
	}
	if len(out) != 1 {
		return wrong("$group by null of 3 documents gave %d groups", len(out))
	}
	mn, mx := out[0].Lookup("mn"), out[0].Lookup("mx")
	got := fmt.Sprintf("$min and $max of v over {v: 2}, {}, {v: 5} gave %s and %s", valueText(mn), valueText(mx))
	lo, okMin := mn.AsInt64OK()
	hi, okMax := mx.AsInt64OK()
	if !okMin || !okMax || lo != 2 || hi != 5 {
		return wrong("%s, want 2 and 5 (MongoDB skips a missing value)", got)
	}
	return works("%s", got)
}

// checkMissingInAccumulatedObject accumulates {k: $k, v: $v} with $max
// over {k: 1}, one document per group: MongoDB leaves v out.
func checkMissingInAccumulatedObject(ctx context.Context, e *env) finding {
	coll := e.db.Collection("objectmissing")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: 1}}); err != nil {
		return notMeasured("insert the fixture: %v", short(err))
	}
	var out []bson.Raw
	err := aggregate(ctx, coll, mongo.Pipeline{{{Key: "$group", Value: bson.D{
		{Key: "_id", Value: "$_id"},
		{Key: "b", Value: bson.D{{Key: "$max", Value: bson.D{{Key: "k", Value: "$k"}, {Key: "v", Value: "$v"}}}}},
	}}}}, &out)
	if err != nil {
		return refused("$group with $max of an expression object", err)
	}
	if len(out) != 1 {
		return wrong("$group by _id of one document gave %d groups", len(out))
	}
	b, ok := out[0].Lookup("b").DocumentOK()
	got := fmt.Sprintf("$group {$max: {k: $k, v: $v}} of {k: 1} gave %s", valueText(out[0].Lookup("b")))
	if k, okK := b.Lookup("k").AsInt64OK(); !ok || !okK || k != 1 || len(mustElements(b)) != 1 {
		return wrong("%s, want {k: 1} (MongoDB leaves a missing field out of an expression object)", got)
	}
	return works("%s", got)
}

// The concurrent delete check's size: on FerretDB 2.7, 17 of 20 deletes
// under 4 writers matched nothing, so 20 tries see it whatever the load;
// deleteBudget bounds the tries on a slow server.
const (
	deleteTries   = 20
	deleteWriters = 4
	deleteWarmUp  = 8 // updates acknowledged before the delete is sent
	deleteBudget  = 15 * time.Second
)

// checkDeleteWhileRewritten inserts a document, sets deleteWriters
// connections $inc-ing it, and deletes it by _id once deleteWarmUp of
// their updates are acknowledged, while they go on; deleteTries times, or
// until deleteBudget is spent. A delete that answers n: 0 while the
// document stays is wrong; a transient failure is retried, as the
// repositories do.
func checkDeleteWhileRewritten(ctx context.Context, e *env) finding {
	c, err := e.connect(ctx, func(o *options.ClientOptions) { o.SetMaxPoolSize(deleteWriters + 1) })
	if err != nil {
		return notMeasured("%v", short(err))
	}
	defer func() { _ = c.Disconnect(context.WithoutCancel(ctx)) }()
	coll := c.Database(e.db.Name()).Collection("deletes")
	start := time.Now()
	tries, missed := 0, 0
	var firstMiss string
	for i := range deleteTries {
		if i > 0 && time.Since(start) > deleteBudget {
			break
		}
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: i}, {Key: "n", Value: 0}}); err != nil {
			return notMeasured("insert the fixture: %v", short(err))
		}
		n, updates, err := deleteUnderWriters(ctx, coll, i)
		if err != nil {
			return refused("deleteOne by _id under concurrent updates", err)
		}
		left, err := coll.CountDocuments(ctx, bson.D{{Key: "_id", Value: i}})
		if err != nil {
			return notMeasured("count after the delete: %v", short(err))
		}
		tries++
		if n == 1 && left == 0 {
			continue
		}
		missed++
		if firstMiss == "" {
			firstMiss = fmt.Sprintf("answered n: %d after %d updates, the document gone", n, updates)
			if left > 0 {
				firstMiss = fmt.Sprintf("answered n: %d after %d updates and left the document in place", n, updates)
			}
		}
	}
	got := fmt.Sprintf("deleteOne by _id of a document %d connections were $inc-ing", deleteWriters)
	if missed > 0 {
		return wrong("%s did not delete it in %d of %d tries (the first %s)", got, missed, tries, firstMiss)
	}
	return works("%s deleted it in %d of %d tries", got, tries, tries)
}

// deleteUnderWriters deletes the document id of coll while deleteWriters
// goroutines $inc it, once deleteWarmUp of their updates are
// acknowledged, and returns the delete's count and how many updates were
// acknowledged before it answered. The writers have stopped when it
// returns, each after the answer to its last update: an update abandoned
// by a cancelled context would still run on the server, after the probe
// has dropped its scratch database (and FerretDB 1.x's update creates
// the collection, and with it the database, again).
func deleteUnderWriters(ctx context.Context, coll *mongo.Collection, id int) (n, updates int64, err error) {
	var stopped atomic.Bool
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stopped.Store(true)
	var acked atomic.Int64
	warm := make(chan struct{})
	var once sync.Once
	for range deleteWriters {
		wg.Go(func() {
			for !stopped.Load() && ctx.Err() == nil {
				res, err := coll.UpdateByID(ctx, id, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}})
				// A failure, or no match, also ends the warm-up: the
				// delete is sent all the same.
				if err != nil || res.MatchedCount == 0 || acked.Add(1) >= deleteWarmUp {
					once.Do(func() { close(warm) })
				}
			}
		})
	}
	select {
	case <-warm:
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	}
	var res *mongo.DeleteResult
	err = srverr.Retry(ctx, func() (err error) {
		res, err = coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}})
		return err
	})
	if err != nil {
		return 0, acked.Load(), err
	}
	return res.DeletedCount, acked.Load(), nil
}

// valueText is v as a reader writes it: a number as a number, null,
// "missing" when there is none, anything else as extended JSON.
func valueText(v bson.RawValue) string {
	if v.Type == 0 {
		return "missing"
	}
	if n, ok := v.AsInt64OK(); ok {
		return strconv.FormatInt(n, 10)
	}
	if doc, ok := v.DocumentOK(); ok {
		return jsonOf(doc)
	}
	return v.String()
}
