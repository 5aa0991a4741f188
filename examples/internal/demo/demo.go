// Package demo is the plumbing shared by the example programs: connect to
// MONGODB_URI or start the embedded dev server, give each program a clean
// database, and report what it did (documents stored, commands sent).
//
// A service copying an example keeps the example's run function and
// replaces demo.Connect with its own client.
package demo

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/devserver"
	"github.com/mongopatterns/mongopatterns/internal/dial"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Run is the main function of an example program: it connects, hands a
// clean database of the given name to run, prints the report and exits
// with status 1 (naming the program) if anything failed. run is the part
// of an example that a service copies.
func Run(name string, run func(ctx context.Context, db *mongo.Database) error) {
	if err := runMain(name, run); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", filepath.Base(os.Args[0]), err)
		os.Exit(1)
	}
}

func runMain(name string, run func(ctx context.Context, db *mongo.Database) error) error {
	ctx := context.Background()
	env, err := Connect(ctx)
	if err != nil {
		return err
	}
	defer env.Close()
	db, err := env.Database(ctx, name)
	if err != nil {
		return err
	}
	if err := run(ctx, db); err != nil {
		return err
	}
	return env.Report(ctx, os.Stdout, db)
}

// Env is a connected client and what it has sent.
type Env struct {
	Client *mongo.Client
	Server *patterns.Server
	URI    string

	mu       sync.Mutex
	commands map[string]map[string]int // database -> command -> count
	stop     func() error
}

// Connect connects to MONGODB_URI or, when it is unset, to an embedded
// FerretDB it starts (and Close stops).
func Connect(ctx context.Context) (*Env, error) {
	e := &Env{commands: map[string]map[string]int{}, stop: func() error { return nil }}
	e.URI = os.Getenv("MONGODB_URI")
	if e.URI == "" {
		srv, err := devserver.Start(ctx, devserver.Options{})
		if err != nil {
			return nil, err
		}
		e.URI, e.stop = srv.URI(), srv.Stop
	}
	monitor := &event.CommandMonitor{Started: func(_ context.Context, ev *event.CommandStartedEvent) {
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.commands[ev.DatabaseName] == nil {
			e.commands[ev.DatabaseName] = map[string]int{}
		}
		e.commands[ev.DatabaseName][ev.CommandName]++
	}}
	c, srv, err := dial.Connect(ctx, e.URI, func() *options.ClientOptions { return options.Client().SetMonitor(monitor) })
	if err != nil {
		_ = e.stop()
		return nil, err
	}
	e.Client, e.Server = c, srv
	return e, nil
}

// Close disconnects and stops the embedded server if Connect started it.
func (e *Env) Close() error {
	_ = e.Client.Disconnect(context.Background())
	return e.stop()
}

// Database drops the named database, so that the program starts clean,
// and returns it; commands sent to it are counted from here on.
func (e *Env) Database(ctx context.Context, name string) (*mongo.Database, error) {
	db := e.Client.Database(name)
	if err := db.Drop(ctx); err != nil {
		return nil, fmt.Errorf("drop %s: %w", name, err)
	}
	e.mu.Lock()
	delete(e.commands, name)
	e.mu.Unlock()
	return db, nil
}

// Report prints the documents in each collection of db and the commands
// sent to it, the number a service pays for what the program did.
func (e *Env) Report(ctx context.Context, w io.Writer, db *mongo.Database) error {
	e.mu.Lock()
	sent := e.commands[db.Name()]
	var parts []string
	total := 0
	for _, name := range slices.Sorted(maps.Keys(sent)) {
		parts = append(parts, fmt.Sprintf("%s %d", name, sent[name]))
		total += sent[name]
	}
	e.mu.Unlock()
	fmt.Fprintf(w, "commands sent to %s: %d (%s)\n", db.Name(), total, strings.Join(parts, ", "))
	names, err := db.ListCollectionNames(ctx, bson.D{})
	if err != nil {
		return err
	}
	slices.Sort(names)
	for _, n := range names {
		count, err := db.Collection(n).CountDocuments(ctx, bson.D{})
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "documents in %s: %d\n", n, count)
	}
	return nil
}
