// Package chaos runs random concurrent histories of a repository's
// operations under faults, and checks them against a model of what the
// repository's godoc promises.
//
// A history is seeded: its seed draws each client's operations (their
// inputs, over a small id space shared by every client, so that they
// collide on purpose, and each call's deadline) and where the faults
// strike. Several clients, each a connection pool of its own reached
// through a fault proxy of its own ([faults.New]), run their operations
// at once; meanwhile a storm strikes faults (a reset, a timeout or a
// stall, before a command reaches the server or after it ran) at random
// moments on the connections of some of them, whatever they are doing.
// An operation that a fault or its deadline broke has an unknown outcome:
// it is recorded as [linear.Unknown], which may or may not have taken
// effect. When every client is done, the server has answered every
// command sent ([faults.Proxy.Settle]) and the history is checked twice:
// by porcupine against the model ([linear.Check], which writes the
// visualization on failure), and by the test's final check of the state
// at rest (what the godoc promises once every call has returned), which
// keeps the history as text when it fails ([linear.Keep]).
//
// The seed is logged with every history (shown on failure, see
// [mongotest.Detail]), and MONGOPATTERNS_SEED=<seed> draws the same
// operations again. MONGOPATTERNS_SOAK=<duration> (10m, say) runs
// histories with fresh seeds until the time is spent and logs the counts:
// histories, operations, faults struck, and the seeds that failed.
package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/faults"
	"github.com/mongopatterns/mongopatterns/internal/linear"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Spec is a repository's random history: S is what Prepare stored (the
// fixture's ids), Op one operation drawn by Gen.
type Spec[S, Op any] struct {
	// Clients is how many clients run operations at once (default 4);
	// Faulty of them (default half) meet the storm's faults.
	Clients, Faulty int
	// Ops is how many operations each client runs per history.
	Ops int
	// Prepare stores the fixture in db, a fresh database, and returns
	// what Do and Final need.
	Prepare func(t *testing.T, db *mongo.Database, rng *rand.Rand) S
	// Gen draws the i-th operation of client (client*Ops+i numbers it
	// uniquely in the history: a value it writes, say).
	Gen func(rng *rand.Rand, client, i int, s S) Op
	// Input is the porcupine input of op.
	Input func(op Op) any
	// Do runs op on db (seen through the client's pool) and returns its
	// porcupine output. An error that a fault or the deadline explains
	// ([faults.Broken]) is returned as err: the operation's outcome is
	// unknown; any other error the godoc names is part of the output. An
	// error Do returns that no fault explains fails the history.
	Do func(ctx context.Context, db *mongo.Database, s S, op Op) (output any, err error)
	// Model is what the godoc promises a concurrent caller.
	Model porcupine.Model
	// Final checks the state at rest after the history (db seen through a
	// healthy client): what the godoc promises once every call has
	// returned, given the operations recorded. Optional.
	Final func(t *testing.T, db *mongo.Database, s S, ops []porcupine.Operation)
}

// Deadlines: most calls get a generous one, which a stall holds them to;
// some a short one, which may pass in the middle of a call.
const (
	longDeadline  = 2 * time.Second
	shortDeadline = 800 * time.Millisecond
)

// Counts are what histories did.
type Counts struct {
	Histories, Operations, Unknown, Faults, Violations int
	Failed                                             []uint64 // the seeds of the histories that failed
}

func (c Counts) String() string {
	return fmt.Sprintf("%d histories, %d operations (%d of unknown outcome), %d faults struck, %d violations (seeds %v)",
		c.Histories, c.Operations, c.Unknown, c.Faults, c.Violations, c.Failed)
}

// Run runs histories of spec: one (with the seed MONGOPATTERNS_SEED when
// set), or with MONGOPATTERNS_SOAK set, histories until its duration is
// spent, each a subtest named by its seed, and logs the counts.
func Run[S, Op any](t *testing.T, spec Spec[S, Op]) Counts {
	t.Helper()
	if spec.Clients == 0 {
		spec.Clients = 4
	}
	if spec.Faulty == 0 {
		spec.Faulty = spec.Clients / 2
	}
	// On a server without atomic updates from concurrent connections
	// (FerretDB 1.x), every promise about concurrent writers holds only
	// for one client with one connection (patterns.FeatureConcurrentUpdates):
	// there the clients are goroutines sharing one proxy's client, whose
	// pool has one connection, and the storm strikes it.
	proxies := make([]*faults.Proxy, spec.Clients)
	shared := !mongotest.Server().Has(patterns.FeatureConcurrentUpdates)
	for i := range proxies {
		if shared && i > 0 {
			proxies[i] = proxies[0]
			continue
		}
		proxies[i] = faults.New(t)
	}
	if shared {
		spec.Faulty = 1
	}
	var counts Counts
	soak, err := soakTime()
	if err != nil {
		t.Fatal(err)
	}
	seed, fixed, err := firstSeed()
	if err != nil {
		t.Fatal(err)
	}
	end := time.Now().Add(soak)
	for {
		ok := t.Run(fmt.Sprintf("seed_%d", seed), func(t *testing.T) {
			history(t, spec, proxies, seed, &counts)
		})
		counts.Histories++
		if !ok {
			counts.Violations++
			counts.Failed = append(counts.Failed, seed)
		}
		if fixed || soak == 0 || time.Now().After(end) {
			break
		}
		seed = rand.Uint64()
	}
	if soak > 0 {
		t.Logf("soak of %s: %s", soak, counts)
	} else {
		mongotest.Detail(t, "%s", counts)
	}
	return counts
}

func soakTime() (time.Duration, error) {
	s := os.Getenv("MONGOPATTERNS_SOAK")
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("chaos: MONGOPATTERNS_SOAK=%q: %w", s, err)
	}
	return d, nil
}

// firstSeed returns MONGOPATTERNS_SEED (fixed) or a random seed.
func firstSeed() (seed uint64, fixed bool, err error) {
	s := os.Getenv("MONGOPATTERNS_SEED")
	if s == "" {
		return rand.Uint64(), false, nil
	}
	seed, err = strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("chaos: MONGOPATTERNS_SEED=%q: %w", s, err)
	}
	return seed, true, nil
}

// call is one drawn operation of a client, with its deadline.
type call[Op any] struct {
	op       Op
	deadline time.Duration
}

// draw returns client's operations of the history of seed: the same
// for the same seed, whatever the server does.
func draw[S, Op any](spec Spec[S, Op], seed uint64, client int, s S) []call[Op] {
	rng := rand.New(rand.NewPCG(seed, uint64(client)+1))
	calls := make([]call[Op], spec.Ops)
	for i := range calls {
		d := longDeadline
		if rng.IntN(4) == 0 {
			d = time.Duration(1+rng.Int64N(int64(shortDeadline/time.Millisecond))) * time.Millisecond
		}
		calls[i] = call[Op]{op: spec.Gen(rng, client, i, s), deadline: d}
	}
	return calls
}

func history[S, Op any](t *testing.T, spec Spec[S, Op], proxies []*faults.Proxy, seed uint64, counts *Counts) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("MONGOPATTERNS_SEED=%d draws this history's operations again", seed)
		}
	})
	mongotest.Detail(t, "seed %d", seed)
	db := mongotest.DB(t)
	s := spec.Prepare(t, db, rand.New(rand.NewPCG(seed, 0)))
	var h linear.History
	var wg sync.WaitGroup
	done := make(chan struct{})
	var struck int
	wg.Go(func() { struck = storm(proxies[:spec.Faulty], seed, done) })
	var clients sync.WaitGroup
	for c := range spec.Clients {
		calls := draw(spec, seed, c, s)
		cdb := proxies[c].Client().Database(db.Name())
		clients.Go(func() {
			for _, cl := range calls {
				ctx, cancel := context.WithTimeout(context.Background(), cl.deadline)
				in := spec.Input(cl.op)
				h.Do(c, in, func() any {
					out, err := spec.Do(ctx, cdb, s, cl.op)
					if err == nil {
						return out
					}
					if !faults.Broken(err) {
						t.Errorf("client %d: %v: an error no fault explains: %v", c, in, err)
					}
					return linear.Unknown{Err: err}
				})
				cancel()
			}
		})
	}
	clients.Wait()
	close(done)
	wg.Wait()
	for i, p := range proxies {
		if i == 0 || p != proxies[0] {
			p.Settle(t, db)
		}
	}
	ops := h.Operations()
	unknown := 0
	for _, o := range ops {
		if _, ok := o.Output.(linear.Unknown); ok {
			unknown++
		}
	}
	counts.Operations += len(ops)
	counts.Unknown += unknown
	counts.Faults += struck
	mongotest.Detail(t, "seed %d: %d operations of %d clients, %d of unknown outcome; %d faults struck", seed, len(ops), spec.Clients, unknown, struck)
	linear.Check(t, spec.Model, &h, time.Minute)
	if spec.Final != nil {
		t.Cleanup(func() {
			if t.Failed() {
				linear.Keep(t, spec.Model, &h)
			}
		})
		spec.Final(t, db, s, ops)
	}
}

// storm strikes faults on the proxies' connections at random moments
// (every 0 to 150 ms, one fault in place per proxy at a time) until done
// is closed, and returns how many struck a command.
func storm(proxies []*faults.Proxy, seed uint64, done <-chan struct{}) int {
	if len(proxies) == 0 {
		<-done
		return 0
	}
	rng := rand.New(rand.NewPCG(seed, 1<<32))
	armed := make([]bool, len(proxies))
	struck := 0
	for {
		select {
		case <-done:
			for i, p := range proxies {
				if armed[i] && p.Fired() {
					struck++
				}
			}
			return struck
		case <-time.After(time.Duration(rng.IntN(150)) * time.Millisecond):
		}
		i := rng.IntN(len(proxies))
		p := proxies[i]
		f := faults.Fault{Step: 1 + rng.IntN(3), Place: faults.Place(rng.IntN(2)), Kind: faults.Kind(rng.IntN(3))}
		fired := p.Fired()
		if p.Strike(f) {
			if armed[i] && fired {
				struck++
			}
			armed[i] = true
		}
	}
}
