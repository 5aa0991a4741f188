// Package faults breaks the connection to the server in the middle of a
// repository's operation, at a chosen command, to prove that the
// operation is safe to retry after a failure at any step.
//
// A [Proxy] is a toxiproxy (github.com/Shopify/toxiproxy/v2, embedded in
// the test process, listening on 127.0.0.1) in front of the server the
// harness uses, with a client connected through it. [Proxy.Arm] makes the
// n-th command that client sends from then on fail in one of three ways
// ([Kind]: a reset, a timeout that closes the connection, or a stall past
// the operation's deadline) at one of two places ([Place]: before the
// server receives the command, or after the server ran it and before its
// reply arrives: the outcome the caller cannot know). The fault fires
// once: the toxic is removed as soon as the command has failed, so the
// driver's own retry, if any, and every later command go through.
//
// [Run] drives a whole case: it learns how many commands the operation
// sends, then for each command and place runs the operation on fresh data
// with that fault, runs it again on a healthy connection, and checks the
// final state.
package faults

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Kind is how a fault breaks the connection.
type Kind int

const (
	// Reset resets the connection (TCP RST) as the data arrives.
	Reset Kind = iota
	// Timeout drops the data and closes the connection after
	// [TimeoutAfter].
	Timeout
	// Stall drops the data and keeps the connection open, so that the
	// operation fails when its context's deadline (at least
	// [StallDeadline]) passes.
	Stall
)

func (k Kind) String() string {
	return [...]string{"reset", "timeout", "stall"}[k]
}

// Place is where in a command's round trip a fault strikes.
type Place int

const (
	// Before: the command never reaches the server.
	Before Place = iota
	// Inside: the server runs the command; its reply is lost.
	Inside
)

func (p Place) String() string { return [...]string{"before", "inside"}[p] }

// How long a Timeout waits before it closes the connection; the
// shortest deadline Run gives an operation that a Stall strikes, which the
// Stall lets pass; and the deadline of an operation that a Reset or a
// Timeout strikes, which fails on its own and needs a deadline only in
// case it hangs (see [Run]).
const (
	TimeoutAfter  = 200 * time.Millisecond
	StallDeadline = 1500 * time.Millisecond
	FaultDeadline = time.Minute
)

// Fault is one fault: at the Step-th command (from 1), at Place, of Kind.
type Fault struct {
	Step  int
	Place Place
	Kind  Kind
}

func (f Fault) String() string { return fmt.Sprintf("%s_%s_command_%d", f.Kind, f.Place, f.Step) }

// Faults returns the faults to inject into an operation of n commands:
// before and inside each command, the kinds taking turns so that each
// command meets two of them and the operation all three. (A fault after
// command k is the fault before command k+1; after the last command, the
// operation is over.)
func Faults(n int) []Fault {
	var out []Fault
	for step := 1; step <= n; step++ {
		for _, place := range []Place{Before, Inside} {
			out = append(out, Fault{Step: step, Place: place, Kind: Kind((2*step + int(place)) % 3)})
		}
	}
	return out
}

// Sampled reports whether the i-th of n faults ([Faults]) runs under
// -short: one in each run of three, at an offset that turns from one run
// to the next, and the first and the last. (Every third fault would be of
// one kind only: the kinds take turns with the same period, so that the
// sample would be all stalls, the slowest, and never a reset.)
func Sampled(i, n int) bool { return i%3 == (i/3)%3 || i == n-1 }

// Proxy is a toxiproxy in front of the server in use, and a client
// connected through it.
type Proxy struct {
	proxy  *toxiproxy.Proxy
	relay  *relay
	client *mongo.Client

	mu      sync.Mutex
	armed   *Fault
	seen    int    // commands started since Arm
	request int64  // request id of the command the fault struck
	toxic   string // name of the toxic in place, "" when none
	fired   atomic.Bool
}

// New starts a proxy in front of the server in use (a toxiproxy, then a
// relay, see [relay]) and connects a client through it; both stop when
// the test ends. It skips the test when the
// server's URI is not a single mongodb://host:port (an SRV record or a
// replica set seed list cannot be proxied this way).
func New(t testing.TB) *Proxy {
	t.Helper()
	u := serverURL(t)
	logger := zerolog.Nop()
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), logger)
	r := newRelay(t, u.Host)
	// Port 0: the proxy listens on a free port, and its Listen says which
	// once Start returns (a port reserved, freed and listened on again
	// could be taken in between by another listener of the process).
	p := &Proxy{proxy: toxiproxy.NewProxy(server, "mongo", "127.0.0.1:0", r.addr()), relay: r}
	if err := p.proxy.Start(); err != nil {
		t.Fatalf("faults: start the proxy: %v", err)
	}
	t.Cleanup(p.proxy.Stop)

	p.client = mongotest.Connect(t, through(u, p.proxy.Listen), &event.CommandMonitor{
		Started:   p.started,
		Succeeded: func(_ context.Context, e *event.CommandSucceededEvent) { p.finished(e.RequestID) },
		Failed:    func(_ context.Context, e *event.CommandFailedEvent) { p.finished(e.RequestID) },
	}, func(o *options.ClientOptions) {
		// Keep the monitoring connection quiet: a heartbeat that meets a
		// toxic would mark the server unknown for reasons of its own.
		o.SetServerMonitoringMode(options.ServerMonitoringModePoll).SetHeartbeatInterval(time.Minute)
	})
	return p
}

// serverURL returns the URI of the server in use, or skips the test when
// it is not a single mongodb://host:port (an SRV record or a replica set
// seed list cannot be proxied this way).
func serverURL(t testing.TB) *url.URL {
	t.Helper()
	u, err := url.Parse(mongotest.URI())
	if err != nil || u.Scheme != "mongodb" || strings.Contains(u.Host, ",") {
		t.Skipf("skipped: the server's URI is not a single mongodb://host:port, which the fault proxies need")
	}
	return u
}

// through returns the URI of the server u seen through a proxy listening
// at addr: a direct connection to addr, u's options kept.
func through(u *url.URL, addr string) string {
	v := *u
	q := v.Query()
	q.Set("directConnection", "true")
	v.Host, v.RawQuery = addr, q.Encode()
	return v.String()
}

// Client returns the client connected through the proxy.
func (p *Proxy) Client() *mongo.Client { return p.client }

// Arm makes the f.Step-th command the proxy's client starts from now fail
// as f says, once. Arm again to replace an armed fault that has not fired.
func (p *Proxy) Arm(f Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed, p.seen, p.request, p.toxic = &f, 0, 0, ""
	p.fired.Store(false)
}

// Fired reports whether the armed fault struck a command.
func (p *Proxy) Fired() bool { return p.fired.Load() }

// Disarm removes a fault that has not fired, and any toxic left in place.
func (p *Proxy) Disarm() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = nil
	p.removeToxic()
}

// started counts the client's commands and, at the armed step, puts the
// toxic in place before the command is written to the connection.
func (p *Proxy) started(_ context.Context, e *event.CommandStartedEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.armed == nil {
		return
	}
	if p.seen++; p.seen != p.armed.Step {
		return
	}
	f := *p.armed
	p.armed = nil
	stream := "upstream" // client to server: the command is lost
	if f.Place == Inside {
		stream = "downstream" // server to client: the reply is lost
	}
	typ, attrs := "reset_peer", `{"timeout": 0}`
	switch f.Kind {
	case Timeout:
		typ, attrs = "timeout", fmt.Sprintf(`{"timeout": %d}`, TimeoutAfter.Milliseconds())
	case Stall:
		typ, attrs = "timeout", `{"timeout": 0}`
	}
	name := "fault"
	spec := fmt.Sprintf(`{"name": %q, "type": %q, "stream": %q, "toxicity": 1, "attributes": %s}`, name, typ, stream, attrs)
	if _, err := p.proxy.Toxics.AddToxicJson(strings.NewReader(spec)); err != nil {
		panic(fmt.Sprintf("faults: add toxic %s: %v", spec, err))
	}
	p.toxic, p.request = name, e.RequestID
	p.fired.Store(true)
}

// finished removes the toxic once the command it struck has failed (or,
// had the fault not struck it, ended).
func (p *Proxy) finished(request int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.toxic != "" && request == p.request {
		p.removeToxic()
	}
}

func (p *Proxy) removeToxic() {
	if p.toxic == "" {
		return
	}
	_ = p.proxy.Toxics.RemoveToxic(context.Background(), p.toxic)
	p.toxic = ""
}

// ready pings the server through the proxy until a ping succeeds, three
// times at most. Removing a Timeout or a Stall closes every connection of
// the proxy (toxiproxy's timeout toxic closes its link when removed), the
// idle ones in the client's pool too; a ping that meets one fails, and
// the driver then clears the pool, so that the next case's first command
// does not fail for the last case's fault.
func (p *Proxy) ready(t testing.TB) {
	t.Helper()
	var err error
	for range 3 {
		if err = p.client.Ping(context.Background(), nil); err == nil {
			return
		}
	}
	t.Fatalf("faults: the server does not answer through the proxy: %v", err)
}

// quiesce waits until the server has answered every request that p's
// client sent it (see [relay]): no command of the client's still runs or
// waits to run. It polls every millisecond, for a minute at most, after
// which it fails the test. It cuts no connection.
func (p *Proxy) quiesce(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !p.relay.idle() {
		if time.Now().After(deadline) {
			t.Fatalf("faults: the server has not answered a request of the faulty client in a minute")
		}
		time.Sleep(time.Millisecond)
	}
}

// Case is an operation to break at every step, for [Run].
type Case[S any] struct {
	// Prepare stores the state before the operation in db, a fresh
	// database (with Reuse, the one database, emptied), and returns what
	// Op and Check need.
	Prepare func(t *testing.T, db *mongo.Database) S
	// Op runs the operation on db; Run calls it with db seen through the
	// faulty client, then through a healthy one.
	Op func(ctx context.Context, db *mongo.Database, s S) error
	// Retry, when set, runs the operation again after a failure instead of
	// Op (for an operation whose repeat after success reports, say,
	// patterns.ErrNotFound); it must return nil.
	Retry func(ctx context.Context, db *mongo.Database, s S) error
	// Check verifies the final state: nothing lost, nothing twice, the
	// repository's invariants.
	Check func(t *testing.T, db *mongo.Database, s S)
	// Reuse runs every case in one database, emptied before each Prepare
	// (every document of each of its collections is deleted; the
	// collections and their indexes stay), where each case otherwise gets a database of its own. Set it
	// when a case starts from documents only: Prepare stores them and
	// ensures the same indexes each time, and neither it nor Op creates a
	// collection with options (a validator, time series) or drops one;
	// nor does Prepare register a mongotest.OnCommand hook (a hook lives
	// until its test ends, keyed by the database's name, and would act on
	// the next cases' commands too).
	// Creating and dropping a
	// database is most of what a case costs on a server that keeps each
	// collection as tables (FerretDB 2: about 180 ms a case, against 11
	// ms to empty one and seed it again), and many cases side by side
	// then wait on each other's catalog changes.
	Reuse bool
}

// fresh returns the database a case's Prepare runs on: a new one for
// each call, or, with c.Reuse, shared emptied ([empty]). (No command of
// an earlier case still runs: Run quiesces the faulty client after each
// call, and the transient proxy forwards no write it fails.)
func (c Case[S]) fresh(shared *mongo.Database) func(t *testing.T) *mongo.Database {
	if !c.Reuse {
		return func(t *testing.T) *mongo.Database { return mongotest.DB(t) }
	}
	return func(t *testing.T) *mongo.Database {
		t.Helper()
		empty(t, shared)
		return shared
	}
}

// empty deletes every document of db's collections, and keeps the
// collections and their indexes.
func empty(t testing.TB, db *mongo.Database) {
	t.Helper()
	ctx := context.Background()
	names, err := db.ListCollectionNames(ctx, bson.D{{Key: "type", Value: "collection"}})
	if err != nil {
		t.Fatalf("faults: list the collections of %s: %v", db.Name(), err)
	}
	for _, name := range names {
		if strings.HasPrefix(name, "system.") {
			continue
		}
		if _, err := db.Collection(name).DeleteMany(ctx, bson.D{}); err != nil {
			t.Fatalf("faults: empty %s.%s: %v", db.Name(), name, err)
		}
	}
}

// Run breaks c's operation at every step. It first runs the operation on
// fresh data through a healthy client, counting its commands (n), and
// checks the result. Then for each fault of [Faults](n)
// (under -short, a third of them, see [Sampled]), as a subtest:
// on fresh data (a new database, or with [Case.Reuse] the one database
// emptied), it runs the operation through p's client with the fault
// armed and requires that the fault struck, then waits until the server
// has answered every request the client sent (a command whose reply was
// lost, or whose caller's deadline passed, may still run; see [relay])
// and runs none on the case's database (see [settle]);
// if the operation returned nil, its
// effect must be whole (Check passes at once: a driver's retry absorbed
// the fault); otherwise it runs the operation again through the healthy
// client, which must succeed, and checks the final state.
//
// The faulty call's deadline is [StallDeadline] for a Stall, which must
// let it pass, and [FaultDeadline] for the other kinds. A call that runs
// out of it before the fault's command proves nothing. A Stall's call
// that does (the server is slower than that now: others load it) starts
// again on fresh data with twice the deadline, three times at most,
// before Run gives up: the deadline follows the server's speed as the
// cases measure it. Any other call that ends before the fault struck
// fails the case at once. (Only a Stall's short deadline is the fault: a
// Reset's or a Timeout's call given it would also run out of time in its
// commands after the fault on a slow server, and start again for
// nothing.)
func Run[S any](t *testing.T, p *Proxy, c Case[S]) {
	t.Helper()
	ctx := context.Background()
	db := mongotest.DB(t)
	fresh := c.fresh(db)
	s := c.Prepare(t, db)
	counter := mongotest.NewCounter(t, db)
	var err error
	sent := counter.Count(func() { err = c.Op(ctx, db, s) })
	if err != nil {
		t.Fatalf("faults: the operation fails without a fault: %v", err)
	}
	c.Check(t, db, s)
	all := Faults(len(sent))
	mongotest.Detail(t, "the operation sends %d commands %v: %d faults", len(sent), sent, len(all))
	retry := c.Retry
	if retry == nil {
		retry = c.Op
	}
	// What each case's caller saw is logged only when that case fails: a
	// passing run prints one summary line instead of a line per fault.
	var failed, absorbed int
	for i, f := range all {
		if testing.Short() && !Sampled(i, len(all)) {
			continue
		}
		t.Run(fmt.Sprintf("%s_%s", f, sent[f.Step-1]), func(t *testing.T) {
			var db *mongo.Database
			var s S
			var err error
			deadline := FaultDeadline
			if f.Kind == Stall {
				deadline = StallDeadline
			}
			for attempt, limit := 1, deadline; ; attempt, limit = attempt+1, 2*limit {
				db = fresh(t)
				s = c.Prepare(t, db)
				p.ready(t)
				opCtx, cancel := context.WithTimeout(ctx, limit)
				p.Arm(f)
				err = c.Op(opCtx, p.Client().Database(db.Name()), s)
				// The deadline passed, or the driver saw that it would before
				// the server could answer, and did not send the command.
				ranOut := opCtx.Err() != nil || mongo.IsTimeout(err)
				cancel()
				p.Disarm()
				p.quiesce(t)
				settle(t, db)
				if p.Fired() {
					break
				}
				if !ranOut || f.Kind != Stall || attempt == 4 {
					t.Fatalf("the fault never struck: the operation sent fewer than %d commands within %s (err %v)", f.Step, limit, err)
				}
				mongotest.Detail(t, "the operation ran out of its %s before command %d (the server is slower now): again on fresh data, within %s", limit, f.Step, 2*limit)
			}
			if err == nil {
				absorbed++
				t.Cleanup(func() {
					if t.Failed() {
						mongotest.Detail(t, "the operation absorbed the fault (a driver retry) and returned nil: its effect must be whole")
					}
				})
				c.Check(t, db, s)
				return
			}
			failed++
			t.Cleanup(func() {
				if t.Failed() {
					mongotest.Detail(t, "the caller saw: %v", err)
				}
			})
			if err := retry(ctx, db, s); err != nil {
				t.Fatalf("the retry on a healthy connection failed: %v", err)
			}
			c.Check(t, db, s)
		})
	}
	mongotest.Detail(t, "faults: the caller saw an error in %d cases and a whole effect in %d (a driver retry); each was checked after a retry", failed, absorbed)
}

// settle waits until the server runs no command on db (a currentOp of
// its namespaces finds none in progress), polling every 10 ms, for a
// minute at most, after which it fails the test. It follows
// [Proxy.quiesce], which knows the requests the server has not answered:
// a server may also run on a command it has answered (one whose
// operation's time ran out, say, while its storage engine finishes it),
// which currentOp lists. A server whose currentOp lists nothing
// (FerretDB 1.x) or refuses it is not waited for.
func settle(t testing.TB, db *mongo.Database) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := bson.D{{Key: "currentOp", Value: 1}, {Key: "ns", Value: bson.D{{Key: "$regex", Value: "^" + regexp.QuoteMeta(db.Name()) + `\.`}}}}
	for {
		var res struct {
			InProg []bson.Raw `bson:"inprog"`
		}
		if err := db.Client().Database("admin").RunCommand(ctx, cmd).Decode(&res); err != nil {
			if ctx.Err() != nil {
				t.Fatalf("faults: a command still runs on %s after a minute", db.Name())
			}
			return // the server cannot tell
		}
		if len(res.InProg) == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Broken reports whether err is what a broken connection gives the
// caller: the network's error, a timeout or a passed deadline, the
// driver's pool cleared after another command failed, or a cursor the
// server dropped with the connection (FerretDB 1.x ties cursors to
// connections).
func Broken(err error) bool {
	if mongo.IsNetworkError(err) || mongo.IsTimeout(err) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	if pe, ok := errors.AsType[interface {
		error
		Retryable() bool
	}](err); ok && pe.Retryable() {
		return true // the driver's pool cleared (x/mongo/driver.RetryablePoolError)
	}
	se, ok := errors.AsType[mongo.ServerError](err)
	return ok && se.HasErrorCode(43) // CursorNotFound
}

// Saw checks what the caller of an operation struck by a fault saw: an
// error that starts with prefix (the package and the operation, as
// "subset: Add: "), that the broken connection explains ([Broken]), and
// that claims no outcome the caller cannot know: none of the sentinels of
// patterns (not found, invalid, a conflict, too large, unsupported) nor
// any of claims, the package's own.
func Saw(t testing.TB, prefix string, err error, claims ...error) {
	t.Helper()
	if err == nil {
		t.Fatalf("a fault's call returned nil, not an error")
	}
	if !strings.HasPrefix(err.Error(), prefix) {
		t.Fatalf("the error does not start %q, the package's format: %v", prefix, err)
	}
	if !Broken(err) {
		t.Fatalf("the error is not the network's, a timeout, or what a lost connection leaves: %v", err)
	}
	for _, claim := range append([]error{patterns.ErrNotFound, patterns.ErrInvalid, patterns.ErrConflict, patterns.ErrTooLarge, patterns.ErrUnsupported}, claims...) {
		if errors.Is(err, claim) {
			t.Fatalf("a fault claims no outcome, but the error is %v: %v", claim, err)
		}
	}
}

// Concurrently runs run(t, i) for i in [0, n) as subtests named name(i),
// all at once, and waits for them. Fault cases spend most of their time
// waiting (a stall lasts [StallDeadline]): side by side, each through a
// proxy of its own, they overlap their waits. (t.Run may be called from
// several goroutines; t.Parallel would run no more than -parallel, the
// number of cores, at a time.)
func Concurrently(t *testing.T, n int, name func(i int) string, run func(t *testing.T, i int)) {
	t.Helper()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { t.Run(name(i), func(t *testing.T) { run(t, i) }) })
	}
	wg.Wait()
}
