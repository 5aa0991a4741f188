package extref_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/extref"
	"github.com/mongopatterns/mongopatterns/internal/faults"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/internal/shard"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// The fault tests break every multi-step operation at every command it
// sends (internal/faults: a reset, a timeout or a stall, before the server
// receives the command or after it ran it), retry it on a healthy
// connection as the godoc says to, and check the final state exactly:
// every copy equal to its source in every target, no other document
// changed, the counts of the retried run those the godoc promises, and
// what the caller saw at the failure.
//
// The fixture is small, so that the operations send few commands: three
// products, copied into the items of carts (an array target: the portable
// path on a server without arrayFilters) and into featured documents (a
// single copy each).
//
//	carts     1: [1, 2]   2: [2, 1, 1]   3: [3]   4: [1 fresh]   5: [3, 1]   6: [1, 3]
//	featured  1: 1        2: 2           3: 3     4: 1 fresh     5: 99 (no such product: an orphan)
//
// A renamed product is stored renamed while its copies hold the old name,
// except the "fresh" ones, which hold the new.
//
// The fault tests run in parallel with each other, each with its own
// proxy and databases: a stall waits 1.5 s for a deadline, and overlapping
// those waits keeps the package's test time down.

var (
	cartsTarget    = extref.Target{Collection: "carts", Path: "items[].product"}
	featuredTarget = extref.Target{Collection: "featured", Path: "product"}
	fixtureColls   = []string{"products", "carts", "featured"}
)

// faultScene is the fixture of one fault test: the targets of the
// repository, the documents stored, the products renamed behind the
// repository's back.
type faultScene struct {
	targets  []extref.Target
	carts    []int32
	featured []int32
	renamed  []int32
	batch    int
	shardKey []string // Config.ShardKey
}

// world is the stored state: collection, then _id, then document.
type world map[string]map[int32]bson.Raw

func readWorld(t testing.TB, db *mongo.Database) world {
	t.Helper()
	w := world{}
	for _, c := range fixtureColls {
		w[c] = snapshot(t, db.Collection(c))
	}
	return w
}

func (w world) clone() world {
	out := world{}
	for c, docs := range w {
		out[c] = maps.Clone(docs)
	}
	return out
}

// faultRun is one run of a fault case: the state before, what the
// operation returned (through the faulty client, or the healthy one when
// it runs without a fault), and, when it failed, the state the retry
// started from and what the retry returned.
type faultRun struct {
	calls
	t       *testing.T
	sc      faultScene
	p       extref.Plan
	before  world
	atRetry world
	// routes counts the commands of the call and of its retry (and the
	// test's own reads of the whole world), for requireKeyed.
	routes *mongotest.Counter
}

// outcome is what one call returned.
type outcome struct {
	counts  []extref.Count
	reports []extref.Report
	token   bson.Raw
	err     error
}

// calls records what a fault case's operation returned: first through the
// faulty client (or through the healthy one, in the run without a fault),
// second on the retry, if any.
type calls struct {
	first, second outcome
	retried       bool
}

func (c *calls) record() *calls { return c }

// callCase is the fault case whose operation is call, which Op calls and
// Retry calls again with retry true; their outcomes are recorded in S.
func callCase[S interface{ record() *calls }](prepare func(*testing.T, *mongo.Database) S,
	call func(ctx context.Context, db *mongo.Database, s S, retry bool) outcome,
	check func(*testing.T, *mongo.Database, S)) faults.Case[S] {
	return faults.Case[S]{
		Reuse:   true,
		Prepare: prepare,
		Op: func(ctx context.Context, db *mongo.Database, s S) error {
			c := s.record()
			c.first = call(ctx, db, s, false)
			return c.first.err
		},
		Retry: func(ctx context.Context, db *mongo.Database, s S) error {
			c := s.record()
			c.retried = true
			c.second = call(ctx, db, s, true)
			return c.second.err
		},
		Check: check,
	}
}

// ref builds the repository on db (New sends nothing), on the run's plan.
func (s *faultRun) ref(db *mongo.Database) (*extref.Ref[ProductRef], error) {
	r, err := extref.New[ProductRef](db, extref.Config{Source: "products", Targets: s.sc.targets, BatchSize: s.sc.batch, ShardKey: s.sc.shardKey})
	if err != nil {
		return nil, err
	}
	extref.ForcePlan(r, s.p)
	return r, nil
}

// call builds the repository on db and runs op with it; on the retry it
// first records the state the retry starts from.
func (s *faultRun) call(db *mongo.Database, retry bool, op func(*extref.Ref[ProductRef]) outcome) outcome {
	if retry {
		s.atRetry = readWorld(s.t, db)
	}
	r, err := s.ref(db)
	if err != nil {
		return outcome{err: err}
	}
	return op(r)
}

// prepareScene stores sc's fixture in db, with the repository's indexes.
func prepareScene(t *testing.T, db *mongo.Database, sc faultScene, p extref.Plan) *faultRun {
	t.Helper()
	type product struct {
		name  string
		price float64
	}
	products := map[int32]product{1: {"Kettle", 1.5}, 2: {"Teapot", 2.5}, 3: {"Mug", 3.5}}
	current := maps.Clone(products)
	for _, id := range sc.renamed {
		current[id] = product{products[id].name + " v2", products[id].price}
	}
	copyOf := func(id int32, fresh bool) bson.D {
		v := products[id]
		if fresh {
			v = current[id]
		}
		return bson.D{{Key: "id", Value: id}, {Key: "name", Value: v.name}, {Key: "price", Value: v.price}}
	}
	var docs []any
	for _, id := range []int32{1, 2, 3} {
		docs = append(docs, bson.D{{Key: "_id", Value: id}, {Key: "name", Value: current[id].name}, {Key: "price", Value: current[id].price}, {Key: "stock", Value: int32(100)}})
	}
	_, err := db.Collection("products").InsertMany(ctx, docs)
	require.NoError(t, err)

	carts := map[int32][]int32{1: {1, 2}, 2: {2, 1, 1}, 3: {3}, 4: {1}, 5: {3, 1}, 6: {1, 3}}
	docs = nil
	for _, id := range sc.carts {
		items := bson.A{}
		for i, pid := range carts[id] {
			items = append(items, bson.D{{Key: "product", Value: copyOf(pid, id == 4)}, {Key: "qty", Value: int32(i + 1)}})
		}
		docs = append(docs, bson.D{{Key: "_id", Value: id}, {Key: "items", Value: items}})
	}
	if len(docs) > 0 {
		_, err = db.Collection("carts").InsertMany(ctx, docs)
		require.NoError(t, err)
	}
	docs = nil
	for _, id := range sc.featured {
		var cp bson.D
		switch id {
		case 4:
			cp = copyOf(1, true)
		case 5:
			cp = bson.D{{Key: "id", Value: int32(99)}, {Key: "name", Value: "Gone"}, {Key: "price", Value: 9.5}}
		default:
			cp = copyOf(id, false)
		}
		docs = append(docs, bson.D{{Key: "_id", Value: id}, {Key: "product", Value: cp}, {Key: "rank", Value: id}})
	}
	if len(docs) > 0 {
		_, err = db.Collection("featured").InsertMany(ctx, docs)
		require.NoError(t, err)
	}

	s := &faultRun{t: t, sc: sc, p: p}
	r, err := s.ref(db)
	require.NoError(t, err)
	require.NoError(t, patterns.EnsureIndexes(ctx, r.Indexes()...))
	s.before = readWorld(t, db)
	s.routes = mongotest.NewCounter(t, db)
	return s
}

// copiesAt returns the copies doc holds at tg's path.
func copiesAt(doc bson.Raw, tg extref.Target) []bson.Raw {
	array, field, inArray := strings.Cut(tg.Path, "[].")
	if !inArray {
		if cp, ok := doc.Lookup(tg.Path).DocumentOK(); ok {
			return []bson.Raw{cp}
		}
		return nil
	}
	arr, ok := doc.Lookup(array).ArrayOK()
	if !ok {
		return nil
	}
	vals, err := arr.Values()
	if err != nil {
		return nil
	}
	var out []bson.Raw
	for _, v := range vals {
		if el, ok := v.DocumentOK(); ok {
			if cp, ok := el.Lookup(field).DocumentOK(); ok {
				out = append(out, cp)
			}
		}
	}
	return out
}

// copied are the copied fields of ProductRef.
var copied = []string{"name", "price"}

// staleCopy reports whether the copy differs from the source src in a
// copied field (the fixture stores every value with the type of its
// source's, so bytes compare).
func staleCopy(cp, src bson.Raw) bool {
	for _, f := range copied {
		a, b := cp.Lookup(f), src.Lookup(f)
		if a.Type != b.Type || !bytes.Equal(a.Value, b.Value) {
			return true
		}
	}
	return false
}

// staleOf counts the copies of source id in doc that differ from src.
func staleOf(doc bson.Raw, tg extref.Target, id int32, src bson.Raw) int {
	n := 0
	for _, cp := range copiesAt(doc, tg) {
		if got, ok := cp.Lookup("id").Int32OK(); ok && got == id && staleCopy(cp, src) {
			n++
		}
	}
	return n
}

// staleDocs counts the documents of target tg in w that hold a copy of
// source id differing from src.
func staleDocs(w world, tg extref.Target, id int32, src bson.Raw) int64 {
	var n int64
	for _, doc := range w[tg.Collection] {
		if staleOf(doc, tg, id, src) > 0 {
			n++
		}
	}
	return n
}

// stalePairs counts, in target tg, the pairs (document, source) where the
// document holds a stale copy of the source: what one Sync of the source
// rewrites once.
func stalePairs(w world, tg extref.Target) int64 {
	var n int64
	for _, doc := range w[tg.Collection] {
		for id, src := range w["products"] {
			if staleOf(doc, tg, id, src) > 0 {
				n++
			}
		}
	}
	return n
}

// synced returns doc as a sync of the sources ids leaves it: each of their
// copies' copied fields set to the source's value in sources, in place;
// everything else as it was.
func synced(t testing.TB, doc bson.Raw, tg extref.Target, sources map[int32]bson.Raw, ids ...int32) bson.Raw {
	t.Helper()
	var d bson.D
	require.NoError(t, bson.Unmarshal(doc, &d))
	fix := func(cp bson.D) {
		var id int32 = -1
		for _, e := range cp {
			if e.Key == "id" {
				id, _ = e.Value.(int32)
			}
		}
		src, ok := sources[id]
		if !ok || !slices.Contains(ids, id) {
			return
		}
		for i, e := range cp {
			if slices.Contains(copied, e.Key) {
				cp[i].Value = src.Lookup(e.Key)
			}
		}
	}
	array, field, inArray := strings.Cut(tg.Path, "[].")
	for _, e := range d {
		switch {
		case !inArray && e.Key == tg.Path:
			fix(e.Value.(bson.D))
		case inArray && e.Key == array:
			for _, el := range e.Value.(bson.A) {
				for _, f := range el.(bson.D) {
					if f.Key == field {
						fix(f.Value.(bson.D))
					}
				}
			}
		}
	}
	raw, err := bson.Marshal(d)
	require.NoError(t, err)
	return raw
}

// sameDoc fails unless got has exactly the bytes of want.
func sameDoc(t testing.TB, want, got bson.Raw, format string, args ...any) {
	t.Helper()
	if !bytes.Equal(want, got) {
		t.Fatalf("%s:\n got  %s\n want %s", fmt.Sprintf(format, args...), got, want)
	}
}

// sameWorld reports whether two states hold the same documents, byte for
// byte.
func sameWorld(a, b world) bool {
	return maps.EqualFunc(a, b, func(x, y map[int32]bson.Raw) bool {
		return maps.EqualFunc(x, y, func(p, q bson.Raw) bool { return bytes.Equal(p, q) })
	})
}

// withName returns the product doc with its name set to name, in place.
func withName(t testing.TB, doc bson.Raw, name string) bson.Raw {
	t.Helper()
	var d bson.D
	require.NoError(t, bson.Unmarshal(doc, &d))
	for i, e := range d {
		if e.Key == "name" {
			d[i].Value = name
		}
	}
	raw, err := bson.Marshal(d)
	require.NoError(t, err)
	return raw
}

// checkState fails unless the stored state is the one before the
// operation with the products replaced by products and, in every target,
// the copies of the sources ids synced to them; every other document as it
// was, byte for byte.
func checkState(t testing.TB, s *faultRun, now world, products map[int32]bson.Raw, ids ...int32) {
	t.Helper()
	for _, c := range fixtureColls {
		require.Len(t, now[c], len(s.before[c]), "documents in %s", c)
		for id, doc := range s.before[c] {
			want := doc
			if c == "products" {
				want = products[id]
			}
			for _, tg := range s.sc.targets {
				if tg.Collection == c {
					want = synced(t, doc, tg, products, ids...)
				}
			}
			sameDoc(t, want, now[c][id], "%s %d", c, id)
		}
	}
}

// wantCounts are the counts a Sync of source id to src promises from the
// state w: per target, the documents holding stale copies, matched and
// modified.
func wantCounts(s *faultRun, w world, src bson.Raw, id int32) []extref.Count {
	out := make([]extref.Count, len(s.sc.targets))
	for i, tg := range s.sc.targets {
		n := staleDocs(w, tg, id, src)
		out[i] = extref.Count{Target: tg, Matched: n, Modified: n}
	}
	return out
}

// checkPartialCounts checks the counts a failed Sync or Update returned:
// "with an error, the counts say what was written before it". Per target
// they count no more documents than were rewritten between the state
// before and the state at the retry; the documents rewritten and not
// counted are those of the one command whose reply was lost, if any: in
// one target, and one document where the portable path rewrites one per
// command.
func checkPartialCounts(t testing.TB, s *faultRun, counts []extref.Count, src bson.Raw, id int32) {
	t.Helper()
	if counts == nil {
		counts = make([]extref.Count, len(s.sc.targets))
		for i, tg := range s.sc.targets {
			counts[i].Target = tg
		}
	}
	require.Len(t, counts, len(s.sc.targets))
	uncounted := 0
	for i, tg := range s.sc.targets {
		c := counts[i]
		require.Equal(t, tg, c.Target)
		require.Equal(t, c.Matched, c.Modified, "%s: every document matched was rewritten", tg)
		written := staleDocs(s.before, tg, id, src) - staleDocs(s.atRetry, tg, id, src)
		require.LessOrEqual(t, c.Modified, written, "%s: the counts claim no more than was written", tg)
		if lost := written - c.Modified; lost > 0 {
			uncounted++
			if strings.Contains(tg.Path, "[]") && !has(s.p, patterns.FeatureArrayFilters) && !has(s.p, patterns.FeatureBatchedUpdates) {
				require.EqualValues(t, 1, lost, "%s: one document per command on the portable path", tg)
			}
		}
	}
	require.LessOrEqual(t, uncounted, 1, "only the command whose reply was lost wrote without being counted")
}

// requirePrefix fails unless err's message starts with prefix.
func requirePrefix(t testing.TB, err error, prefix string) {
	t.Helper()
	require.Error(t, err)
	require.True(t, strings.HasPrefix(err.Error(), prefix), "error %q starts with %q", err, prefix)
}

// simulate returns the reports Verify (or, with repair, Repair) promises
// from the state w, with every target read in one batch: per target, the
// documents holding copies, the copies, the stale copies and the orphans
// (counted, and the first ones named in _id order), as read after the
// syncs of the previous targets' stale sources; and for Repair, per
// target, the documents each of those syncs rewrote.
func simulate(t testing.TB, w world, targets []extref.Target, repair bool) []extref.Report {
	t.Helper()
	w = w.clone()
	products := w["products"]
	out := make([]extref.Report, len(targets))
	for i, tg := range targets {
		out[i].Target = tg
		var stale []int32
		for _, docID := range slices.Sorted(maps.Keys(w[tg.Collection])) { // the scan's order
			cps := copiesAt(w[tg.Collection][docID], tg)
			if len(cps) > 0 {
				out[i].Documents++
			}
			for _, cp := range cps {
				out[i].Copies++
				id, ok := cp.Lookup("id").Int32OK()
				src, exists := products[id]
				switch {
				case !ok || !exists:
					out[i].Orphans++
					out[i].OrphanCopies = sample(out[i].OrphanCopies, extref.CopyID{Document: idOf(docID), Source: cp.Lookup("id")})
				case staleCopy(cp, src):
					out[i].Stale++
					out[i].StaleCopies = sample(out[i].StaleCopies, extref.CopyID{Document: idOf(docID), Source: src.Lookup("_id")})
					if !slices.Contains(stale, id) {
						stale = append(stale, id)
					}
				}
			}
		}
		if !repair {
			continue
		}
		for _, id := range stale {
			for j, to := range targets {
				for docID, doc := range w[to.Collection] {
					if staleOf(doc, to, id, products[id]) > 0 {
						out[j].Repaired++
						w[to.Collection][docID] = synced(t, doc, to, products, id)
					}
				}
			}
		}
	}
	return out
}

// sample appends c to a report's list of copies unless it is full.
func sample(list []extref.CopyID, c extref.CopyID) []extref.CopyID {
	if len(list) == extref.DefaultReportSample {
		return list
	}
	return append(list, c)
}

// syncCase is Sync(1), retried with Sync(1).
func syncCase(sc faultScene, p extref.Plan) faults.Case[*faultRun] {
	return callCase(func(t *testing.T, db *mongo.Database) *faultRun { return prepareScene(t, db, sc, p) },
		func(ctx context.Context, db *mongo.Database, s *faultRun, retry bool) outcome {
			return s.call(db, retry, func(r *extref.Ref[ProductRef]) outcome {
				counts, err := r.Sync(ctx, 1)
				return outcome{counts: counts, err: err}
			})
		},
		func(t *testing.T, db *mongo.Database, s *faultRun) {
			products := s.before["products"]
			checkState(t, s, readWorld(t, db), products, 1)
			got, from := s.first, s.before
			if s.retried {
				requirePrefix(t, s.first.err, "extref: Sync: source 1: ")
				checkPartialCounts(t, s, s.first.counts, products[1], 1)
				got, from = s.second, s.atRetry
			}
			require.NoError(t, got.err)
			require.Equal(t, wantCounts(s, from, products[1], 1), got.counts, "the counts of the run that succeeded")
		})
}

// updateCase is Update(1, {$set: {name: "Renamed"}}), retried as its
// error says: with Sync(1) after an error wrapping ErrNotSynced (the
// source is updated), else with the same Update (an idempotent update
// whose outcome the caller cannot know).
func updateCase(sc faultScene, p extref.Plan) faults.Case[*faultRun] {
	return callCase(func(t *testing.T, db *mongo.Database) *faultRun { return prepareScene(t, db, sc, p) },
		func(ctx context.Context, db *mongo.Database, s *faultRun, retry bool) outcome {
			return s.call(db, retry, func(r *extref.Ref[ProductRef]) outcome {
				var o outcome
				if retry && errors.Is(s.first.err, extref.ErrNotSynced) {
					o.counts, o.err = r.Sync(ctx, 1)
				} else {
					o.counts, o.err = r.Update(ctx, 1, setName("Renamed"))
				}
				return o
			})
		},
		func(t *testing.T, db *mongo.Database, s *faultRun) {
			if s.sc.shardKey != nil {
				requireKeyed(t, s.routes)
			}
			products := maps.Clone(s.before["products"])
			products[1] = withName(t, products[1], "Renamed")
			now := readWorld(t, db)
			checkState(t, s, now, products, 1)
			if !s.retried {
				require.NoError(t, s.first.err)
				require.Equal(t, wantCounts(s, s.before, products[1], 1), s.first.counts)
				return
			}
			err, at := s.first.err, s.atRetry
			requirePrefix(t, err, "extref: Update: source 1: ")
			switch {
			case has(s.p, patterns.FeatureTransactions):
				require.NotErrorIs(t, err, extref.ErrNotSynced)
				switch {
				case strings.Contains(err.Error(), "(nothing written)"):
					require.True(t, sameWorld(at, s.before), "the error says nothing was written: %v", err)
				case strings.Contains(err.Error(), "(all written or nothing, unknown which)"):
					require.True(t, sameWorld(at, s.before) || sameWorld(at, now), "a transaction writes all or nothing: %v", err)
				default:
					t.Fatalf("the error of a transaction says whether anything was written: %v", err)
				}
			case errors.Is(err, extref.ErrNotSynced):
				sameDoc(t, products[1], at["products"][1], "the error says the source is updated (%v)", err)
				checkPartialCounts(t, s, s.first.counts, products[1], 1)
			default:
				// The findAndModify failed: the source changed or not (its
				// reply may be lost), and no copy was written.
				require.Nil(t, s.first.counts, "%v", err)
				for _, tg := range s.sc.targets {
					require.True(t, sameWorld(world{"c": at[tg.Collection]}, world{"c": s.before[tg.Collection]}), "no copy written before the error %v", err)
				}
			}
			require.NoError(t, s.second.err)
			require.Equal(t, wantCounts(s, at, products[1], 1), s.second.counts, "the counts of the retry")
		})
}

// scanCase is Verify (or, with repair, Repair), retried with itself.
func scanCase(sc faultScene, p extref.Plan, repair bool) faults.Case[*faultRun] {
	return callCase(func(t *testing.T, db *mongo.Database) *faultRun { return prepareScene(t, db, sc, p) },
		func(ctx context.Context, db *mongo.Database, s *faultRun, retry bool) outcome {
			return s.call(db, retry, func(r *extref.Ref[ProductRef]) outcome {
				var o outcome
				if repair {
					o.reports, o.err = r.Repair(ctx)
				} else {
					o.reports, o.err = r.Verify(ctx)
				}
				return o
			})
		},
		func(t *testing.T, db *mongo.Database, s *faultRun) {
			products := s.before["products"]
			var ids []int32
			if repair {
				ids = slices.Collect(maps.Keys(products))
			}
			checkState(t, s, readWorld(t, db), products, ids...)
			got, from := s.first, s.before
			if s.retried {
				if repair {
					requirePrefix(t, s.first.err, "extref: Repair: ")
					for j, tg := range s.sc.targets {
						require.LessOrEqual(t, s.first.reports[j].Repaired, stalePairs(s.before, tg)-stalePairs(s.atRetry, tg),
							"%s: Repaired claims no more than was rewritten", tg)
					}
				} else {
					requirePrefix(t, s.first.err, "extref: Verify: ")
				}
				got, from = s.second, s.atRetry
			}
			require.NoError(t, got.err)
			require.Equal(t, simulate(t, from, s.sc.targets, repair), got.reports, "the reports of the run that succeeded")
		})
}

// TestFaults breaks every operation at every step (the groups below:
// Sync into one target and into two, Update with and without a shard
// key, Repair, Verify, and the token collection's LoadToken and
// SaveToken), the groups side by side (faults.Concurrently), each through
// a proxy of its own: they spend most of their time waiting on stalls,
// and as parallel tests of their own no more than -parallel (the number
// of cores) of them waited at a time.
func TestFaults(t *testing.T) {
	t.Parallel()
	groups := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"SyncOneTarget", faultsSyncOneTarget}, {"SyncTwoTargets", faultsSyncTwoTargets},
		{"Update", faultsUpdate}, {"UpdateWithAShardKey", faultsUpdateWithAShardKey},
		{"Repair", faultsRepair}, {"Verify", faultsVerify}, {"TokenCollection", faultsTokenCollection},
	}
	faults.Concurrently(t, len(groups), func(i int) string { return groups[i].name }, func(t *testing.T, i int) { groups[i].run(t) })
}

// faultsSyncOneTarget breaks Sync of a product copied into one single
// target (a find, an updateMany, a confirming find) at every step.
func faultsSyncOneTarget(t *testing.T) {
	px := faults.New(t)
	sc := faultScene{targets: []extref.Target{featuredTarget}, featured: []int32{1, 2, 3, 4, 5}, renamed: []int32{1}}
	mongotest.RunPlans(t, extref.PlanFor, func(t *testing.T, p extref.Plan) {
		faults.Run(t, px, syncCase(sc, p))
	})
}

// faultsSyncTwoTargets breaks Sync of a product copied into an array
// target, where three documents hold stale copies (one of them two) and
// one a fresh copy, and into a single target: on the portable path a find
// of the documents holding copies and one update per stale document.
func faultsSyncTwoTargets(t *testing.T) {
	px := faults.New(t)
	sc := faultScene{targets: []extref.Target{cartsTarget, featuredTarget}, carts: []int32{1, 2, 3, 4, 5}, featured: []int32{1, 2, 3, 4, 5}, renamed: []int32{1}}
	mongotest.RunPlans(t, extref.PlanFor, func(t *testing.T, p extref.Plan) {
		faults.Run(t, px, syncCase(sc, p))
	})
}

// faultsUpdate breaks Update at every step: the findAndModify (the
// caller cannot know whether it applied; the error does not say the
// source is updated) and the sync after it (the error wraps ErrNotSynced:
// the source is updated, the copies may be stale, Sync is the retry); in a
// transaction where the server has them (all or nothing).
func faultsUpdate(t *testing.T) {
	px := faults.New(t)
	sc := faultScene{targets: []extref.Target{featuredTarget}, featured: []int32{1, 2, 3, 4, 5}}
	mongotest.RunPlans(t, extref.PlanFor, func(t *testing.T, p extref.Plan) {
		c := updateCase(sc, p)
		faults.Run(t, px, c)
		if has(p, patterns.FeatureTransactions) {
			breakCommit(t, px, c)
		}
	})
}

// faultsUpdateWithAShardKey breaks Update of a source whose
// Config.ShardKey names a field (issue 25) at every step: the read of the
// key's values comes first, and a fault there writes nothing. Every
// command of the failed call and of its retry (Update again, or Sync) is
// routed under a source sharded on {stock: 1, _id: 1} (issue 33).
func faultsUpdateWithAShardKey(t *testing.T) {
	px := faults.New(t)
	sc := faultScene{targets: []extref.Target{featuredTarget}, featured: []int32{1, 2, 3}, shardKey: []string{"stock"}}
	mongotest.RunPlans(t, extref.PlanFor, func(t *testing.T, p extref.Plan) {
		faults.Run(t, px, updateCase(sc, p))
	})
}

// keyed is the shard key of faultsUpdateWithAShardKey: the source on
// {stock: 1, _id: 1} (the package documentation's {region: 1, _id: 1}),
// named by Config.ShardKey ["stock"]; the single target on the copy's id.
var keyed = map[string]shard.Key{
	"products": shard.MustParseKey(bson.D{{Key: "stock", Value: 1}, {Key: "_id", Value: 1}}),
	"featured": shard.MustParseKey(bson.D{{Key: "product.id", Value: "hashed"}}),
}

// requireKeyed routes every command c counted under keyed, on each
// cluster of shard.Clusters: nothing is refused, at 6.0 as at 8.0 and
// whatever the FCV.
func requireKeyed(t *testing.T, c *mongotest.Counter) {
	t.Helper()
	require.NotZero(t, c.N(), "commands to route")
	for _, cluster := range shard.Clusters(keyed) {
		c.RequireTargeted(t, cluster, map[string]string{
			"find products": "Update reads the source's shard-key values by _id; the test reads every document before a retry",
			"find featured": "the test reads every document before a retry",
		})
	}
}

// breakCommit breaks the commitTransaction that ends c's transaction,
// which faults.Run does not reach: it counts the commands sent to the
// test's database, and a commit goes to the admin database. The proxy
// counts every command of its client, so the commit is the command after
// those Run counts. No stall: the driver commits detached from ctx's
// deadline, so a stalled commit would wait for the client's timeout.
func breakCommit(t *testing.T, px *faults.Proxy, c faults.Case[*faultRun]) {
	db := mongotest.DB(t)
	s := c.Prepare(t, db)
	sent := mongotest.NewCounter(t, db).Count(func() { require.NoError(t, c.Op(ctx, db, s)) })
	for _, place := range []faults.Place{faults.Before, faults.Inside} {
		for _, kind := range []faults.Kind{faults.Reset, faults.Timeout} {
			f := faults.Fault{Step: len(sent) + 1, Place: place, Kind: kind}
			t.Run(f.String()+"_commitTransaction", func(t *testing.T) {
				db := mongotest.DB(t)
				s := c.Prepare(t, db)
				opCtx, cancel := context.WithTimeout(ctx, faults.FaultDeadline)
				defer cancel()
				px.Arm(f)
				err := c.Op(opCtx, px.Client().Database(db.Name()), s)
				px.Disarm()
				require.True(t, px.Fired(), "the fault struck the commit (err %v)", err)
				if err != nil {
					mongotest.Detail(t, "the caller saw: %v", err)
					require.NoError(t, c.Retry(ctx, db, s))
				}
				c.Check(t, db, s)
			})
		}
	}
}

// faultsRepair breaks Repair at every step, with two stale products:
// one found in the array target (its sync fixes its copies in both
// targets), one only in the single target.
func faultsRepair(t *testing.T) {
	px := faults.New(t)
	sc := faultScene{targets: []extref.Target{cartsTarget, featuredTarget}, carts: []int32{3, 6}, featured: []int32{1, 2, 3, 5}, renamed: []int32{1, 2}}
	mongotest.RunPlans(t, extref.PlanFor, func(t *testing.T, p extref.Plan) {
		faults.Run(t, px, scanCase(sc, p, true))
	})
}

// faultsVerify breaks Verify at every read, getMores included (three
// documents per batch): the caller sees an error or a complete report.
func faultsVerify(t *testing.T) {
	px := faults.New(t)
	sc := faultScene{targets: []extref.Target{cartsTarget, featuredTarget}, carts: []int32{1, 2, 3, 4}, featured: []int32{2, 5}, renamed: []int32{1, 2}, batch: 3}
	mongotest.RunPlans(t, extref.PlanFor, func(t *testing.T, p extref.Plan) {
		faults.Run(t, px, scanCase(sc, p, false))
	})
}

func token(t testing.TB, data string) bson.Raw {
	t.Helper()
	raw, err := bson.Marshal(bson.D{{Key: "_data", Value: data}})
	require.NoError(t, err)
	return raw
}

// faultsTokenCollection breaks LoadToken and SaveToken (one command
// each) before and inside their command: a retried save leaves one
// document holding the token; a load returns the saved token or an error.
func faultsTokenCollection(t *testing.T) {
	px := faults.New(t)
	tokens := func(db *mongo.Database) extref.TokenCollection {
		return extref.TokenCollection{Collection: db.Collection("tokens"), Name: "orders"}
	}
	saved := func(data string) func(*testing.T, *mongo.Database) *calls {
		return func(t *testing.T, db *mongo.Database) *calls {
			require.NoError(t, tokens(db).SaveToken(ctx, token(t, data)))
			return &calls{}
		}
	}
	t.Run("save", func(t *testing.T) {
		next := token(t, "new")
		faults.Run(t, px, callCase(saved("old"),
			func(ctx context.Context, db *mongo.Database, _ *calls, _ bool) outcome {
				return outcome{err: tokens(db).SaveToken(ctx, next)}
			},
			func(t *testing.T, db *mongo.Database, s *calls) {
				if s.retried {
					requirePrefix(t, s.first.err, `extref: SaveToken: token "orders": `)
				}
				cur, err := db.Collection("tokens").Find(ctx, bson.D{})
				require.NoError(t, err)
				var docs []bson.Raw
				require.NoError(t, cur.All(ctx, &docs))
				require.Len(t, docs, 1)
				require.Equal(t, "orders", docs[0].Lookup("_id").StringValue())
				require.Equal(t, next, docs[0].Lookup("token").Document())
				require.Equal(t, bson.TypeDateTime, docs[0].Lookup("savedAt").Type)
			}))
	})
	t.Run("load", func(t *testing.T) {
		faults.Run(t, px, callCase(saved("saved"),
			func(ctx context.Context, db *mongo.Database, _ *calls, _ bool) outcome {
				tok, err := tokens(db).LoadToken(ctx)
				return outcome{token: tok, err: err}
			},
			func(t *testing.T, db *mongo.Database, s *calls) {
				got := s.first
				if s.retried {
					requirePrefix(t, s.first.err, `extref: LoadToken: token "orders": `)
					got = s.second
				}
				require.NoError(t, got.err)
				require.Equal(t, token(t, "saved"), got.token)
			}))
	})
}
