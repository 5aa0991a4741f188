// Package probe measures, on a live server, whether each
// [patterns.Feature] really does what MongoDB does, and compares the
// measurement with what [patterns.Capabilities] detects. It is the one copy
// of the capability probes: TestCapabilitiesMatchTheServer runs it against
// the test server, and "mongopatterns probe" runs it for users.
//
// No error is not enough: a server may accept a command and do something
// else (FerretDB 1.x accepts $slice in $push and ignores it; FerretDB 2.x
// applies writes made "inside" a transaction at once). So every probe
// checks the result of what it asked, and says what it saw in one line of
// evidence.
//
// Beside the features, it checks server behaviours ([Behaviour]) that a
// server may get wrong where the library guards against them on every
// server (FerretDB 2.x's deleteOne under concurrent updates): they are
// reported with the library's guard, and never as an over-claim.
package probe

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/internal/srverr"
	"github.com/mongopatterns/mongopatterns/patterns"
)

const pkg errs.Prefix = "probe"

// Measured is what a probe saw the server do with a feature.
type Measured string

// The measurements.
const (
	// Works: the server did exactly what MongoDB does.
	Works Measured = "works"
	// Refused: the server answered with an error. The feature is absent,
	// loudly: a repository that used it would fail, not be wrong.
	Refused Measured = "refused"
	// Wrong: the server accepted the request and did something else than
	// MongoDB does. The feature is absent, silently: the dangerous case.
	Wrong Measured = "wrong"
	// NotMeasured: the probe could not run (its fixture could not be
	// written, it did not finish in time, it was interrupted); the
	// evidence says why. Nothing is guessed.
	NotMeasured Measured = "not measured"
)

// Verdict compares what [patterns.Capabilities] detects with what the
// probe measured.
type Verdict string

// The verdicts.
const (
	// OK: detected, and it works: the library uses it, rightly.
	OK Verdict = "ok"
	// UnderClaimed: the feature works but is not detected, so the library
	// takes a slower, safe path.
	UnderClaimed Verdict = "under-claimed"
	// OverClaimed: the feature is detected but the server refuses it or
	// gets it wrong, so the library would trust it: the dangerous case.
	OverClaimed Verdict = "OVER-CLAIMED"
	// Absent: not detected, and the server refuses it or gets it wrong;
	// the library does without it.
	Absent Verdict = "absent"
	// Unmeasured: the probe could not run, so nothing can be said.
	Unmeasured Verdict = "not measured"
	// Guarded: a server [Behaviour] that differs from MongoDB's, which the
	// library guards against on every server: worth knowing for code of
	// one's own, never an over-claim.
	Guarded Verdict = "guarded"
)

// Judge returns the verdict for a feature that [patterns.Capabilities]
// detects (detected) and that a probe measured as m: [OK] when both say
// it works, [UnderClaimed] when only the probe does, [OverClaimed] when
// only Capabilities does, [Absent] when neither does, and [Unmeasured]
// when the probe could not run.
func Judge(detected bool, m Measured) Verdict {
	switch {
	case m == NotMeasured:
		return Unmeasured
	case m == Works && detected:
		return OK
	case m == Works:
		return UnderClaimed
	case detected:
		return OverClaimed
	default:
		return Absent
	}
}

// JudgeBehaviour returns the verdict for a server [Behaviour] that a
// check measured as m: [OK] when the server does what MongoDB does,
// [Guarded] when it gets it wrong (the library guards against it on every
// server, so it is never an over-claim), [Absent] when it refuses the
// request (the feature the check needs is missing), and [Unmeasured]
// when the check could not run.
func JudgeBehaviour(m Measured) Verdict {
	switch m {
	case Works:
		return OK
	case Wrong:
		return Guarded
	case Refused:
		return Absent
	default:
		return Unmeasured
	}
}

// Result is one feature's line of a [Report].
type Result struct {
	Feature  patterns.Feature
	Detected bool // what patterns.Capabilities says
	Measured Measured
	Verdict  Verdict
	// Evidence is one line saying what the probe asked and what the
	// server answered, for example "$dateTrunc of 2026-11-30T12:42:07Z to
	// day gave 2026-11-26T00:00:00Z, want 2026-11-30T00:00:00Z".
	Evidence string
	Elapsed  time.Duration
}

// Check is one server behaviour's line of a [Report].
type Check struct {
	Behaviour Behaviour
	// Feature is the feature whose use the behaviour concerns; empty when
	// it concerns every server.
	Feature  patterns.Feature
	Measured Measured
	Verdict  Verdict // see JudgeBehaviour: never OverClaimed
	// Evidence is one line saying what the check asked and what the
	// server answered, as a Result's.
	Evidence string
	// Guard is one line saying how the library guards against the
	// behaviour, on every server.
	Guard   string
	Elapsed time.Duration
}

// Report is what [Run] measured: one [Result] per feature, in the order
// of [patterns.AllFeatures], then one [Check] per server [Behaviour], in
// the order of [AllBehaviours].
type Report struct {
	Server   string // the server, as patterns.Server.String names it
	Database string // the scratch database
	Dropped  bool   // whether the scratch database was dropped
	Results  []Result
	Checks   []Check
	Elapsed  time.Duration
}

// Count returns how many features have verdict v.
func (r *Report) Count(v Verdict) int {
	n := 0
	for _, res := range r.Results {
		if res.Verdict == v {
			n++
		}
	}
	return n
}

// CountChecks returns how many server behaviours have verdict v.
func (r *Report) CountChecks(v Verdict) int {
	n := 0
	for _, c := range r.Checks {
		if c.Verdict == v {
			n++
		}
	}
	return n
}

// Options configure [Run].
type Options struct {
	// Database is the scratch database, which Run creates and drops; it
	// must not exist, must not be admin, local or config (in any case),
	// and must be a
	// name MongoDB takes: at most 63 bytes, none of /\. "$*<>:|? or NUL.
	// Empty means "mongopatterns_probe_" and 12 random hex digits.
	Database string
	// Client returns the options of each client Run connects (timeouts,
	// an application name, a monitor), to which Run applies the URI; nil
	// means options.Client(). It must return new options on each call.
	Client func() *options.ClientOptions
}

// probeTimeout bounds each probe; one that takes longer is not measured.
const probeTimeout = time.Minute

// dropTimeout bounds the drop of the scratch database, which runs even
// when ctx has ended. It is generous: on FerretDB 2.x under load a
// dropDatabase was seen to wait more than 30 s for its locks.
const dropTimeout = 2 * time.Minute

// Run connects to uri, detects the server with [patterns.Capabilities]
// and runs one probe per [patterns.Feature], then one check per server
// [Behaviour], one after the other, in a
// scratch database that it creates and always drops before it returns,
// also when a probe fails or ctx ends. It writes nothing outside the
// scratch database; outside it, it sends only hello, buildInfo, ping and
// the session and transaction commands of the transactions probe.
//
// Each probe checks the result of what it asks, not just the absence of
// an error, and is bounded in time (a minute; the concurrency probe sends
// 400 updates from 8 connections, the concurrent delete check up to 20
// deletes under 4 writers, about 2 s). On a busy 2-core machine the whole
// run took 12 to 19 s on FerretDB 2.7 and 8 to 25 s on FerretDB 1.24,
// most of it storing the 17 MiB document of the 16 MiB limit probe.
//
// Run returns an error, and no report, when it cannot reach the server,
// detect it, or the scratch database exists already (it would drop
// someone's data); and, before sending anything, when Options.Database
// is one of the server's own databases (admin, local, config) or a name
// the server refuses (see [Options]), whose probes would all fail and
// read as features the server lacks. When ctx ends during the probes it returns the results
// so far and ctx's error, after making sure for a second that no write
// the server was still running re-created the scratch database. When the
// drop fails it returns the report, with Dropped false, and
// an error that names the database to drop by hand. A caller that gets a
// report and an error shows both.
func Run(ctx context.Context, uri string, o Options) (rep *Report, err error) {
	start := time.Now()
	if o.Client == nil {
		o.Client = options.Client
	}
	name := o.Database
	if name == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		name = "mongopatterns_probe_" + hex.EncodeToString(b[:])
	}
	if err := scratchName(name); err != nil {
		return nil, pkg.Wrap("Run", err)
	}
	e := &env{uri: uri, opts: o.Client}
	client, err := e.connect(ctx, nil)
	if err != nil {
		return nil, pkg.Wrap("Run", err)
	}
	defer func() { _ = client.Disconnect(context.WithoutCancel(ctx)) }()
	if err := client.Ping(ctx, nil); err != nil {
		return nil, pkg.Wrap("Run", fmt.Errorf("ping: %w", err))
	}
	srv, err := patterns.Capabilities(ctx, client)
	if err != nil {
		return nil, pkg.Wrap("Run", err)
	}
	e.db = client.Database(name)
	existing, err := e.db.ListCollectionNames(ctx, bson.D{})
	if err != nil {
		return nil, pkg.Wrap("Run", fmt.Errorf("list the collections of %q: %w", name, err))
	}
	if len(existing) > 0 {
		return nil, pkg.Wrap("Run", errs.Invalid("database %q exists (it holds %s): the probe needs a database of its own, which it creates and drops",
			name, strings.Join(existing, ", ")))
	}
	rep = &Report{Server: srv.String(), Database: name}
	defer func() {
		if derr := e.drop(ctx); derr != nil {
			err = errors.Join(err, pkg.Wrap("Run", fmt.Errorf("drop the scratch database %q (drop it by hand): %w", name, derr)))
		} else {
			rep.Dropped = true
		}
		rep.Elapsed = time.Since(start)
	}()

	interrupted := func(at string) error {
		return pkg.Wrap("Run", fmt.Errorf("interrupted at %s: %w", at, ctx.Err()))
	}
	for _, f := range patterns.AllFeatures() {
		rep.Results = append(rep.Results, e.run(ctx, f, srv.Has(f)))
		if ctx.Err() != nil {
			return rep, interrupted(string(f))
		}
	}
	for _, b := range AllBehaviours() {
		rep.Checks = append(rep.Checks, e.check(ctx, b))
		if ctx.Err() != nil {
			return rep, interrupted(string(b))
		}
	}
	return rep, nil
}

// maxDatabaseName is the longest database name MongoDB takes, in bytes.
const maxDatabaseName = 63

// scratchName returns an error wrapping patterns.ErrInvalid unless name
// may be the scratch database: not one of the server's own databases, and
// a name the server takes (on every platform MongoDB runs on).
func scratchName(name string) error {
	switch {
	case strings.EqualFold(name, "admin") || strings.EqualFold(name, "local") || strings.EqualFold(name, "config"):
		// In another case too: the server refuses a database whose name
		// differs from an existing one's only by case.
		return errs.Invalid("database %q is the server's own: the probe needs a database of its own, which it creates and drops", name)
	case len(name) > maxDatabaseName:
		return errs.Invalid("database name %q is %d bytes, over the server's %d", name, len(name), maxDatabaseName)
	case strings.ContainsAny(name, "/\\. \"$*<>:|?\x00"):
		return errs.Invalid("database name %q holds a character the server refuses in one (/\\. \"$*<>:|? or NUL)", name)
	}
	return nil
}

// env is what a probe works with.
type env struct {
	uri  string
	opts func() *options.ClientOptions
	db   *mongo.Database // the scratch database, through Run's client
}

// After an interrupt, drop checks that the scratch database stays dropped
// settleChecks times, settlePause apart.
const (
	settleChecks = 5
	settlePause  = 200 * time.Millisecond
)

// drop drops the scratch database, also when ctx has ended. A write the
// server was still running when ctx ended (the driver stops waiting for
// it, the server does not stop) may land after the drop and create the
// database again: so after an interrupt, drop looks again after a pause
// and drops what it finds, until the database stays empty.
func (e *env) drop(ctx context.Context) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dropTimeout)
	defer cancel()
	if err := srverr.Retry(dctx, func() error { return e.db.Drop(dctx) }); err != nil || ctx.Err() == nil {
		return err
	}
	for range settleChecks {
		select {
		case <-dctx.Done():
			return dctx.Err()
		case <-time.After(settlePause):
		}
		names, err := e.db.ListCollectionNames(dctx, bson.D{})
		if err != nil {
			return err
		}
		if len(names) == 0 {
			continue
		}
		if err := e.db.Drop(dctx); err != nil {
			return err
		}
	}
	return nil
}

// connect connects a client of the probe's own to the server, as Run's
// is connected, after edit (when not nil) adjusted its options. The
// caller disconnects it.
func (e *env) connect(ctx context.Context, edit func(*options.ClientOptions)) (*mongo.Client, error) {
	o := e.opts().ApplyURI(e.uri)
	if edit != nil {
		edit(o)
	}
	c, err := mongo.Connect(o)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return c, nil
}

// interruptGrace is how long a probe running when ctx ends may go on.
const interruptGrace = 5 * time.Second

// run runs f's probe through measure.
func (e *env) run(ctx context.Context, f patterns.Feature, detected bool) Result {
	p, ok := probes[f]
	if !ok {
		p = func(context.Context, *env) finding {
			return notMeasured("this version of mongopatterns has no probe for it")
		}
	}
	got, elapsed := e.measure(ctx, p)
	return Result{
		Feature: f, Detected: detected, Measured: got.measured, Verdict: Judge(detected, got.measured),
		Evidence: got.evidence, Elapsed: elapsed,
	}
}

// check runs b's check through measure.
func (e *env) check(ctx context.Context, b Behaviour) Check {
	c := checks[b]
	got, elapsed := e.measure(ctx, c.run)
	return Check{
		Behaviour: b, Feature: c.feature, Measured: got.measured, Verdict: JudgeBehaviour(got.measured),
		Evidence: got.evidence, Guard: c.guard, Elapsed: elapsed,
	}
}

// measure runs p, bounded by probeTimeout, and returns what it found and
// how long it took. When ctx ends, the probe
// may finish within interruptGrace before its commands are cancelled: a
// command the driver stops waiting for may still run on the server, and
// write after the scratch database is dropped.
func (e *env) measure(ctx context.Context, p func(context.Context, *env) finding) (finding, time.Duration) {
	start := time.Now()
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), probeTimeout)
	defer cancel()
	defer context.AfterFunc(ctx, func() {
		t := time.NewTimer(interruptGrace)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-pctx.Done(): // the probe returned, or its time is up
		}
	})()
	got := p(pctx, e)
	switch {
	case got.measured == Works || pctx.Err() == nil:
	case ctx.Err() != nil:
		got = notMeasured("interrupted: %v", ctx.Err())
	default:
		got = notMeasured("did not finish within %s (%s)", probeTimeout, got.evidence)
	}
	return got, time.Since(start)
}

// finding is what one probe measured, with its evidence.
type finding struct {
	measured Measured
	evidence string
}

func works(format string, args ...any) finding { return finding{Works, line(format, args...)} }
func wrong(format string, args ...any) finding { return finding{Wrong, line(format, args...)} }

func notMeasured(format string, args ...any) finding {
	return finding{NotMeasured, "not measured: " + line(format, args...)}
}

// refused is the finding of a server that answered what was asked with
// err; when err says nothing about the feature (see aside), the probe is
// not measured instead.
func refused(what string, err error) finding {
	if aside(err) {
		return notMeasured("%s: %s", what, short(err))
	}
	return finding{Refused, line("%s: %s", what, short(err))}
}

// Server codes of failures that are not about the request's feature.
const (
	codeUnauthorized     = 13
	codeInvalidNamespace = 73
)

// aside reports whether err is a failure beside the feature asked for: a
// deadline (the client's or the server's maxTimeMS), an ended context, a
// transient failure (FerretDB 2.x's deadlock), a missing permission, or a
// namespace the server refuses. Read as a refusal, it would make a
// detected feature OVER-CLAIMED. A connection the server closes on the
// request stays a refusal: FerretDB 1.x does so, every time, on some
// requests it cannot handle.
func aside(err error) bool {
	if mongo.IsTimeout(err) || errors.Is(err, context.Canceled) ||
		errors.Is(err, context.DeadlineExceeded) || srverr.Transient(err) || srverr.TimedOut(err) {
		return true
	}
	se, ok := errors.AsType[mongo.ServerError](err)
	return ok && (se.HasErrorCode(codeUnauthorized) || se.HasErrorCode(codeInvalidNamespace))
}

// line formats one line of evidence.
func line(format string, args ...any) string {
	return strings.Join(strings.Fields(fmt.Sprintf(format, args...)), " ")
}

// maxErr is the longest error text quoted in evidence: some servers
// quote the whole command back.
const maxErr = 160

// short returns err's text on one line, at most maxErr bytes of it.
func short(err error) string {
	s := strings.Join(strings.Fields(err.Error()), " ")
	if len(s) > maxErr {
		s = strings.ToValidUTF8(s[:maxErr], "") + "..."
	}
	return s
}
