package versioning_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/faults"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/internal/shard"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/versioning"
)

// The tests of this file break the connection before and inside each
// command of every operation that sends more than one (and of the
// one-command writes, for what their callers see), under each plan the
// server runs, retry the operation on a healthy connection and check the
// final state exactly: every document at the current version when the
// operation migrates, each migration step applied once to what is stored
// (the traced migrations record it in the document), no write lost, none
// applied twice; and what the caller saw: a network error or a timeout,
// never an error that claims an outcome (not found, newer, conflict) nor
// a nil error with a partial effect.

// traceStep wraps a migration step so that it records itself in the
// document's "applied" list (TracedUser.Applied): a stored document shows
// each step that produced it, once.
func traceStep(step string, up func(*versioning.Doc) error) func(*versioning.Doc) error {
	return func(d *versioning.Doc) error {
		applied, _ := d.Get("applied")
		list, _ := applied.(bson.A)
		d.Set("applied", append(slices.Clone(list), step))
		return up(d)
	}
}

// tracedUsers returns the users repository over db, with traced
// migrations, taking plan p. The fault tests build it inside Op from the
// database Op is given (through the faulty client or the healthy one):
// New sends nothing.
func tracedUsers(db *mongo.Database, p versioning.Plan, shardKey ...string) *versioning.Repo[TracedUser] {
	r, err := versioning.New[TracedUser](db, versioning.Config{Collection: "users", Current: 3, Migrations: []versioning.Migration{
		{From: 1, Up: traceStep("1>2", renameMail)},
		{From: 2, Up: traceStep("2>3", splitName)},
	}, ShardKey: shardKey})
	if err != nil {
		panic(err) // the configuration is constant
	}
	versioning.ForcePlan(r, p)
	return r
}

// The documents of the fault tests, as stored before the operation: old
// ones (v1 without a version field, v2), a current one written by a Repo,
// and one newer than this code. Each holds visits, so that a migration
// that lost a field, or an update applied twice, shows.
func oldV1(id, name, mail string, visits int32) bson.D {
	return append(v1(id, name, mail), bson.E{Key: "visits", Value: visits})
}

func oldV2(id, name, email string, visits int32) bson.D {
	return append(v2(id, name, email), bson.E{Key: "visits", Value: visits})
}

func currentV3(id, first, last string, visits int32) bson.D {
	return bson.D{{Key: "_id", Value: id}, {Key: "first", Value: first}, {Key: "last", Value: last}, {Key: "email", Value: "x@example.com"},
		{Key: "locale", Value: "fr"}, {Key: "visits", Value: visits}, {Key: "applied", Value: bson.A{}},
		{Key: "schemaVersion", Value: int32(3)}, {Key: "_rev", Value: bson.NewObjectID()}}
}

func newerV4(id string) bson.D {
	return bson.D{{Key: "_id", Value: id}, {Key: "schemaVersion", Value: int32(4)}, {Key: "fullName", Value: "From The Future"}, {Key: "_rev", Value: bson.NewObjectID()}}
}

// migratedUser is what an old document becomes at version 3.
func migratedUser(id, first, last, email string, visits int, applied ...string) TracedUser {
	return TracedUser{User: User{ID: id, First: first, Last: last, Email: email, Locale: "en", Visits: visits}, Applied: applied}
}

// usersFields are the fields of a stored user at version 3.
var usersFields = []string{"_id", "_rev", "applied", "email", "first", "last", "locale", "schemaVersion", "visits"}

// requireUsers checks that the users collection of db holds exactly the
// documents want (migrated users, each at version 3 with a revision and
// no other field) and untouched (raw documents that must be stored byte
// for byte as they are).
func requireUsers(t *testing.T, db *mongo.Database, want map[string]TracedUser, untouched ...bson.Raw) {
	t.Helper()
	ctx := context.Background()
	cur, err := db.Collection("users").Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	require.NoError(t, err)
	var raws []bson.Raw
	require.NoError(t, cur.All(ctx, &raws))
	keep := map[string]bson.Raw{}
	for _, raw := range untouched {
		keep[raw.Lookup("_id").StringValue()] = raw
	}
	var ids []string
	for _, raw := range raws {
		id := raw.Lookup("_id").StringValue()
		ids = append(ids, id)
		if u, ok := keep[id]; ok {
			require.Equal(t, u, raw, "%s is untouched", id)
			continue
		}
		w, ok := want[id]
		require.True(t, ok, "%s is stored: %s", id, raw)
		// tenant is the shard-key field of the keyed fault cases, which
		// TracedUser lacks and Replace keeps.
		ks := slices.DeleteFunc(keys(t, raw), func(k string) bool { return k == "tenant" })
		slices.Sort(ks)
		require.Equal(t, usersFields, ks, "%s: the fields of version 3: %s", id, raw)
		require.Equal(t, bson.TypeInt32, raw.Lookup("schemaVersion").Type)
		require.EqualValues(t, 3, raw.Lookup("schemaVersion").Int32(), "%s is at the current version", id)
		require.Equal(t, bson.TypeObjectID, raw.Lookup("_rev").Type, "%s has a revision", id)
		var got TracedUser
		require.NoError(t, bson.Unmarshal(raw, &got))
		if got.Applied == nil {
			got.Applied = []string{}
		}
		if w.Applied == nil {
			w.Applied = []string{}
		}
		require.Equal(t, w, got, "%s: its value, each migration step once", id)
	}
	wantIDs := slices.Sorted(maps.Keys(want))
	wantIDs = append(wantIDs, slices.Collect(maps.Keys(keep))...)
	slices.Sort(wantIDs)
	require.Equal(t, wantIDs, ids, "nothing lost, nothing added")
}

// seedRaw stores docs in the users collection of db and returns them as
// stored.
func seedRaw(t *testing.T, db *mongo.Database, docs ...bson.D) []bson.Raw {
	t.Helper()
	coll := db.Collection("users")
	out := make([]bson.Raw, len(docs))
	for i, d := range docs {
		_, err := coll.InsertOne(context.Background(), d)
		require.NoError(t, err)
		out[i] = stored(t, coll, d[0].Value)
	}
	return out
}

// calls records what the caller of an operation saw at each call (the
// faulty one, then the retry), for Check.
type calls[V any] struct {
	mu   sync.Mutex
	seen []call[V]
}

type call[V any] struct {
	v   V
	err error
}

// add records a call's result and returns its error.
func (c *calls[V]) add(v V, err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen = append(c.seen, call[V]{v, err})
	return err
}

// requireSaw checks what the caller of op saw: every call but the last
// failed with a fault's error (see requireFaultError), the last one
// returned want (nil, or an error matching it with errors.Is), and check
// accepts the value of every call that returned no fault's error.
func (c *calls[V]) requireSaw(t *testing.T, op string, want error, check func(v V)) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	require.NotEmpty(t, c.seen)
	require.LessOrEqual(t, len(c.seen), 2, "the operation, then its retry")
	for i, s := range c.seen {
		if i < len(c.seen)-1 {
			requireFaultError(t, op, s.err)
			continue
		}
		if want == nil {
			require.NoError(t, s.err, "the last call succeeds")
		} else {
			require.ErrorIs(t, s.err, want, "the last call reports what happened")
		}
		if check != nil {
			check(s.v)
		}
	}
}

// requireFaultError checks the error of an operation struck by a fault:
// it names the operation, says the network failed or the time ran out,
// and claims no outcome: not found, a newer document, a conflict, a
// failed migration, a document too large, bad input or a missing feature
// would each be a lie about what the server holds.
func requireFaultError(t *testing.T, op string, err error) {
	t.Helper()
	faults.Saw(t, "versioning: "+op+": ", err, versioning.ErrNewerSchema, versioning.ErrMigration)
}

// TestFaults breaks every operation at every step (the groups below:
// Get and Find of old documents, Update, Replace, Insert and Delete,
// MigrateAll, and the undo of an Update past 16 MiB), the groups side by
// side (faults.Concurrently), each through a proxy of its own: they spend
// most of their time waiting on stalls, and as parallel tests of their
// own no more than -parallel (the number of cores) of them waited at a
// time.
func TestFaults(t *testing.T) {
	t.Parallel()
	groups := []struct {
		name string
		run  func(t *testing.T)
	}{{"GetOldDocument", faultsGetOldDocument}, {"FindOldDocuments", faultsFindOldDocuments}, {"Update", faultsUpdate}, {"Replace", faultsReplace}, {"InsertAndDelete", faultsInsertAndDelete}, {"MigrateAll", faultsMigrateAll}, {"UpdatePast16MiB", faultsUpdatePast16MiB}}
	faults.Concurrently(t, len(groups), func(i int) string { return groups[i].name }, func(t *testing.T, i int) { groups[i].run(t) })
}

var (
	adaV1   = func() bson.D { return oldV1("a", "Ada Lovelace", "ada@example.com", 7) }
	adaWant = migratedUser("a", "Ada", "Lovelace", "ada@example.com", 7, "1>2", "2>3")
)

// faultsGetOldDocument breaks Get of an old document at each step
// (the find, the write-back): the caller sees the document migrated or an
// error, and after the retry it is stored at the current version, each
// step applied once.
func faultsGetOldDocument(t *testing.T) {
	p := faults.New(t)
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, plan versioning.Plan) {
		faults.Run(t, p, faults.Case[*calls[TracedUser]]{
			Reuse: true,
			Prepare: func(t *testing.T, db *mongo.Database) *calls[TracedUser] {
				seedRaw(t, db, adaV1())
				return &calls[TracedUser]{}
			},
			Op: func(ctx context.Context, db *mongo.Database, c *calls[TracedUser]) error {
				return c.add(tracedUsers(db, plan).Get(ctx, "a"))
			},
			Check: func(t *testing.T, db *mongo.Database, c *calls[TracedUser]) {
				requireUsers(t, db, map[string]TracedUser{"a": adaWant})
				c.requireSaw(t, "Get", nil, func(u TracedUser) { require.Equal(t, adaWant, u) })
			},
		})
	})
}

// threeOld are the old documents of the Find and MigrateAll fault tests,
// as stored (versions 1, 2 and 1), and threeOldWant what they migrate to.
func threeOld() []bson.D {
	return []bson.D{adaV1(), oldV2("b", "Alan Turing", "alan@example.com", 3), oldV1("c", "Grace Hopper", "grace@example.com", 5)}
}

var threeOldWant = map[string]TracedUser{
	"a": adaWant,
	"b": migratedUser("b", "Alan", "Turing", "alan@example.com", 3, "2>3"),
	"c": migratedUser("c", "Grace", "Hopper", "grace@example.com", 5, "1>2", "2>3"),
}

// found is what a call of Find yielded: the documents and the errors.
type found struct {
	docs []TracedUser
	errs []error
}

// faultsFindOldDocuments breaks Find over three old documents (read
// in pages of two: a find per page), at each step: each find, each
// write-back. Every document yielded is the migrated one;
// after the retry all are stored at the current version, each step once.
func faultsFindOldDocuments(t *testing.T) {
	p := faults.New(t)
	want := threeOldWant
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, plan versioning.Plan) {
		faults.Run(t, p, faults.Case[*calls[found]]{
			Reuse: true,
			Prepare: func(t *testing.T, db *mongo.Database) *calls[found] {
				seedRaw(t, db, threeOld()...)
				return &calls[found]{}
			},
			Op: func(ctx context.Context, db *mongo.Database, c *calls[found]) error {
				var f found
				for u, err := range tracedUsers(db, plan).Find(ctx, nil, options.Find().SetBatchSize(2).SetSort(bson.D{{Key: "_id", Value: 1}})) {
					if err != nil {
						f.errs = append(f.errs, err)
						continue
					}
					f.docs = append(f.docs, u)
				}
				return c.add(f, errors.Join(f.errs...))
			},
			Check: func(t *testing.T, db *mongo.Database, c *calls[found]) {
				requireUsers(t, db, want)
				c.mu.Lock()
				for _, s := range c.seen {
					for _, err := range s.v.errs {
						requireFaultError(t, "Find", err)
					}
					seen := map[string]bool{}
					for _, u := range s.v.docs {
						require.False(t, seen[u.ID], "%s yielded once", u.ID)
						seen[u.ID] = true
						require.Equal(t, want[u.ID], u, "what Find yields is the migrated document")
					}
				}
				last := c.seen[len(c.seen)-1].v
				c.mu.Unlock()
				require.Len(t, last.docs, len(want), "the last call yields every document")
			},
		})
	})
}

// updated is what Check needs of an Update struck by a fault: the
// document as seeded, and as the struck call left it (read by the retry).
type updated struct {
	calls[struct{}]
	seeded, between bson.Raw
}

// incLocale is the update of the fault tests: an increment and a $set,
// which must land together, once per call that lands.
var incLocale = bson.D{{Key: "$inc", Value: bson.D{{Key: "visits", Value: 1}}}, {Key: "$set", Value: bson.D{{Key: "locale", Value: "de"}}}}

// faultsUpdate breaks Update at each step: of an old document (the
// update that misses, the read, the write-back, the update again where
// the server limits sizes; the read, the write-back, the findAndModify
// elsewhere) and, where Update checks sizes itself, of a current one (the
// read, the findAndModify). When the struck call fails, the document
// holds its update whole or not at all, never on an old shape; the retry
// applies it once more: an increment is not idempotent, so the final
// count is the seed plus one per call that landed, exactly.
func faultsUpdate(t *testing.T) {
	p := faults.New(t)
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, plan versioning.Plan) {
		type fixture struct {
			seed func() bson.D
			want TracedUser // the document before the update, migrated
		}
		cases := map[string]fixture{"old": {adaV1, adaWant}}
		if !plan.ServerSizeLimit {
			cases["current"] = fixture{func() bson.D { return currentV3("a", "Ada", "Lovelace", 7) },
				TracedUser{User: User{ID: "a", First: "Ada", Last: "Lovelace", Email: "x@example.com", Locale: "fr", Visits: 7}}}
		}
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				op := func(ctx context.Context, db *mongo.Database, u *updated) error {
					return u.add(struct{}{}, tracedUsers(db, plan).Update(ctx, "a", incLocale))
				}
				faults.Run(t, p, faults.Case[*updated]{
					Reuse: true,
					Prepare: func(t *testing.T, db *mongo.Database) *updated {
						return &updated{seeded: seedRaw(t, db, tc.seed())[0]}
					},
					Op: op,
					Retry: func(ctx context.Context, db *mongo.Database, u *updated) error {
						raw, err := db.Collection("users").FindOne(ctx, bson.D{{Key: "_id", Value: "a"}}).Raw()
						if err != nil {
							return err
						}
						u.between = raw
						return op(ctx, db, u)
					},
					Check: func(t *testing.T, db *mongo.Database, u *updated) {
						want := tc.want
						want.Locale = "de"
						want.Visits++
						if u.between != nil {
							// What the struck call left: its update whole
							// or not at all, and only on the current shape.
							if v, err := u.between.LookupErr("schemaVersion"); err != nil || v.Int32() != 3 {
								require.Equal(t, u.seeded, u.between, "an old document is untouched")
							}
							var got TracedUser
							require.NoError(t, bson.Unmarshal(u.between, &got))
							applied := got.Visits == tc.want.Visits+1
							require.Equal(t, applied, got.Locale == "de", "the increment and the $set land together: %s", u.between)
							if applied {
								want.Visits++
							} else {
								require.Equal(t, tc.want.Visits, got.Visits, "the update applied at most once")
							}
						}
						requireUsers(t, db, map[string]TracedUser{"a": want})
						u.requireSaw(t, "Update", nil, nil)
					},
				})
			})
		}
	})
}

// replaced is what Check needs of a Replace: the documents as seeded.
type replaced struct {
	calls[struct{}]
	seeded []bson.Raw
	// routes counts the commands of the struck call and of its retry.
	routes *mongotest.Counter
}

// faultsReplace breaks Replace at each step: its replaceOne when it
// matches (an old document, replaced by the current shape), and on its
// miss path the replaceOne that matches nothing and the find that tells
// why: a document newer than this code (ErrNewerSchema, untouched) or no
// document (ErrNotFound, nothing created). A fault's error never claims
// either outcome; the retry reports it. The keyed cases run the same on a
// collection sharded on {tenant: 1, _id: 1}, named by Config.ShardKey,
// and route every command of the struck call and of its retry on each
// cluster of shard.Clusters: nothing refused (issue 33).
func faultsReplace(t *testing.T) {
	p := faults.New(t)
	grace := TracedUser{User: User{ID: "a", First: "Grace", Last: "Hopper", Email: "grace@example.com", Locale: "en", Visits: 9}, Applied: []string{}}
	cases := map[string]struct {
		seed      []bson.D
		want      error                 // what the last call returns
		replaced  map[string]TracedUser // what Replace stores
		untouched int                   // the seeded documents that must stay as they are (the first n)
		keyed     bool                  // sharded on {tenant: 1, _id: 1}, Config.ShardKey ["tenant"]
	}{
		"old":     {seed: []bson.D{adaV1()}, replaced: map[string]TracedUser{"a": grace}},
		"newer":   {seed: []bson.D{newerV4("a")}, want: versioning.ErrNewerSchema, untouched: 1},
		"missing": {seed: []bson.D{oldV1("b", "Alan Turing", "alan@example.com", 3)}, want: patterns.ErrNotFound, untouched: 1},
	}
	tenant := func(d bson.D) bson.D { return append(d, bson.E{Key: "tenant", Value: "acme"}) }
	// (newer sends what missing sends: a replaceOne that matches
	// nothing, then the find that tells why.)
	for _, name := range []string{"old", "missing"} {
		tc := cases[name]
		tc.keyed, tc.seed = true, []bson.D{tenant(tc.seed[0])}
		cases[name+", keyed"] = tc
	}
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, plan versioning.Plan) {
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				faults.Run(t, p, faults.Case[*replaced]{
					Reuse: true,
					Prepare: func(t *testing.T, db *mongo.Database) *replaced {
						return &replaced{seeded: seedRaw(t, db, tc.seed...), routes: mongotest.NewCounter(t, db)}
					},
					Op: func(ctx context.Context, db *mongo.Database, c *replaced) error {
						var key []string
						if tc.keyed {
							key = []string{"tenant"}
						}
						err := c.add(struct{}{}, tracedUsers(db, plan, key...).Replace(ctx, "a", grace))
						if tc.want != nil && errors.Is(err, tc.want) {
							return nil // the outcome expected, recorded for Check
						}
						return err
					},
					Check: func(t *testing.T, db *mongo.Database, c *replaced) {
						if tc.keyed {
							require.NotZero(t, c.routes.N(), "commands to route")
							for _, cluster := range shard.Clusters(map[string]shard.Key{
								"users": shard.MustParseKey(bson.D{{Key: "tenant", Value: 1}, {Key: "_id", Value: 1}}),
							}) {
								c.routes.RequireTargeted(t, cluster, map[string]string{
									"find users": "Replace reads by _id alone (the key's values, or why its write matched nothing)",
								})
							}
							if tc.replaced != nil {
								var got bson.M
								require.NoError(t, db.Collection("users").FindOne(context.Background(), bson.D{{Key: "_id", Value: "a"}}).Decode(&got))
								require.Equal(t, "acme", got["tenant"], "Replace keeps the stored key field that TracedUser lacks")
							}
						}
						requireUsers(t, db, tc.replaced, c.seeded[:tc.untouched]...)
						c.requireSaw(t, "Replace", tc.want, nil)
					},
				})
			})
		}
	})
}

// faultsInsertAndDelete breaks the one-command writes, for what their
// callers see: after a fault inside Insert the document may be stored, so
// that the retry of an Insert with an _id reports a duplicate key (the
// document stored is the one inserted, once); after a fault inside
// Delete the document may be gone, so that the retry reports ErrNotFound
// (and the other documents stay).
func faultsInsertAndDelete(t *testing.T) {
	p := faults.New(t)
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, plan versioning.Plan) {
		ada := TracedUser{User: User{ID: "a", First: "Ada", Last: "Lovelace", Email: "ada@example.com", Locale: "en", Visits: 1}, Applied: []string{}}
		t.Run("insert", func(t *testing.T) {
			insert := func(ctx context.Context, db *mongo.Database, c *calls[any]) error {
				return c.add(tracedUsers(db, plan).Insert(ctx, ada))
			}
			faults.Run(t, p, faults.Case[*calls[any]]{
				Reuse:   true,
				Prepare: func(*testing.T, *mongo.Database) *calls[any] { return &calls[any]{} },
				Op:      insert,
				Retry: func(ctx context.Context, db *mongo.Database, c *calls[any]) error {
					if err := insert(ctx, db, c); !mongo.IsDuplicateKeyError(err) {
						return err
					}
					return nil // the struck call stored it: Check verifies it is the one inserted
				},
				Check: func(t *testing.T, db *mongo.Database, c *calls[any]) {
					requireUsers(t, db, map[string]TracedUser{"a": ada})
					c.mu.Lock()
					defer c.mu.Unlock()
					last := c.seen[len(c.seen)-1]
					if len(c.seen) == 2 {
						requireFaultError(t, "Insert", c.seen[0].err)
						if last.err != nil {
							require.True(t, mongo.IsDuplicateKeyError(last.err), "the retry finds the document the struck call stored: %v", last.err)
							return
						}
					}
					require.NoError(t, last.err)
					require.Equal(t, "a", last.v)
				},
			})
		})
		t.Run("delete", func(t *testing.T) {
			var alan bson.Raw
			faults.Run(t, p, faults.Case[*calls[struct{}]]{
				Reuse: true,
				Prepare: func(t *testing.T, db *mongo.Database) *calls[struct{}] {
					alan = seedRaw(t, db, adaV1(), oldV1("b", "Alan Turing", "alan@example.com", 3))[1]
					return &calls[struct{}]{}
				},
				Op: func(ctx context.Context, db *mongo.Database, c *calls[struct{}]) error {
					return c.add(struct{}{}, tracedUsers(db, plan).Delete(ctx, "a"))
				},
				Retry: func(ctx context.Context, db *mongo.Database, c *calls[struct{}]) error {
					err := c.add(struct{}{}, tracedUsers(db, plan).Delete(ctx, "a"))
					if errors.Is(err, patterns.ErrNotFound) {
						return nil // the struck call deleted it
					}
					return err
				},
				Check: func(t *testing.T, db *mongo.Database, c *calls[struct{}]) {
					requireUsers(t, db, nil, alan)
					c.mu.Lock()
					defer c.mu.Unlock()
					if len(c.seen) == 2 {
						requireFaultError(t, "Delete", c.seen[0].err)
						if err := c.seen[1].err; err != nil {
							require.ErrorIs(t, err, patterns.ErrNotFound, "the retry finds the document deleted")
						}
						return
					}
					require.NoError(t, c.seen[0].err)
				},
			})
		})
	})
}

// migration is what a call of MigrateAll returned and reported.
type migration struct {
	res      versioning.MigrateResult
	progress [][2]int
}

// migrated is what Check needs of a MigrateAll: the untouched documents
// as seeded, and the documents the struck run left at version 3 (read by
// the retry).
type migrated struct {
	calls[migration]
	untouched []bson.Raw
	between   int
}

// faultsMigrateAll breaks MigrateAll over three old documents, in
// batches of two with Progress, at each step: the count, the find, each
// write (a bulk write per batch, or a replaceOne per document), the
// find of the next page. The struck run returns an error, lists no document as failed
// (a lost connection is not a document's failure) and counts at most
// what it wrote: only a write whose reply was lost is missing from its
// count. Running it again migrates the rest, and counts exactly the rest.
// Every document ends at the current version with each of its steps
// applied once, no field lost; the current and the newer documents are
// untouched.
func faultsMigrateAll(t *testing.T) {
	p := faults.New(t)
	want := threeOldWant
	const batch = 2
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, plan versioning.Plan) {
		op := func(ctx context.Context, db *mongo.Database, c *migrated) error {
			var m migration
			res, err := tracedUsers(db, plan).MigrateAll(ctx, versioning.MigrateOptions{BatchSize: batch, Progress: func(done, total int) {
				m.progress = append(m.progress, [2]int{done, total})
			}})
			m.res = res
			return c.add(m, err)
		}
		faults.Run(t, p, faults.Case[*migrated]{
			Reuse: true,
			Prepare: func(t *testing.T, db *mongo.Database) *migrated {
				seeded := seedRaw(t, db, append(threeOld(), currentV3("d", "Barbara", "Liskov", 4), newerV4("e"))...)
				return &migrated{untouched: seeded[3:]}
			},
			Op: op,
			Retry: func(ctx context.Context, db *mongo.Database, c *migrated) error {
				n, err := db.Collection("users").CountDocuments(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$lte", Value: "c"}}}, {Key: "schemaVersion", Value: 3}})
				if err != nil {
					return err
				}
				c.between = int(n)
				return op(ctx, db, c)
			},
			Check: func(t *testing.T, db *mongo.Database, c *migrated) {
				requireUsers(t, db, want, c.untouched...)
				c.mu.Lock()
				defer c.mu.Unlock()
				n := len(want)
				if len(c.seen) == 1 { // no fault, or one the driver absorbed
					require.NoError(t, c.seen[0].err)
					require.Equal(t, migration{res: versioning.MigrateResult{Migrated: n}, progress: [][2]int{{2, n}, {3, n}}}, c.seen[0].v)
					return
				}
				struck, retry := c.seen[0], c.seen[1]
				requireFaultError(t, "MigrateAll", struck.err)
				require.Empty(t, struck.v.res.Failed, "a lost connection is no document's failure")
				require.Zero(t, struck.v.res.Skipped)
				lost := 1 // a replaceOne whose reply was lost
				if plan.BulkMigrate {
					lost = batch // a bulk write whose reply was lost
				}
				require.LessOrEqual(t, struck.v.res.Migrated, c.between, "the struck run counts no more than it wrote")
				require.GreaterOrEqual(t, struck.v.res.Migrated, c.between-lost, "the struck run counts what it wrote but the write whose reply was lost")
				for i, pr := range struck.v.progress {
					require.Equal(t, [2]int{min(batch*(i+1), n), n}, pr, "the struck run's progress")
				}
				require.NoError(t, retry.err)
				rest := n - c.between
				require.Equal(t, versioning.MigrateResult{Migrated: rest}, retry.v.res, "the retry migrates the rest, and only the rest")
				var progress [][2]int
				for done := batch; done < rest+batch; done += batch {
					progress = append(progress, [2]int{min(done, rest), rest})
				}
				require.Equal(t, progress, retry.v.progress, "the retry's progress")
			},
		})
	})
}

// faultsUpdatePast16MiB breaks Update where it checks sizes itself
// and the server stores what it is given (FerretDB 1.x), at the steps of
// its undo: inside the findAndModify that stores a document past 16 MiB
// (the reply, with the result, is lost), and before and inside the
// replaceOne that puts back the document read. The read and the
// findAndModify before it reaches the server are the steps of
// faultsUpdate's current document, which run the same code. Each step
// costs seconds on the embedded server (a document of 16 MiB), so the
// faults are the two that close the connection at once (reset, timeout),
// not a stall, and Run's baseline is TestUpdatePast16MiBIsUndone. The
// call struck must report ErrTooLarge with the document put back (or a
// fault's error, and then its retry must), and no document past 16 MiB
// may stay.
func faultsUpdatePast16MiB(t *testing.T) {
	if mongotest.Server().Has(patterns.FeatureUpdateSizeLimit) {
		t.Skipf("skipped: %s refuses an update past 16 MiB itself: there is nothing to put back", mongotest.Server())
	}
	p := faults.New(t)
	big := bson.D{{Key: "$set", Value: bson.D{{Key: "last", Value: strings.Repeat("y", 16<<20)}}}}
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, plan versioning.Plan) {
		if plan.ServerSizeLimit {
			t.Skip("skipped: the plan lets the server refuse the update")
		}
		fs := []faults.Fault{
			{Step: 2, Place: faults.Inside, Kind: faults.Reset},
			{Step: 3, Place: faults.Before, Kind: faults.Reset},
			{Step: 3, Place: faults.Inside, Kind: faults.Timeout},
		}
		if testing.Short() {
			fs = fs[:1]
		}
		for _, f := range fs {
			t.Run(f.String(), func(t *testing.T) {
				ctx := context.Background()
				db := mongotest.DB(t)
				seeded := seedRaw(t, db, currentV3("a", "Ada", "Lovelace", 7))[0]
				p.Arm(f)
				err := tracedUsers(p.Client().Database(db.Name()), plan).Update(ctx, "a", big)
				p.Disarm()
				require.True(t, p.Fired(), "the fault struck (err %v)", err)
				saw := err
				t.Cleanup(func() {
					if t.Failed() {
						mongotest.Detail(t, "the caller saw: %v", saw)
					}
				})
				if !errors.Is(err, patterns.ErrTooLarge) {
					requireFaultError(t, "Update", err)
					err = tracedUsers(db, plan).Update(ctx, "a", big)
				}
				require.ErrorIs(t, err, patterns.ErrTooLarge)
				require.ErrorContains(t, err, "(the previous document was put back)")
				require.Equal(t, seeded, stored(t, db.Collection("users"), "a"), "the document is as it was")
			})
		}
	})
}
