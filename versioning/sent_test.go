package versioning_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/versioning"
)

// recorder keeps the commands a client sends to one database, as the
// driver encoded them, in relaxed extended JSON without the fields the
// driver adds (session, cluster time and the like) and with every
// ObjectID written <oid>.
type recorder struct {
	db   string
	mu   sync.Mutex
	sent []string
}

var oidRE = regexp.MustCompile(`\{"\$oid":"[0-9a-f]{24}"\}`)

func (rec *recorder) started(_ context.Context, e *event.CommandStartedEvent) {
	if e.DatabaseName != rec.db {
		return
	}
	var cmd bson.D
	if err := bson.Unmarshal(e.Command, &cmd); err != nil {
		panic(err)
	}
	cmd = slices.DeleteFunc(cmd, func(f bson.E) bool {
		switch f.Key {
		case "lsid", "$db", "$clusterTime", "txnNumber", "$readPreference", "readConcern", "writeConcern", "maxTimeMS", "apiVersion":
			return true
		}
		return false
	})
	b, err := bson.MarshalExtJSON(cmd, false, false)
	if err != nil {
		panic(err)
	}
	rec.mu.Lock()
	rec.sent = append(rec.sent, oidRE.ReplaceAllString(string(b), "<oid>"))
	rec.mu.Unlock()
}

// take returns the commands recorded since the last call.
func (rec *recorder) take() []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	out := rec.sent
	rec.sent = nil
	return out
}

// TestCommandsSentPerPlan pins the commands every operation sends under
// each plan of the servers the library knows, as the driver encodes them:
// recorded by a command monitor of a client of the test's own. Every plan
// runs here, native ones included, whatever the server in use: the
// subject is what the client sends (a pipeline update the driver could
// not encode would fail here before reaching any server); what the server
// answers is not (FerretDB 1.x refuses a pipeline update and arrayFilters,
// and the test ignores those errors).
func TestCommandsSentPerPlan(t *testing.T) {
	servers := mongotest.KnownServers()
	plans := []struct {
		name string
		plan versioning.Plan
	}{
		{"MongoDB", versioning.PlanFor(servers["MongoDB 8 replica set"])},
		{"FerretDB 2.7", versioning.PlanFor(servers["FerretDB 2.7"])},
		{"FerretDB 1.24", versioning.PlanFor(servers["FerretDB 1.24"])},
	}
	require.Equal(t, versioning.PlanFor(mongotest.Portable()), plans[2].plan, "FerretDB 1.x takes the portable plan")
	require.Equal(t, versioning.PlanFor(mongotest.Native()), plans[0].plan)
	for _, pc := range plans {
		t.Run(pc.name, func(t *testing.T) {
			ctx := context.Background()
			name := mongotest.DB(t).Name() // dropped when the test ends
			rec := &recorder{db: name}
			client := mongotest.Connect(t, mongotest.URI(), &event.CommandMonitor{Started: rec.started}, nil)
			db := client.Database(name)
			coll := db.Collection("users")
			seed(t, coll,
				// c holds the array that the arrayFilters update sets
				// elements of: MongoDB refuses one over a missing array.
				append(v3("c", "Ada", "Lovelace", "ada@example.com"), bson.E{Key: "tags", Value: bson.A{"x", "y"}}),
				v1("o", "Alan Turing", "alan@example.com"),
				v2("o2", "Grace Hopper", "grace@example.com"),
				v1("m1", "Edsger Dijkstra", "e@example.com"), v1("m2", "Barbara Liskov", "b@example.com"), v1("m3", "John Backus", "j@example.com"),
			)
			r := newUsers(t, db, pc.plan)
			rec.take()

			var got strings.Builder
			run := func(op string, f func() error) {
				err := f()
				fmt.Fprintf(&got, "%s\n", op)
				for _, c := range rec.take() {
					fmt.Fprintf(&got, "\t%s\n", c)
				}
				if pc.plan == versioning.PlanFor(mongotest.Server()) || pc.plan == versioning.PlanFor(mongotest.Portable()) {
					// The server in use takes this plan: it works, but
					// for what the plan refuses.
					if !errors.Is(err, patterns.ErrUnsupported) {
						require.NoError(t, err, op)
					}
				}
			}
			run("Get current", func() error { _, err := r.Get(ctx, "c"); return err })
			run("Get old", func() error { _, err := r.Get(ctx, "o"); return err })
			run("Insert", func() error { _, err := r.Insert(ctx, User{ID: "i", First: "Ida"}); return err })
			run("Replace", func() error { return r.Replace(ctx, "i", User{ID: "i", First: "Ida", Last: "Rhodes"}) })
			run("Delete", func() error { return r.Delete(ctx, "i") })
			run("Update current", func() error { return r.Update(ctx, "c", incVisits) })
			run("Update old", func() error { return r.Update(ctx, "o2", incVisits) })
			run("Update pipeline", func() error {
				return r.Update(ctx, "c", mongo.Pipeline{{{Key: "$set", Value: bson.D{{Key: "visits", Value: bson.D{{Key: "$add", Value: bson.A{"$visits", 1}}}}}}}})
			})
			run("Update arrayFilters", func() error {
				return r.Update(ctx, "c", bson.D{{Key: "$set", Value: bson.D{{Key: "tags.$[t]", Value: "z"}}}},
					options.UpdateOne().SetArrayFilters([]any{bson.D{{Key: "t", Value: "x"}}}))
			})
			run("MigrateAll", func() error {
				_, err := r.MigrateAll(ctx, versioning.MigrateOptions{BatchSize: 2})
				return err
			})
			run("Stats", func() error { _, err := r.Stats(ctx); return err })
			want := wantSent(pc.plan)
			if got.String() != want {
				mongotest.Detail(t, "sent:\n%s", got.String())
			}
			require.Equal(t, strings.Split(want, "\n"), strings.Split(got.String(), "\n"))
		})
	}
}

// The commands each operation of TestCommandsSentPerPlan sends, by what
// the plan says: an operation's heading, then its commands.

// sentReadsAndWrites: the same on every plan.
const sentReadsAndWrites = `Get current
	{"find":"users","filter":{"_id":"c"},"limit":1,"singleBatch":true}
Get old
	{"find":"users","filter":{"_id":"o"},"limit":1,"singleBatch":true}
	{"update":"users","ordered":true,"updates":[{"q":{"_id":"o","schemaVersion":{"$exists":false},"_rev":{"$exists":false}},"u":{"_id":"o","first":"Alan","last":"Turing","email":"alan@example.com","locale":"en","visits":0,"schemaVersion":3,"_rev":<oid>}}]}
Insert
	{"insert":"users","ordered":true,"documents":[{"_id":"i","first":"Ida","last":"","email":"","locale":"","visits":0,"schemaVersion":3,"_rev":<oid>}]}
Replace
	{"update":"users","ordered":true,"updates":[{"q":{"_id":"i","schemaVersion":{"$not":{"$gt":3}}},"u":{"_id":"i","first":"Ida","last":"Rhodes","email":"","locale":"","visits":0,"schemaVersion":3,"_rev":<oid>}}]}
Delete
	{"delete":"users","ordered":true,"deletes":[{"q":{"_id":"i"},"limit":1}]}
`

// sentUpdates where the server refuses documents past 16 MiB
// (ServerSizeLimit): an update of a current document is one update; of
// an old one, an update that misses, a find, the write-back and the update
// again.
const sentUpdates = `Update current
	{"update":"users","ordered":true,"updates":[{"q":{"_id":"c","schemaVersion":{"$eq":3,"$not":{"$type":"array"}}},"u":{"$inc":{"visits":1},"$set":{"schemaVersion":3,"_rev":<oid>}}}]}
Update old
	{"update":"users","ordered":true,"updates":[{"q":{"_id":"o2","schemaVersion":{"$eq":3,"$not":{"$type":"array"}}},"u":{"$inc":{"visits":1},"$set":{"schemaVersion":3,"_rev":<oid>}}}]}
	{"find":"users","filter":{"_id":"o2"},"limit":1,"singleBatch":true}
	{"update":"users","ordered":true,"updates":[{"q":{"_id":"o2","schemaVersion":{"$eq":2,"$not":{"$type":"array"}},"_rev":{"$exists":false}},"u":{"_id":"o2","first":"Grace","last":"Hopper","email":"grace@example.com","locale":"en","visits":0,"schemaVersion":3,"_rev":<oid>}}]}
	{"update":"users","ordered":true,"updates":[{"q":{"_id":"o2","schemaVersion":{"$eq":3,"$not":{"$type":"array"}}},"u":{"$inc":{"visits":1},"$set":{"schemaVersion":3,"_rev":<oid>}}}]}
`

// sentCheckedUpdates where it does not: a find, then a findAndModify
// guarded on what was read (the write-back between them for an old
// document), returning the result to size it.
const sentCheckedUpdates = `Update current
	{"find":"users","filter":{"_id":"c"},"limit":1,"singleBatch":true}
	{"findAndModify":"users","new":true,"query":{"_id":"c","schemaVersion":{"$eq":3,"$not":{"$type":"array"}},"_rev":{"$exists":false}},"update":{"$inc":{"visits":1},"$set":{"schemaVersion":3,"_rev":<oid>}}}
Update old
	{"find":"users","filter":{"_id":"o2"},"limit":1,"singleBatch":true}
	{"update":"users","ordered":true,"updates":[{"q":{"_id":"o2","schemaVersion":{"$eq":2,"$not":{"$type":"array"}},"_rev":{"$exists":false}},"u":{"_id":"o2","first":"Grace","last":"Hopper","email":"grace@example.com","locale":"en","visits":0,"schemaVersion":3,"_rev":<oid>}}]}
	{"findAndModify":"users","new":true,"query":{"_id":"o2","schemaVersion":{"$eq":3,"$not":{"$type":"array"}},"_rev":{"$eq":<oid>}},"update":{"$inc":{"visits":1},"$set":{"schemaVersion":3,"_rev":<oid>}}}
`

// sentPipeline and sentArrayFilters where the plan has them; elsewhere
// they are refused before anything is sent.
const (
	sentPipeline = `Update pipeline
	{"update":"users","ordered":true,"updates":[{"q":{"_id":"c","schemaVersion":{"$eq":3,"$not":{"$type":"array"}}},"u":[{"$set":{"visits":{"$add":["$visits",1]}}},{"$set":{"schemaVersion":3,"_rev":<oid>}}]}]}
`
	sentArrayFilters = `Update arrayFilters
	{"update":"users","ordered":true,"updates":[{"q":{"_id":"c","schemaVersion":{"$eq":3,"$not":{"$type":"array"}}},"u":{"$set":{"tags.$[t]":"z","schemaVersion":3,"_rev":<oid>}},"arrayFilters":[{"t":"x"}]}]}
`
)

// sentBulkMigrate: MigrateAll reads pages of two in _id order, the next
// one after the last _id read (and after every type sorted after a
// string), and writes a page per bulk write (BulkMigrate), update commands
// of two statements, then one; a short page ends the scan, and one find
// of the greatest _id checks that none of a type sorted after timestamps
// is left.
// sentEachMigrate: the same pages, one replaceOne per document.
const (
	sentBulkMigrate = `MigrateAll
	{"find":"users","batchSize":3,"filter":{"schemaVersion":{"$not":{"$gte":3}}},"limit":2,"sort":{"_id":1}}
	{"update":"users","ordered":false,"updates":[{"q":{"_id":"m1","schemaVersion":{"$exists":false},"_rev":{"$exists":false}},"u":{"_id":"m1","first":"Edsger","last":"Dijkstra","email":"e@example.com","locale":"en","visits":0,"schemaVersion":3,"_rev":<oid>}},{"q":{"_id":"m2","schemaVersion":{"$exists":false},"_rev":{"$exists":false}},"u":{"_id":"m2","first":"Barbara","last":"Liskov","email":"b@example.com","locale":"en","visits":0,"schemaVersion":3,"_rev":<oid>}}]}
	{"find":"users","batchSize":3,"filter":{"$and":[{"schemaVersion":{"$not":{"$gte":3}}},{"$or":[{"_id":{"$gt":"m2"}},{"_id":{"$type":["object","binData","objectId","bool","date","timestamp"]}}]}]},"limit":2,"sort":{"_id":1}}
	{"update":"users","ordered":false,"updates":[{"q":{"_id":"m3","schemaVersion":{"$exists":false},"_rev":{"$exists":false}},"u":{"_id":"m3","first":"John","last":"Backus","email":"j@example.com","locale":"en","visits":0,"schemaVersion":3,"_rev":<oid>}}]}
	{"find":"users","batchSize":2,"filter":{"schemaVersion":{"$not":{"$gte":3}}},"limit":1,"projection":{"_id":1},"sort":{"_id":-1}}
`
	sentEachMigrate = `MigrateAll
	{"find":"users","batchSize":3,"filter":{"schemaVersion":{"$not":{"$gte":3}}},"limit":2,"sort":{"_id":1}}
	{"update":"users","ordered":true,"updates":[{"q":{"_id":"m1","schemaVersion":{"$exists":false},"_rev":{"$exists":false}},"u":{"_id":"m1","first":"Edsger","last":"Dijkstra","email":"e@example.com","locale":"en","visits":0,"schemaVersion":3,"_rev":<oid>}}]}
	{"update":"users","ordered":true,"updates":[{"q":{"_id":"m2","schemaVersion":{"$exists":false},"_rev":{"$exists":false}},"u":{"_id":"m2","first":"Barbara","last":"Liskov","email":"b@example.com","locale":"en","visits":0,"schemaVersion":3,"_rev":<oid>}}]}
	{"find":"users","batchSize":3,"filter":{"$and":[{"schemaVersion":{"$not":{"$gte":3}}},{"$or":[{"_id":{"$gt":"m2"}},{"_id":{"$type":["object","binData","objectId","bool","date","timestamp"]}}]}]},"limit":2,"sort":{"_id":1}}
	{"update":"users","ordered":true,"updates":[{"q":{"_id":"m3","schemaVersion":{"$exists":false},"_rev":{"$exists":false}},"u":{"_id":"m3","first":"John","last":"Backus","email":"j@example.com","locale":"en","visits":0,"schemaVersion":3,"_rev":<oid>}}]}
	{"find":"users","batchSize":2,"filter":{"schemaVersion":{"$not":{"$gte":3}}},"limit":1,"projection":{"_id":1},"sort":{"_id":-1}}
`
)

// sentStats: the same on every plan.
const sentStats = `Stats
	{"aggregate":"users","pipeline":[{"$group":{"_id":"$schemaVersion","n":{"$sum":1}}}],"cursor":{}}
`

// wantSent is what TestCommandsSentPerPlan expects a repository taking
// plan p to send.
func wantSent(p versioning.Plan) string {
	s := sentReadsAndWrites
	if p.ServerSizeLimit {
		s += sentUpdates
	} else {
		s += sentCheckedUpdates
	}
	if p.PipelineUpdates {
		s += sentPipeline
	} else {
		s += "Update pipeline\n"
	}
	if p.ArrayFilters {
		s += sentArrayFilters
	} else {
		s += "Update arrayFilters\n"
	}
	if p.BulkMigrate {
		s += sentBulkMigrate
	} else {
		s += sentEachMigrate
	}
	return s + sentStats
}

// TestShardKeyIsInEveryWriteAfterARead: with Config.ShardKey, the writes
// that follow a read of the document (Get's write-back, Update's
// write-back and guarded update, MigrateAll's writes) carry the shard
// key's value as read, on every plan, and the operations still work.
func TestShardKeyIsInEveryWriteAfterARead(t *testing.T) {
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, p versioning.Plan) {
		ctx := context.Background()
		name := mongotest.DB(t).Name()
		rec := &recorder{db: name}
		db := mongotest.Connect(t, mongotest.URI(), &event.CommandMonitor{Started: rec.started}, nil).Database(name)
		tenant := func(d bson.D) bson.D { return append(d, bson.E{Key: "tenant", Value: "acme"}) }
		seed(t, db.Collection("users"), tenant(v1("g", "Ada Lovelace", "ada@example.com")), tenant(v2("u", "Alan Turing", "alan@example.com")),
			tenant(v1("m", "Grace Hopper", "grace@example.com")))
		r := newUsers(t, db, p, func(c *versioning.Config) { c.ShardKey = []string{"tenant"} })
		rec.take()
		_, err := r.Get(ctx, "g")
		require.NoError(t, err)
		require.NoError(t, r.Update(ctx, "u", incVisits))
		res, err := r.MigrateAll(ctx, versioning.MigrateOptions{})
		require.NoError(t, err)
		require.Equal(t, versioning.MigrateResult{Migrated: 1}, res)
		afterRead := 0
		for _, c := range rec.take() {
			switch {
			case strings.HasPrefix(c, `{"find"`), strings.HasPrefix(c, `{"update":"users","ordered":true,"updates":[{"q":{"_id":"u","schemaVersion":{"$eq":3`):
				continue // reads, and the native Update's first try, which follows no read
			}
			require.Contains(t, c, `"tenant":{"$eq":"acme"}`, c)
			afterRead++
		}
		require.Positive(t, afterRead)
		u, err := r.Get(ctx, "u")
		require.NoError(t, err)
		require.Equal(t, 1, u.Visits)
	})
}
