package subset_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/subset"
)

// beforeUpdates runs each of the functions of at (keyed by the number of
// the update command, from 1) in the window before that update command
// of the repository under test. The other writer runs with a context of
// its own (not nested in the operation under test, whose commands and
// conflicts the test counts); the updates it sends meanwhile are not
// counted.
func beforeUpdates(t *testing.T, db *mongo.Database, at map[int]func(ctx context.Context)) {
	t.Helper()
	var mu sync.Mutex
	n, busy := 0, false
	mongotest.OnCommand(t, db, "update", func(context.Context) {
		mu.Lock()
		if busy {
			mu.Unlock()
			return
		}
		n++
		fn := at[n]
		busy = fn != nil
		mu.Unlock()
		if fn != nil {
			fn(context.Background())
			mu.Lock()
			busy = false
			mu.Unlock()
		}
	})
}

// updates counts the update commands among sent: the compare-and-sets
// of a Remove, Update or Rebuild.
func updates(sent []string) int {
	n := 0
	for _, s := range sent {
		if s == "update" {
			n++
		}
	}
	return n
}

// attack56Op runs call as the only operation of rec and returns it with
// the names of the commands it sent.
func attack56Op(t *testing.T, rec *mongotest.Recorder, name string, call func() error) (*patterns.Operation, []string) {
	t.Helper()
	rec.Reset()
	op := rec.RequireReports(t, "subset", name, false, call)
	return op, rec.Sent(op)
}

// TestAttack56RemoveLosesToAPushThatSortsNothingOut: a Rebuild wins the
// first compare-and-set of a Remove, then an Add pushes 2 items that fill
// the subset (2 items, Cap 3) and sort nothing out. The compare-and-set
// tests whether the subset is full after a push, not whether the push
// sorted anything out: Remove loses again, announces and sends a third
// compare-and-set. The attack found the godoc promising two unless a push
// "sorted items out"; it now says "left the subset full" (Remove's
// godoc: "at most two compare-and-sets ... and on the push path one more
// (and one command, a findAndModify that announces it) after an Add whose
// push, between its find and its compare-and-set, left the subset
// full"), which this checks.
func TestAttack56RemoveLosesToAPushThatSortsNothingOut(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		ctx := context.Background()
		r, rec := hookRepo(t, config(3), p)
		db := r.Indexes()[0].Collection.Database()
		insertParents(t, db, "a")
		before := []item{{ID: 1, Score: 50}, {ID: 2, Score: 40}}
		require.NoError(t, r.Add(ctx, "a", before...))
		other := otherRepo(t, db, p)
		added := []item{{ID: 3, Score: 30}, {ID: 4, Score: 20}}
		var rebuilt, addErr error
		beforeUpdates(t, db, map[int]func(context.Context){
			1: func(ctx context.Context) { rebuilt = other.Rebuild(ctx, "a") },
			2: func(ctx context.Context) { addErr = other.Add(ctx, "a", added...) },
		})
		op, sent := attack56Op(t, rec, "Remove", func() error { return r.Remove(ctx, "a", int64(1)) })
		require.NoError(t, rebuilt)
		require.NoError(t, addErr)
		want := append([]item{{ID: 2, Score: 40}}, added...)
		requireState(t, r, "a", want, 3) // all three in the subset: the push sorted nothing out
		t.Logf("Remove sent %v, lost %d compare-and-sets", sent, op.Conflicts())
		bound := 2
		if p == pushPlan {
			bound = 3
		}
		require.LessOrEqual(t, updates(sent), bound,
			"at most two compare-and-sets, one more after a push that left the subset full; sent %v", sent)
	})
}

// TestAttack56RemoveCostsOfTwoLostRaces: the package documentation,
// Costs: "[Repo.Remove] and [Repo.Update] 4 ... A lost race adds 3 to a
// recomputation (at most once after a fresh read, see above); on the
// push path a compare-and-set that a push made fail ... adds 4, at most
// once". A push that sorts an item out of the full subset before the
// first compare-and-set, and a Rebuild that wins the second, make Remove
// lose two races: 4 + 4 + 3 = 11 commands (the attack found Costs
// silent about the push's 4).
func TestAttack56RemoveCostsOfTwoLostRaces(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		ctx := context.Background()
		r, rec := hookRepo(t, config(3), p)
		db := r.Indexes()[0].Collection.Database()
		insertParents(t, db, "a")
		require.NoError(t, r.Add(ctx, "a", five...))
		other := otherRepo(t, db, p)
		y := item{ID: 6, Score: 25} // below the subset {5, 4, 3}: the push sorts it out
		var rebuilt, addErr error
		beforeUpdates(t, db, map[int]func(context.Context){
			1: func(ctx context.Context) { addErr = other.Add(ctx, "a", y) },
			2: func(ctx context.Context) { rebuilt = other.Rebuild(ctx, "a") },
		})
		op, sent := attack56Op(t, rec, "Remove", func() error { return r.Remove(ctx, "a", int64(5)) })
		require.NoError(t, addErr)
		require.NoError(t, rebuilt)
		requireState(t, r, "a", append(without(five, 5), y), 3)
		t.Logf("Remove sent %d commands %v, lost %d compare-and-sets", len(sent), sent, op.Conflicts())
		// 4, 3 for the lost race, 4 for the push's on the push plan,
		// and the read after a second lost race (which finds the
		// revision two past the first, and returns).
		bound := 4 + 3 + 1
		if p == pushPlan {
			bound += 4
		}
		require.LessOrEqual(t, len(sent), bound, "Remove 4, a lost race adds 3, a push's 4, each at most once; sent %v", sent)
	})
}

// TestAttack56AnnounceIsAWriteTheHookDoesNotCount: patterns.Operation's
// Documents: "the number of documents the operation wrote (inserted,
// updated, deleted, migrated)", counted per write (TestHookSeesRetry:
// "the items once, and the parent twice", its stamp and its push). The
// announcing findAndModify of a recomputation updates the parent (it
// sets the push field to true), as the stamp, another
// findAndModify, does; the stamp is counted, the announcement is not. A
// Remove whose first compare-and-set a push made fail writes the item
// (its delete), the parent (the announcement) and the parent (the
// compare-and-set): 3.
func TestAttack56AnnounceIsAWriteTheHookDoesNotCount(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		if p == portable {
			t.Skip("no push, no announcement on the portable plan")
		}
		ctx := context.Background()
		r, rec := hookRepo(t, config(3), p)
		db := r.Indexes()[0].Collection.Database()
		insertParents(t, db, "a")
		require.NoError(t, r.Add(ctx, "a", five...))
		other := otherRepo(t, db, p)
		y := item{ID: 6, Score: 25}
		var addErr error
		beforeUpdates(t, db, map[int]func(context.Context){
			1: func(ctx context.Context) { addErr = other.Add(ctx, "a", y) },
		})
		op, sent := attack56Op(t, rec, "Remove", func() error { return r.Remove(ctx, "a", int64(5)) })
		require.NoError(t, addErr)
		requireState(t, r, "a", append(without(five, 5), y), 3)
		docs, known := op.Documents()
		t.Logf("Remove sent %v, lost %d, Documents %d (%t)", sent, op.Conflicts(), docs, known)
		require.Contains(t, sent, "findAndModify", "the announcement")
		require.Equal(t, int64(3), docs, "the delete, the announcement and the compare-and-set each wrote a document; sent %v", sent)
	})
}

// TestAttack56AddRecomputationLosesThreeTimes: Add's godoc: "If the
// guarded push matches nothing because the subset holds some of the
// items already (an earlier attempt, or a concurrent recomputation, put
// them there), Add recomputes the subset (a read of the parent, then a
// recomputation: three commands more, at most two compare-and-sets, see
// the package documentation)". An Add again of an item the subset holds:
// its push matches nothing and it recomputes; another client's push
// sorts an item out of the full subset before its first compare-and-set,
// and a Rebuild wins its second. Add sends three compare-and-sets, which
// the godoc now names ("and one more after a push that left the subset
// full").
func TestAttack56AddRecomputationLosesThreeTimes(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		if p == portable {
			t.Skip("the push plan's Add")
		}
		ctx := context.Background()
		r, rec := hookRepo(t, config(3), p)
		db := r.Indexes()[0].Collection.Database()
		insertParents(t, db, "a")
		require.NoError(t, r.Add(ctx, "a", five...))
		other := otherRepo(t, db, p)
		y := item{ID: 6, Score: 25}
		var rebuilt, addErr error
		beforeUpdates(t, db, map[int]func(context.Context){
			// 1 is Add's push, which matches nothing (the subset holds 4)
			2: func(ctx context.Context) { addErr = other.Add(ctx, "a", y) },
			3: func(ctx context.Context) { rebuilt = other.Rebuild(ctx, "a") },
		})
		op, sent := attack56Op(t, rec, "Add", func() error { return r.Add(ctx, "a", item{ID: 4, Score: 40}) })
		require.NoError(t, addErr)
		require.NoError(t, rebuilt)
		requireState(t, r, "a", append(five, y), 3)
		t.Logf("Add sent %v, lost %d compare-and-sets", sent, op.Conflicts())
		// The push that matches nothing, then the compare-and-sets.
		require.LessOrEqual(t, updates(sent)-1, 3, "at most two compare-and-sets, and one more after a push that left the subset full; sent %v", sent)
	})
}

// TestAttack56ParentCreatedAgainAroundAnAnnouncement: the package
// documentation: "An announcement no compare-and-set follows ... holds
// pushes off until the next recomputation of the parent"; Remove's
// godoc: a Remove follows the parent through its re-creations. A Remove
// announces itself (a push sorted an item out of the full subset before
// its first compare-and-set); before its second, another client deletes
// the parent and the application creates it again (without a revision:
// the announcement reads a parent that has none), and, in one variant,
// an Add stores an item there. Once every call returns, the new parent's
// subset is the first Cap of its items, and an Add to it pushes (four
// commands), held off by no announcement.
func TestAttack56ParentCreatedAgainAroundAnAnnouncement(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		for _, withAdd := range []bool{false, true} {
			t.Run(map[bool]string{false: "created empty", true: "created, then an Add"}[withAdd], func(t *testing.T) {
				ctx := context.Background()
				r, rec := hookRepo(t, config(3), p)
				db := r.Indexes()[0].Collection.Database()
				insertParents(t, db, "a")
				require.NoError(t, r.Add(ctx, "a", five...))
				other := otherRepo(t, db, p)
				odb := mongotest.NewClient(t).Database(db.Name()) // the hook must not wait for the client under test (pool of 1 on FerretDB 1.x)
				y, z := item{ID: 6, Score: 25}, item{ID: 7, Score: 70}
				var addErr, delErr, add2Err error
				beforeUpdates(t, db, map[int]func(context.Context){
					1: func(ctx context.Context) { addErr = other.Add(ctx, "a", y) },
					2: func(ctx context.Context) {
						delErr = other.Delete(ctx, "a")
						insertParents(t, odb, "a")
						if withAdd {
							add2Err = other.Add(ctx, "a", z)
						}
					},
				})
				_, sent := attack56Op(t, rec, "Remove", func() error {
					err := r.Remove(ctx, "a", int64(5))
					if errors.Is(err, patterns.ErrNotFound) {
						return nil
					}
					return err
				})
				t.Logf("Remove sent %v", sent)
				require.NoError(t, addErr)
				require.NoError(t, delErr)
				require.NoError(t, add2Err)
				var want []item
				if withAdd {
					want = []item{z}
				}
				requireState(t, r, "a", want, 3)
				c := mongotest.NewCounter(t, db)
				more := []item{{ID: 8, Score: 1}, {ID: 9, Score: 2}}
				cmds := c.Count(func() { require.NoError(t, r.Add(ctx, "a", more...)) })
				requireState(t, r, "a", append(want, more...), 3)
				if p != portable {
					t.Logf("the next Add sent %v", cmds)
				}
			})
		}
	})
}

// TestAttack56MixedWritersAtRest: the package documentation,
// Concurrency: "the subset is never larger than N, never holds an item
// twice, and is the first N items once the writes end". Four clients,
// each its own repository, send Adds (of one or two items ranking
// anywhere), Removes, Updates (moving an item up or down) and Rebuilds
// to one parent with Cap 3, so that pushes land in recomputations'
// windows and recomputations announce themselves. Removes and Updates of
// items another client removed report ErrNotFound; Remove, Update and
// Rebuild may report ErrConflict (the history model's reading of the
// godoc). At rest the subset is the first 3 items.
func TestAttack56MixedWritersAtRest(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		if p == portable {
			t.Skip("the push plan's announcements")
		}
		ctx := context.Background()
		db := mongotest.DB(t)
		r := newRepo[parent, item](t, db, config(3), p)
		insertParents(t, db, "a")
		const clients, rounds = 4, 60
		var wg sync.WaitGroup
		errs := make(chan error, clients*rounds)
		for c := range clients {
			o := otherRepo(t, db, p)
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(c), 56))
				for i := range rounds {
					id := int64(c*1000 + i + 1)
					var err error
					switch k := rng.IntN(10); {
					case k < 5:
						items := []item{{ID: id, Score: rng.Int64N(100)}}
						if k == 0 {
							items = append(items, item{ID: id + 500, Score: rng.Int64N(100)})
						}
						err = o.Add(ctx, "a", items...)
					case k < 7:
						err = o.Remove(ctx, "a", int64(rng.IntN(clients)*1000+rng.IntN(i+1)+1))
						if errors.Is(err, patterns.ErrNotFound) || errors.Is(err, patterns.ErrConflict) {
							err = nil
						}
					case k < 9:
						err = o.Update(ctx, "a", item{ID: int64(rng.IntN(clients)*1000 + rng.IntN(i+1) + 1), Score: rng.Int64N(100)})
						if errors.Is(err, patterns.ErrNotFound) || errors.Is(err, patterns.ErrConflict) {
							err = nil
						}
					default:
						err = o.Rebuild(ctx, "a")
						if errors.Is(err, patterns.ErrConflict) {
							err = nil
						}
					}
					if err != nil {
						errs <- err
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		atRest(t, r, "a", 3)
	})
}

// TestAttack56StaleAnnouncementHoldsOffOneAdd: the package
// documentation: "An announcement no compare-and-set follows (a call
// that returns after the read, or is cut short) holds pushes off until
// the next recomputation of the parent: the next Add's." A Remove
// announces itself (a push sorted an item out before its first
// compare-and-set), then two Rebuilds win before its second: its
// announcing read finds the revision two past the first and it returns,
// leaving the announcement. The next Add recomputes (its push matches
// nothing); the Add after it pushes again: four commands.
func TestAttack56StaleAnnouncementHoldsOffOneAdd(t *testing.T) {
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, p subset.Plan) {
		if p == portable {
			t.Skip("the push plan's announcements")
		}
		ctx := context.Background()
		r, rec := hookRepo(t, config(3), p)
		db := r.Indexes()[0].Collection.Database()
		insertParents(t, db, "a")
		require.NoError(t, r.Add(ctx, "a", five...))
		other := otherRepo(t, db, p)
		y := item{ID: 6, Score: 25}
		var addErr, r1, r2 error
		beforeUpdates(t, db, map[int]func(context.Context){
			1: func(ctx context.Context) { addErr = other.Add(ctx, "a", y) },
			2: func(ctx context.Context) { r1, r2 = other.Rebuild(ctx, "a"), other.Rebuild(ctx, "a") },
		})
		_, sent := attack56Op(t, rec, "Remove", func() error { return r.Remove(ctx, "a", int64(5)) })
		t.Logf("Remove sent %v", sent)
		require.NoError(t, addErr)
		require.NoError(t, r1)
		require.NoError(t, r2)
		requireState(t, r, "a", append(without(five, 5), y), 3)
		c := mongotest.NewCounter(t, db)
		z, w := item{ID: 7, Score: 70}, item{ID: 8, Score: 80}
		first := c.Count(func() { require.NoError(t, r.Add(ctx, "a", z)) })
		second := c.Count(func() { require.NoError(t, r.Add(ctx, "a", w)) })
		t.Logf("the next Add sent %v, the one after %v", first, second)
		requireState(t, r, "a", append(without(five, 5), y, z, w), 3)
		require.Equal(t, []string{"find", "insert", "update", "aggregate"}, second, "pushes again")
	})
}
