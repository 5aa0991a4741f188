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

	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/dial"
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
	fmt.Fprintf(os.Stderr, "mongotest: server %s, from %s, at %s\n", server, s.how, redact(s.uri))
	return m.Run()
}

// connect connects the shared client and detects the server; on FerretDB
// the client has a single connection (see [dial.Connect] for why).
func connect(u string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, srv, err := dial.Connect(ctx, u, func() *options.ClientOptions {
		return options.Client().SetMonitor(monitor).SetTimeout(2 * time.Minute)
	})
	if err != nil {
		return err
	}
	client, server, uri = c, srv, u
	return nil
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
}

// counters maps a database name to the Counters watching it.
var (
	countersMu sync.RWMutex
	counters   = map[string][]*Counter{}
)

var monitor = &event.CommandMonitor{
	Started: func(_ context.Context, e *event.CommandStartedEvent) {
		countersMu.RLock()
		defer countersMu.RUnlock()
		for _, c := range counters[e.DatabaseName] {
			c.mu.Lock()
			c.commands = append(c.commands, e.CommandName)
			c.mu.Unlock()
		}
	},
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
	c.commands = nil
	c.mu.Unlock()
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

// Count resets the counter, runs fn, and returns the names of the commands
// fn sent to the database.
func (c *Counter) Count(fn func()) []string {
	c.Reset()
	fn()
	return c.Commands()
}
