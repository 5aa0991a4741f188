package subset_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/subset"
)

// TestPairsOnOneItem runs two writes of one item (Add, Update,
// Remove, with a high or a low score), the inner one from another client
// whole in the window before each command of the outer one, from three
// starting states, and checks the promise of subset/doc.go ("the subset a
// [Repo.Get] returns is the first N items of a linearization of the
// writes"; "the subset ... is the first N items once the writes end") and
// of issue 34 ("after concurrent Add(x) and Remove(x) the subset is the
// first Cap of All", x "stored or not as some order of the calls gives"):
// once both returned, the items and each call's ErrNotFound are those of
// one of the two orders, and the subset is the first Cap items.
//
// It runs over 200 windows (40 s on FerretDB 2, 73 s on FerretDB 1.24):
// a long form, run in the soak (MONGOPATTERNS_SOAK set); the suite keeps
// TestAddAndRemoveOfOneItem, TestUpdateInAddsWindow and
// TestRemoveAndAddInAddsWindow, which cover its failing cases.
func TestPairsOnOneItem(t *testing.T) {
	if os.Getenv("MONGOPATTERNS_SOAK") == "" {
		t.Skip("skipped: a long form, run with MONGOPATTERNS_SOAK set")
	}
	type op struct {
		name  string
		kind  string // add, update, remove
		score int64
	}
	ops := []op{{"AddHi", "add", 100}, {"AddLo", "add", 1}, {"UpdHi", "update", 100}, {"UpdLo", "update", 1}, {"Remove", "remove", 0}}
	starts := []struct {
		name  string
		score int64 // 0: x absent
	}{{"absent", 0}, {"hi", 100}, {"lo", 1}}
	mongotest.RunPlans(t, subset.PlanFor, func(t *testing.T, plan subset.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		r := newRepo[parent, item](t, db, config(3), plan)
		other := otherRepo(t, db, plan)
		run := 0
		failures := 0
		for _, outer := range ops {
			for _, inner := range ops {
				if outer.kind != "update" && inner.kind != "update" {
					continue // Add with Remove: TestAddAndRemoveOfOneItem
				}
				for _, st := range starts {
					for at, fired := 0, true; fired && failures < 10; at++ {
						run++
						base := int64(run * 100)
						pid := fmt.Sprintf("p%d", run)
						insertParents(t, db, pid)
						model := map[int64]int64{}
						var before []item
						for i := int64(1); i <= 5; i++ {
							before = append(before, item{ID: base + i, Score: i * 10})
							model[base+i] = i * 10
						}
						x := base + 9
						if st.score != 0 {
							before = append(before, item{ID: x, Score: st.score})
							model[x] = st.score
						}
						require.NoError(t, r.Add(ctx, pid, before...))
						call := func(o op, rr *subset.Repo[parent, item], ctx context.Context) error {
							switch o.kind {
							case "add":
								return rr.Add(ctx, pid, item{ID: x, Score: o.score})
							case "update":
								return rr.Update(ctx, pid, item{ID: x, Score: o.score})
							}
							return rr.Remove(ctx, pid, x)
						}
						apply := func(m map[int64]int64, o op) bool { // reports not found
							_, ok := m[x]
							switch o.kind {
							case "add":
								if !ok {
									m[x] = o.score
								}
								return false
							case "update":
								if ok {
									m[x] = o.score
								}
								return !ok
							}
							delete(m, x)
							return !ok
						}
						var innerErr error
						w := mongotest.InWindow(t, db, at, func(ctx context.Context) { innerErr = call(inner, other, ctx) },
							"insert", "delete", "find", "update", "aggregate")
						outerErr := call(outer, r, ctx)
						w.Close()
						if fired = w.Fired(); !fired {
							continue
						}
						name := fmt.Sprintf("%s outer, %s inner (other client), x %s, before command %d of the outer call", outer.name, inner.name, st.name, at)
						for _, e := range []error{outerErr, innerErr} {
							if e != nil && !errors.Is(e, patterns.ErrNotFound) {
								t.Errorf("%s: unexpected error %v", name, e)
							}
						}
						got := stored(t, r, pid)
						gotMap := map[int64]int64{}
						for _, it := range got {
							gotMap[it.ID] = it.Score
						}
						ok := false
						for k, order := range [][2]op{{outer, inner}, {inner, outer}} {
							m := maps.Clone(model)
							nf := [2]bool{apply(m, order[0]), apply(m, order[1])}
							outerNF, innerNF := nf[0], nf[1]
							if k == 1 {
								outerNF, innerNF = nf[1], nf[0]
							}
							if maps.Equal(m, gotMap) && outerNF == errors.Is(outerErr, patterns.ErrNotFound) && innerNF == errors.Is(innerErr, patterns.ErrNotFound) {
								ok = true
							}
						}
						if !ok {
							failures++
							t.Errorf("%s: items %v, outer err %v, inner err %v: no order of the two calls gives them", name, gotMap, outerErr, innerErr)
						}
						p, err := r.Get(ctx, pid)
						require.NoError(t, err)
						want := ranked(got)[:min(3, len(got))]
						var top []item
						for _, it := range p.Top {
							top = append(top, item{ID: it.ID, Score: it.Score})
						}
						for i := range want {
							want[i].Parent = ""
						}
						if !slices.Equal(want, top) {
							failures++
							t.Errorf("%s: subset %v, want the first 3 of the items: %v", name, top, want)
						}
					}
				}
			}
		}
		mongotest.Detail(t, "%d runs", run)
	})
}
