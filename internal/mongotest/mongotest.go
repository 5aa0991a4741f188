package mongotest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/dial"
	"github.com/mongopatterns/mongopatterns/internal/shard"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// The state shared by the tests of one binary, set by Main.
var (
	client *mongo.Client
	server *patterns.Server
	uri    string
)

// Main starts (or finds) the server, connects the shared client, sets
// MONGODB_URI to the server's URI for the process (so that runnable
// examples connect as a program would), runs the tests and exits with
// their status. Call it from TestMain. When no server
// can be started it prints why and exits with status 1, so that the tests
// fail rather than skip.
func Main(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	s, err := startServer(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mongotest:", err)
		return 1
	}
	defer func() {
		if err := s.stop(); err != nil {
			fmt.Fprintln(os.Stderr, "mongotest: stop server:", err)
		}
	}()
	if err := connect(s.uri); err != nil {
		fmt.Fprintf(os.Stderr, "mongotest: %s at %s: %v\n", s.how, s.uri, err)
		return 1
	}
	defer func() { _ = client.Disconnect(context.Background()) }()
	// Runnable examples (func ExampleX) connect the way a program does,
	// from MONGODB_URI: point it at the server in use.
	if err := os.Setenv("MONGODB_URI", s.uri); err != nil {
		fmt.Fprintln(os.Stderr, "mongotest:", err)
		return 1
	}
	rate, err := measureSpeed()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mongotest: measure the server's speed:", err)
		return 1
	}
	slow = rate < slowRate
	fmt.Fprintf(os.Stderr, "mongotest: server %s, from %s, at %s; %.0f guarded updates/s (slow: %v)\n", server, s.how, redact(s.uri), rate, slow)
	return m.Run()
}

// connect connects the shared client and detects the server; on a server
// without patterns.FeatureConcurrentUpdates (FerretDB 1.x) the client has
// a single connection (see [dial.Connect] for why).
func connect(u string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, srv, err := dial.Connect(ctx, u, clientOptions)
	if err != nil {
		return err
	}
	client, server, uri = c, srv, u
	return nil
}

// clientOptions are the options of every client the harness connects.
func clientOptions() *options.ClientOptions {
	return options.Client().SetMonitor(monitor).SetTimeout(2 * time.Minute)
}

// NewClient connects another client to the server in use, as the shared
// one is connected (one connection where the server needs it), and
// disconnects it when the test ends. Commands it sends to a database are
// counted by that database's Counters too. Use it for a second process's
// view, or to write from an [OnCommand] hook while the shared client's
// only connection is busy.
func NewClient(t testing.TB) *mongo.Client {
	t.Helper()
	return Connect(t, uri, nil, nil)
}

// Connect connects a client to u (the server in use, reached another way:
// through a proxy, say) as [NewClient] does, and disconnects it when the
// test ends. The client reports its commands to the harness (Counters,
// [OnCommand]) and, when also is not nil, to also; edit, when not nil,
// adjusts the options before they are applied.
func Connect(t testing.TB, u string, also *event.CommandMonitor, edit func(*options.ClientOptions)) *mongo.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, _, err := dial.Connect(ctx, u, func() *options.ClientOptions {
		o := clientOptions()
		if also != nil {
			o.SetMonitor(chain(monitor, also))
		}
		if edit != nil {
			edit(o)
		}
		return o
	})
	if err != nil {
		t.Fatalf("mongotest: connect a client to %s: %v", redact(u), err)
	}
	t.Cleanup(func() { _ = c.Disconnect(context.Background()) })
	return c
}

// chain returns a monitor that reports every event to a, then to b.
func chain(a, b *event.CommandMonitor) *event.CommandMonitor {
	return &event.CommandMonitor{
		Started: func(ctx context.Context, e *event.CommandStartedEvent) {
			if a.Started != nil {
				a.Started(ctx, e)
			}
			if b.Started != nil {
				b.Started(ctx, e)
			}
		},
		Succeeded: func(ctx context.Context, e *event.CommandSucceededEvent) {
			if a.Succeeded != nil {
				a.Succeeded(ctx, e)
			}
			if b.Succeeded != nil {
				b.Succeeded(ctx, e)
			}
		},
		Failed: func(ctx context.Context, e *event.CommandFailedEvent) {
			if a.Failed != nil {
				a.Failed(ctx, e)
			}
			if b.Failed != nil {
				b.Failed(ctx, e)
			}
		},
	}
}

// slowRate is the speed, in guarded single-document updates per second
// through one connection, under which [Scale] calls a server slow. The
// embedded FerretDB 1.x measured 35 to 90 on a loaded 2-core machine and
// 265 to 431 on an idle one (it scans the collection for any filter but
// _id), and its repositories' multi-command operations are slower still;
// MongoDB and FerretDB 2.x do thousands. The line sits well above the
// embedded server's range: at 300 it fell inside it, so that the same
// suite ran its full workloads on some starts and took ten times as long
// (versioning's TestMigrateAllCancelledThenResumed: 124 s against 12 s).
const slowRate = 1000

// slow is whether the server in use measured below slowRate.
var slow bool

// Scale returns full on a fast server and reduced on a slow one (below
// 1,000 guarded updates per second, as measured once when the test binary
// starts; the log line of Main gives the figure). Tests use it to size
// their workloads, so that the whole suite fits its time budget on the
// embedded dev server and runs at full size on MongoDB; what a test
// asserts must not depend on the size.
func Scale(full, reduced int) int {
	if slow {
		return reduced
	}
	return full
}

// measureSpeed times guarded updates (filtered on a field other than _id,
// as a repository's are) on a collection of 100 small documents, in a
// database of its own that it drops.
func measureSpeed() (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := client.Database(fmt.Sprintf("mpt_speed_%d", os.Getpid()))
	defer func() { _ = db.Drop(context.WithoutCancel(ctx)) }()
	coll := db.Collection("speed")
	docs := make([]any, 100)
	for i := range docs {
		docs[i] = bson.D{{Key: "k", Value: i}, {Key: "n", Value: 0}}
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		return 0, err
	}
	const n = 30
	start := time.Now()
	for i := range n {
		if _, err := coll.UpdateOne(ctx, bson.D{{Key: "k", Value: i}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}); err != nil {
			return 0, err
		}
	}
	return n / time.Since(start).Seconds(), nil
}

// redact hides a password in a URI for the log.
func redact(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.User == nil {
		return u
	}
	if _, ok := p.User.Password(); ok {
		p.User = url.UserPassword(p.User.Username(), "xxxxx")
	}
	return p.String()
}

// Client returns the client shared by the test binary. Tests must not
// disconnect it.
func Client() *mongo.Client { return client }

// URI returns the connection string of the server in use.
func URI() string { return uri }

// Server returns what the server in use is and can do, as detected by
// [patterns.Capabilities].
func Server() *patterns.Server { return server }

// Require skips the test, naming the feature and the server, when the
// server lacks f according to [patterns.Capabilities].
func Require(t testing.TB, f patterns.Feature) {
	t.Helper()
	if !server.Has(f) {
		t.Skipf("skipped: %s lacks %s", server, f)
	}
}

// RequireExplainPlans skips the test unless the server explains a find
// as MongoDB does, with queryPlanner.winningPlan (its stages named IXSCAN,
// SORT, COLLSCAN), which the test reads. It asks the server once per
// process, with the explain of a find on a collection that does not exist
// (FerretDB 2.x answers with PostgreSQL's plan, under queryPlanner.Plan).
func RequireExplainPlans(t testing.TB) {
	t.Helper()
	explainOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var res bson.Raw
		explainErr = client.Database("mpt_explain").RunCommand(ctx, bson.D{
			{Key: "explain", Value: bson.D{{Key: "find", Value: "none"}}},
			{Key: "verbosity", Value: "queryPlanner"},
		}).Decode(&res)
		if explainErr == nil {
			_, err := res.LookupErr("queryPlanner", "winningPlan")
			explainPlans = err == nil
		}
	})
	if explainErr != nil {
		t.Fatalf("mongotest: explain a find: %v", explainErr)
	}
	if !explainPlans {
		t.Skipf("skipped: %s lacks MongoDB's explain output (queryPlanner.winningPlan), which the test reads", server)
	}
}

var (
	explainOnce  sync.Once
	explainPlans bool
	explainErr   error
)

var (
	dbSeq    atomic.Int64
	unsafeRE = regexp.MustCompile(`[^a-z0-9]+`)
)

// DB returns a fresh database for the test, with a unique name derived
// from the test's, and drops it when the test ends.
func DB(t testing.TB) *mongo.Database {
	t.Helper()
	if client == nil {
		t.Fatal("mongotest: no client: call mongotest.Main from TestMain")
	}
	name := strings.Trim(unsafeRE.ReplaceAllString(strings.ToLower(t.Name()), "_"), "_")
	if len(name) > 40 {
		name = name[:40]
	}
	name = fmt.Sprintf("mpt_%s_%d_%d", name, os.Getpid()%100000, dbSeq.Add(1))
	db := client.Database(name)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := db.Drop(ctx); err != nil {
			t.Errorf("mongotest: drop database %s: %v", name, err)
		}
	})
	return db
}

// Counter counts the commands sent to one database through the shared
// client (getMore and killCursors included: each is a round trip).
// Commands to other databases, such as the admin database's hello, are not
// counted, so tests that run in parallel do not disturb each other's
// counts.
type Counter struct {
	db       string
	mu       sync.Mutex
	commands []string
	sent     []bson.Raw // the commands as the driver encoded them
}

// counters maps a database name to the Counters watching it.
var (
	countersMu sync.RWMutex
	counters   = map[string][]*Counter{}
)

var monitor = &event.CommandMonitor{
	Started: func(ctx context.Context, e *event.CommandStartedEvent) {
		countersMu.RLock()
		for _, c := range counters[e.DatabaseName] {
			c.mu.Lock()
			c.commands = append(c.commands, e.CommandName)
			c.sent = append(c.sent, slices.Clone(e.Command))
			c.mu.Unlock()
		}
		if op := patterns.OperationFrom(ctx); op != nil {
			for _, r := range recorders {
				r.command(op, e.CommandName)
			}
		}
		var run []func(context.Context)
		for _, h := range hooks[e.DatabaseName] {
			if h.name == e.CommandName && ctx.Value(inHook{}) == nil {
				run = append(run, h.fn)
			}
		}
		countersMu.RUnlock()
		for _, fn := range run {
			fn(context.WithValue(ctx, inHook{}, true))
		}
	},
}

// hook is a function OnCommand runs before a command.
type hook struct {
	name string
	fn   func(context.Context)
}

// inHook marks the context of a hook, so that the commands a hook sends
// run no hooks.
type inHook struct{}

// hooks maps a database name to its hooks; guarded by countersMu.
var hooks = map[string][]*hook{}

// OnCommand runs fn each time a client of the harness is about to send a
// command named name (such as "update" or "find") to db, until the test
// ends: synchronously, from the driver's command monitor, after the
// command is built and before it is written to the connection, with the
// context of the operation. A test uses it to make another writer act in a
// repository's window between two of its commands. Commands sent with the
// context fn receives run no hooks. While fn runs, the
// sending client holds its connection: on a server with a single
// connection per client, fn must write through another client
// ([NewClient]) or it waits for itself.
func OnCommand(t testing.TB, db *mongo.Database, name string, fn func(ctx context.Context)) {
	t.Helper()
	h := &hook{name: name, fn: fn}
	countersMu.Lock()
	hooks[db.Name()] = append(hooks[db.Name()], h)
	countersMu.Unlock()
	t.Cleanup(func() {
		countersMu.Lock()
		defer countersMu.Unlock()
		hooks[db.Name()] = slices.DeleteFunc(hooks[db.Name()], func(o *hook) bool { return o == h })
		if len(hooks[db.Name()]) == 0 {
			delete(hooks, db.Name())
		}
	})
}

// NewCounter starts counting the commands sent to db; it stops when the
// test ends.
func NewCounter(t testing.TB, db *mongo.Database) *Counter {
	t.Helper()
	c := &Counter{db: db.Name()}
	countersMu.Lock()
	counters[c.db] = append(counters[c.db], c)
	countersMu.Unlock()
	t.Cleanup(func() {
		countersMu.Lock()
		defer countersMu.Unlock()
		counters[c.db] = slices.DeleteFunc(counters[c.db], func(o *Counter) bool { return o == c })
		if len(counters[c.db]) == 0 {
			delete(counters, c.db)
		}
	})
	return c
}

// Reset forgets the commands counted so far.
func (c *Counter) Reset() {
	c.mu.Lock()
	c.commands, c.sent = nil, nil
	c.mu.Unlock()
}

// RequireTargeted routes every command counted since the last Reset, as
// the driver encoded it, on a sharded cluster (package internal/shard):
// it fails the test for a command that mongos would refuse, and for one
// that goes to some or to every shard unless allowed names it, as
// "<command> <collection>" (for example "update items"), with the reason
// the package's documentation gives. It returns the routes, by command,
// for the test's log.
func (c *Counter) RequireTargeted(t testing.TB, cluster shard.Cluster, allowed map[string]string) []string {
	t.Helper()
	return c.RequireRefused(t, cluster, allowed, nil)
}

// RequireRefused is [Counter.RequireTargeted] for a shard key under which
// the package's documentation says some commands are refused: refused
// maps "<command> <collection>" to the server's error codes. A command so
// named may be refused with one of those codes (and with no other); each
// code must have been seen at least once, so that the test asserts the
// refusals the documentation states.
func (c *Counter) RequireRefused(t testing.TB, cluster shard.Cluster, allowed map[string]string, refused map[string][]int32) []string {
	t.Helper()
	c.mu.Lock()
	sent := slices.Clone(c.sent)
	c.mu.Unlock()
	var out []string
	type refusal struct {
		name string
		code int32
	}
	seen := map[refusal]bool{}
	for _, cmd := range sent {
		r, err := cluster.Route(cmd)
		if err != nil {
			t.Fatalf("mongotest: route %s: %v", cmd, err)
		}
		first := cmd.Index(0)
		coll, _ := first.Value().StringValueOK()
		name := first.Key() + " " + coll
		line := fmt.Sprintf("%s: %s", name, r)
		out = append(out, line)
		switch {
		case r.Target == shard.Refused && slices.Contains(refused[name], r.Code):
			seen[refusal{name, r.Code}] = true
		case r.Target == shard.Refused:
			t.Errorf("mongos would refuse %s\n%s", line, cmd)
		case r.Target != shard.OneShard && allowed[name] == "":
			t.Errorf("goes to %s, and the package does not say so: %s\n%s", r.Target, line, cmd)
		}
	}
	for name, codes := range refused {
		for _, code := range codes {
			if !seen[refusal{name, code}] {
				t.Errorf("%s was not refused with code %d, as the package says it is on %s", name, code, cluster)
			}
		}
	}
	return out
}

// N returns the number of commands counted since the last Reset.
func (c *Counter) N() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.commands)
}

// Commands returns the names of the commands counted since the last Reset,
// in the order they were sent.
func (c *Counter) Commands() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.commands...)
}

// Sent returns the commands counted since the last Reset, as the driver
// encoded them, in the order they were sent.
func (c *Counter) Sent() []bson.Raw {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.sent)
}

// Count resets the counter, runs fn, and returns the names of the commands
// fn sent to the database.
func (c *Counter) Count(fn func()) []string {
	c.Reset()
	fn()
	return c.Commands()
}

// Window runs another writer once, in the window before one command of
// an operation: the at-th (from 0) of the commands named in names that a
// client of the harness sends to db (see [OnCommand]). A test runs the
// operation once per window, at = 0, 1, ..., until [Window.Fired]
// reports that the operation ended before the at-th command: so the
// other writer acts before each of the operation's commands in turn.
type Window struct {
	mu    sync.Mutex
	at    int
	fn    func(ctx context.Context)
	sent  []string // the commands seen before the window
	fired bool
	shut  bool
}

// InWindow arms a [Window] on db; [Window.Close] disarms it (a test's
// own reads of the result must not count), and so does the end of the
// test.
func InWindow(t testing.TB, db *mongo.Database, at int, fn func(ctx context.Context), names ...string) *Window {
	t.Helper()
	w := &Window{at: at, fn: fn}
	for _, name := range names {
		OnCommand(t, db, name, func(ctx context.Context) { w.before(ctx, name) })
	}
	return w
}

func (w *Window) before(ctx context.Context, name string) {
	w.mu.Lock()
	if w.shut || w.fired {
		w.mu.Unlock()
		return
	}
	if len(w.sent) < w.at {
		w.sent = append(w.sent, name)
		w.mu.Unlock()
		return
	}
	w.fired = true
	w.mu.Unlock()
	w.fn(ctx)
}

// Close disarms the window.
func (w *Window) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.shut = true
}

// Fired reports whether the other writer ran.
func (w *Window) Fired() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fired
}

// Sent returns the names of the commands sent before the window.
func (w *Window) Sent() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.sent)
}
