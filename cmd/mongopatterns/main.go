// Command mongopatterns is the command line of the mongopatterns library.
// Its first subcommand, doctor, checks a live database for the schema and
// index anti-patterns that package doctor finds:
//
//	go install github.com/mongopatterns/mongopatterns/cmd/mongopatterns@latest
//	mongopatterns doctor --uri mongodb://localhost:27017 --db shop
//
// Run "mongopatterns doctor -h" for its flags. The exit status is 0 when
// nothing at or above --fail-on severity is found, 1 when something is,
// and 2 on a usage or connection error or when the database has no
// collection to check, so that it can gate a CI job. Gate on the installed
// binary (or one built with go build -o): go run ends with status 1
// whatever status the command ended with.
//
// Its second, probe, measures which features a server really has (one
// real probe per patterns.Feature, in a scratch database it creates and
// drops) and compares them with what the library detects; run
// "mongopatterns probe -h".
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/auth"

	"github.com/mongopatterns/mongopatterns/doctor"
)

// Exit statuses.
const (
	exitOK       = 0 // nothing at or above --fail-on
	exitFindings = 1 // findings at or above --fail-on
	exitUsage    = 2 // bad flags, unreachable server, failed check
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage: mongopatterns <command> [flags]

commands:
  doctor   check a live database for schema and index anti-patterns
  probe    measure which features a server really has, and what the library detects

Run "mongopatterns doctor -h" or "mongopatterns probe -h" for their flags.
`

// run is the command: args without the program name; it returns the exit
// status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "doctor":
		return runDoctor(ctx, args[1:], stdout, stderr)
	case "probe":
		return runProbe(ctx, args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "mongopatterns: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
}

const doctorUsage = `usage: mongopatterns doctor --db NAME [flags]

Samples every collection of the database and reports the schema and index
anti-patterns it finds, with the evidence measured and a remedy. It only
reads: listCollections, listIndexes, $collStats, $indexStats, $sample (or
find) and, for --query shapes, explain at queryPlanner verbosity.

Exit status: 0 when nothing at or above --fail-on is found, 1 when
something is, 2 on a usage or connection error, or when the database has
no collection to check (a misspelt --db must not pass a CI gate).

JSON forms (MongoDB extended JSON):
  --query     {"collection": "orders", "filter": {"status": "paid"}, "sort": {"createdAt": -1}, "name": "paid orders"}
  --shard-key {"collection": "orders", "key": {"customerId": "hashed"}}
  --pipeline  {"collection": "orders", "pipeline": [{"$match": {"status": "paid"}}, ...], "name": "report"}

flags:
`

// multi is a flag that may be given several times.
type multi []string

func (m *multi) String() string     { return strings.Join(*m, " ") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func runDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), doctorUsage)
		fs.PrintDefaults()
	}
	uri := fs.String("uri", os.Getenv("MONGODB_URI"), "connection string (default $MONGODB_URI); add readPreference=secondaryPreferred to sample a secondary")
	dbName := fs.String("db", "", "database to check (required)")
	format := fs.String("format", "text", "report format: text, json or html (json and html go to stdout alone; progress and logs to stderr)")
	failOn := fs.String("fail-on", "warning", "exit 1 when a finding is at or above this severity: info, warning, critical, or never")
	sample := fs.Int("sample", doctor.DefaultSampleSize, "documents sampled per collection")
	fullScan := fs.Bool("full-scan", false, "read every document instead of a sample")
	timeout := fs.Duration("timeout", 10*time.Second, "time to find and reach the server")
	validators := fs.Bool("validators", false, "report collections without a validator (missing-validator; validator-drift needs Go types: doctor.Options.Validators)")
	var queries, shardKeys, pipelines, collections, disable multi
	fs.Var(&queries, "query", "a query shape to check, as JSON (repeatable)")
	fs.Var(&shardKeys, "shard-key", "a proposed shard key to measure, as JSON (repeatable)")
	fs.Var(&pipelines, "pipeline", "an aggregation pipeline to lint, as JSON (repeatable)")
	fs.Var(&collections, "collection", "check only this collection (repeatable; default all)")
	fs.Var(&disable, "disable", "a rule id not to evaluate (repeatable)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "mongopatterns doctor: "+format+"\n", a...)
		return exitUsage
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if *dbName == "" {
		return usageErr("--db is required")
	}
	if *uri == "" {
		return usageErr("--uri is required (or set MONGODB_URI)")
	}
	if *format != "text" && *format != "json" && *format != "html" {
		return usageErr("--format %q: want text, json or html", *format)
	}
	var threshold doctor.Severity
	if *failOn != "never" {
		s, err := doctor.ParseSeverity(*failOn)
		if err != nil {
			return usageErr("--fail-on %q: want info, warning, critical or never", *failOn)
		}
		threshold = s
	}
	opts := doctor.Options{SampleSize: *sample, FullScan: *fullScan, Collections: collections, Disable: disable}
	if *validators {
		opts.Validators = &doctor.ValidatorCheck{}
	}
	for _, q := range queries {
		v, err := doctor.ParseQuery([]byte(q))
		if err != nil {
			return usageErr("--query: %v", err)
		}
		opts.Queries = append(opts.Queries, v)
	}
	for _, k := range shardKeys {
		v, err := doctor.ParseShardKey([]byte(k))
		if err != nil {
			return usageErr("--shard-key: %v", err)
		}
		opts.ShardKeys = append(opts.ShardKeys, v)
	}
	for _, p := range pipelines {
		v, err := doctor.ParsePipeline([]byte(p))
		if err != nil {
			return usageErr("--pipeline: %v", err)
		}
		opts.Pipelines = append(opts.Pipelines, v)
	}
	bar := &progressBar{w: stderr}
	if isTerminal(stderr) {
		opts.Progress = bar.show
	}

	client, err := connect(ctx, *uri, *timeout)
	if err != nil {
		return usageErr("%v", err)
	}
	defer func() { _ = client.Disconnect(context.WithoutCancel(ctx)) }()

	rep, err := doctor.Check(ctx, client.Database(*dbName), opts)
	bar.done() // before the report, which may go to the same terminal
	if err != nil {
		// The error reads "doctor: Check: ...": prefixed with the program's
		// name only, not "mongopatterns doctor: doctor: Check: ...".
		fmt.Fprintf(stderr, "mongopatterns %v\n", err)
		return exitUsage
	}
	if len(rep.Collections) == 0 {
		// A misspelt --db must not pass a CI gate as a clean database.
		return usageErr("database %q has no collections to check (is --db right?)", *dbName)
	}
	if err := write(stdout, *format, &rep); err != nil {
		return usageErr("write the report: %v", err)
	}
	if threshold != 0 && rep.Max() >= threshold {
		if *format != "text" {
			n := len(rep.AtLeast(threshold))
			fmt.Fprintf(stderr, "mongopatterns doctor: %d %s at or above %s\n", n, map[bool]string{true: "finding", false: "findings"}[n == 1], threshold)
		}
		return exitFindings
	}
	return exitOK
}

// connect connects and pings the server, so that an unreachable server is
// a clear error before the check starts.
func connect(ctx context.Context, uri string, timeout time.Duration) (*mongo.Client, error) {
	client, err := mongo.Connect(options.Client().ApplyURI(uri).
		SetServerSelectionTimeout(timeout).SetConnectTimeout(timeout).SetAppName("mongopatterns doctor"))
	if err != nil {
		return nil, fmt.Errorf("connection string %s: %w", redact(uri), err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := client.Ping(pingCtx, nil); err != nil {
		_ = client.Disconnect(context.WithoutCancel(ctx))
		return nil, pingError(uri, timeout, err)
	}
	return client, nil
}

// pingError says why the first ping failed: credentials the server
// refused are not an unreachable server.
func pingError(uri string, timeout time.Duration, err error) error {
	var refused *auth.Error
	if errors.As(err, &refused) {
		return fmt.Errorf("the server at %s refused the credentials (check the user, password and authSource): %w", redact(uri), err)
	}
	return fmt.Errorf("cannot reach the server at %s within %s: %w", redact(uri), timeout, err)
}

// redact hides the password of a connection string.
func redact(uri string) string {
	u, err := url.Parse(uri)
	if err != nil || u.User == nil {
		return uri
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

func write(w io.Writer, format string, rep *doctor.Report) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	case "html":
		return rep.WriteHTML(w)
	default:
		return rep.WriteText(w)
	}
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progressBar draws the check's progress on one terminal line.
type progressBar struct {
	w     io.Writer
	drawn bool
}

const barWidth = 30

func (b *progressBar) show(p doctor.Progress) {
	filled := barWidth * p.Done / max(p.Total, 1)
	fmt.Fprintf(b.w, "\r\x1b[K[%s%s] %d/%d %s", strings.Repeat("#", filled), strings.Repeat(" ", barWidth-filled), p.Done, p.Total, p.Collection)
	b.drawn = true
}

// done clears the bar's line.
func (b *progressBar) done() {
	if b.drawn {
		fmt.Fprint(b.w, "\r\x1b[K")
	}
}
