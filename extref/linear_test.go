package extref_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/extref"
	"github.com/mongopatterns/mongopatterns/internal/linear"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// refInput is an operation on one source and its copies: an Update that
// sets the source's name to "v<value>", a Sync, a read of the source, or
// a read of every copy of it.
type refInput struct {
	op    string // "update", "sync", "source", "copies"
	value int
}

// refOutput is what a read returned: the values of the names it read.
type refOutput struct{ values []int }

// refState is the source's current value and the set of values it has had
// (a bit per value).
type refState struct {
	current int
	had     uint64
}

// sourceAndCopies is the model of what extref promises readers of one
// source and its copies under concurrent Updates and Syncs. The source is
// a register (each Update's findAndModify is atomic), so a read of it
// returns its current value. A copy is not: Sync and Update write copies
// one document at a time, and one that read an older value may write it
// after another wrote a newer one (Sync's godoc: its confirming read then
// writes again). So a read of a copy may return any value the source has
// had, the current one or an older one, but never a value the source never
// had: that is exactly the documented weakness.
var sourceAndCopies = porcupine.Model{
	Init: func() any { return refState{had: 1} }, // value 0, the fixture's
	Step: func(state, input, output any) (bool, any) {
		s, in := state.(refState), input.(refInput)
		switch in.op {
		case "update":
			return true, refState{current: in.value, had: s.had | 1<<in.value}
		case "source":
			out := output.(refOutput)
			return len(out.values) == 1 && out.values[0] == s.current, s
		case "copies":
			for _, v := range output.(refOutput).values {
				if s.had&(1<<v) == 0 {
					return false, s
				}
			}
		}
		return true, s
	},
	DescribeOperation: func(input, output any) string {
		in := input.(refInput)
		if out, ok := output.(refOutput); ok && in.op != "update" && in.op != "sync" {
			return fmt.Sprintf("%s -> %v", in.op, out.values)
		}
		return fmt.Sprintf("%s(%d)", in.op, in.value)
	},
	DescribeState: func(state any) string {
		s := state.(refState)
		return fmt.Sprintf("current %d, had %b", s.current, s.had)
	},
}

// nameValue reads the value k of a name "v<k>"; the fixture's name of
// product 1, "Kettle", is 0.
func nameValue(name string) (int, error) {
	if name == "Kettle" {
		return 0, nil
	}
	return strconv.Atoi(strings.TrimPrefix(name, "v"))
}

// readSource returns the value of product 1.
func readSource(db *mongo.Database) ([]int, error) {
	var src Product
	if err := db.Collection("products").FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&src); err != nil {
		return nil, err
	}
	v, err := nameValue(src.Name)
	return []int{v}, err
}

// readCopies returns the values of every copy of product 1: in featured 1
// and in the carts' items.
func readCopies(db *mongo.Database) ([]int, error) {
	var out []int
	for _, tg := range []extref.Target{featuredTarget, cartsTarget} {
		cur, err := db.Collection(tg.Collection).Find(ctx, bson.D{})
		if err != nil {
			return nil, err
		}
		var docs []bson.Raw
		if err := cur.All(ctx, &docs); err != nil {
			return nil, err
		}
		for _, doc := range docs {
			for _, cp := range copiesAt(doc, tg) {
				if cp.Lookup("id").Int32() == 1 {
					v, err := nameValue(cp.Lookup("name").StringValue())
					if err != nil {
						return nil, err
					}
					out = append(out, v)
				}
			}
		}
	}
	return out, nil
}

// TestCopiesHoldOnlyValuesTheSourceHad records a concurrent history of two
// goroutines updating product 1 through Update, one syncing it, and two
// reading the source and its copies, and checks it against
// sourceAndCopies: the source reads linearizable, every copy read a value
// the source had. When all have returned nil (after one more Sync where an
// Update or a Sync gave up with ErrConflict, as their godoc says), every
// copy equals the source.
func TestCopiesHoldOnlyValuesTheSourceHad(t *testing.T) {
	mongotest.RunPlans(t, extref.PlanFor, func(t *testing.T, p extref.Plan) {
		db := mongotest.DB(t)
		s := prepareScene(t, db, faultScene{targets: []extref.Target{cartsTarget, featuredTarget}, carts: []int32{1, 2, 3, 5}, featured: []int32{1, 2, 3}}, p)
		r, err := s.ref(db)
		require.NoError(t, err)

		const updaters, updates, syncs, readers, reads = 2, 8, 8, 2, 12
		var h linear.History
		var wg sync.WaitGroup
		var mu sync.Mutex
		conflicts := 0
		gaveUp := func(err error) {
			if errors.Is(err, patterns.ErrConflict) {
				mu.Lock()
				conflicts++
				mu.Unlock()
				return
			}
			assert.NoError(t, err)
		}
		// read records a read; an error fails the test (and the output, nil,
		// the model).
		read := func(c int, op string, fn func(*mongo.Database) ([]int, error)) {
			h.Do(c, refInput{op: op}, func() any {
				values, err := fn(db)
				assert.NoError(t, err)
				return refOutput{values: values}
			})
		}
		for u := range updaters {
			wg.Go(func() {
				for i := range updates {
					v := 1 + u*updates + i
					h.Do(u, refInput{op: "update", value: v}, func() any {
						_, err := r.Update(ctx, 1, setName(fmt.Sprintf("v%d", v)))
						// An Update that gave up syncing (ErrNotSynced wrapping
						// ErrConflict) updated the source.
						gaveUp(err)
						return nil
					})
				}
			})
		}
		wg.Go(func() {
			for range syncs {
				h.Do(updaters, refInput{op: "sync"}, func() any {
					_, err := r.Sync(ctx, 1)
					gaveUp(err)
					return nil
				})
			}
		})
		for c := range readers {
			wg.Go(func() {
				for i := range reads {
					if i%2 == 0 {
						read(updaters+1+c, "source", readSource)
					} else {
						read(updaters+1+c, "copies", readCopies)
					}
				}
			})
		}
		wg.Wait()
		require.Equal(t, updaters*updates+syncs+readers*reads, h.Len())
		linear.Check(t, sourceAndCopies, &h, 10*time.Second)

		mongotest.Detail(t, "%d operations gave up with ErrConflict (the source kept changing)", conflicts)
		if conflicts > 0 {
			_, err := r.Sync(ctx, 1)
			require.NoError(t, err)
		}
		final, err := readSource(db)
		require.NoError(t, err)
		require.NotZero(t, final[0])
		copies, err := readCopies(db)
		require.NoError(t, err)
		require.Len(t, copies, 5, "featured 1, carts 1, 2 (twice) and 5")
		for _, v := range copies {
			require.Equal(t, final[0], v, "every copy equals the source once all have returned")
		}
	})
}

// TestSourceAndCopiesModel: the model accepts a copy holding an older
// value of the source, and rejects a copy holding a value the source never
// had, and a read of the source that misses a completed Update.
func TestSourceAndCopiesModel(t *testing.T) {
	op := func(client int, in refInput, out any, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret}
	}
	update := func(v int, call, ret int64) porcupine.Operation {
		return op(0, refInput{op: "update", value: v}, nil, call, ret)
	}
	read := func(what string, v int, call, ret int64) porcupine.Operation {
		return op(1, refInput{op: what}, refOutput{values: []int{v}}, call, ret)
	}
	for _, c := range []struct {
		name    string
		history []porcupine.Operation
		ok      bool
	}{
		{"an older copy", []porcupine.Operation{update(1, 0, 1), update(2, 2, 3), read("copies", 1, 4, 5)}, true},
		{"the initial copy", []porcupine.Operation{update(1, 0, 1), read("copies", 0, 4, 5)}, true},
		{"a copy from a concurrent update", []porcupine.Operation{update(1, 0, 10), read("copies", 1, 2, 3)}, true},
		{"a copy the source never had", []porcupine.Operation{update(1, 0, 1), read("copies", 2, 4, 5)}, false},
		{"a copy ahead of the source", []porcupine.Operation{read("copies", 1, 0, 1), update(1, 2, 3)}, false},
		{"a stale source", []porcupine.Operation{update(1, 0, 1), update(2, 2, 3), read("source", 1, 4, 5)}, false},
	} {
		require.Equal(t, c.ok, porcupine.CheckOperations(sourceAndCopies, c.history), c.name)
	}
}
