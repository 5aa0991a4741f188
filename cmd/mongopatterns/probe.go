package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/probe"
)

const probeUsage = `usage: mongopatterns probe [--uri URI] [--db NAME] [--format text|json]

Measures, on a live server, whether each feature the mongopatterns
repositories may rely on really does what MongoDB does (one real probe per
feature, checking results, not just the absence of an error), and compares
it with what the library detects from the server's hello and buildInfo.

Verdicts:
  ok             detected, and the server does it as MongoDB does
  under-claimed  not detected, yet it works: the library takes a slower, safe path
  OVER-CLAIMED   detected, but the server refuses it or gets it wrong: the
                 library would trust what the server gets wrong
  absent         not detected, and the server refuses it (refused) or
                 silently gets it wrong (wrong)
  not measured   the probe could not run; its evidence says why

Then it checks server behaviours that some servers get wrong and that the
library guards against on every server (a deleteOne under concurrent
updates, $min over missing values, ...), each with its evidence and the
library's guard: ok (as MongoDB), guarded (the server gets it wrong; the
library does not rely on it), absent or not measured. They never make the
exit status 1.

It works in a scratch database that it creates and always drops, also on
an error or an interrupt, and writes nothing anywhere else. --db names the
scratch database; it must not exist, nor be admin, local or config.

Exit status: 0 when no feature is over-claimed, 1 when one is (also when
the run then failed), 2 on a usage error, an unreachable server, an
existing or unusable --db, an interrupt, or a scratch database left
behind. A run that failed after it began prints what it measured, then
the error.

flags:
`

// Exit status of probe on an over-claimed feature.
const exitOverClaimed = 1

func runProbe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), probeUsage)
		fs.PrintDefaults()
	}
	uri := fs.String("uri", os.Getenv("MONGODB_URI"), "connection string (default $MONGODB_URI)")
	dbName := fs.String("db", "", "scratch database, created and dropped; it must not exist (default mongopatterns_probe_ and 12 random hex digits)")
	format := fs.String("format", "text", "report format: text or json (the report goes to stdout alone, errors to stderr)")
	timeout := fs.Duration("timeout", 10*time.Second, "time to find and reach the server")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "mongopatterns probe: "+format+"\n", a...)
		return exitUsage
	}
	switch {
	case fs.NArg() > 0:
		return usageErr("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	case *uri == "":
		return usageErr("--uri is required (or set MONGODB_URI)")
	case *format != "text" && *format != "json":
		return usageErr("--format %q: want text or json", *format)
	}
	rep, err := probe.Run(ctx, *uri, probe.Options{Database: *dbName, Client: func() *options.ClientOptions {
		return options.Client().SetServerSelectionTimeout(*timeout).SetConnectTimeout(*timeout).SetAppName("mongopatterns probe")
	}})
	if rep == nil {
		return usageErr("%s: %v", redact(*uri), err)
	}
	var werr error
	if *format == "json" {
		werr = writeProbeJSON(stdout, rep, err)
	} else {
		werr = writeProbeText(stdout, rep)
	}
	if err != nil {
		fmt.Fprintf(stderr, "mongopatterns probe: %s: %v\n", redact(*uri), err)
	}
	if werr != nil {
		return usageErr("write the report: %v", werr)
	}
	code := probeStatus(rep, err)
	if code == exitOverClaimed && *format != "text" {
		fmt.Fprintf(stderr, "mongopatterns probe: %d features OVER-CLAIMED\n", rep.Count(probe.OverClaimed))
	}
	return code
}

// probeStatus is the exit status of a report and the error Run returned
// with it: exitOverClaimed when a feature is over-claimed (what was
// measured stands, whatever failed after), else exitUsage when the run
// failed (interrupted, or the scratch database left behind), else exitOK.
// A guarded server behaviour never changes it.
func probeStatus(rep *probe.Report, err error) int {
	switch {
	case rep.Count(probe.OverClaimed) > 0:
		return exitOverClaimed
	case err != nil:
		return exitUsage
	}
	return exitOK
}

// verdicts lists the verdicts of features in the order of the summary
// line, checkVerdicts those of server behaviours.
var (
	verdicts      = []probe.Verdict{probe.OK, probe.UnderClaimed, probe.OverClaimed, probe.Absent, probe.Unmeasured}
	checkVerdicts = []probe.Verdict{probe.OK, probe.Guarded, probe.Absent, probe.Unmeasured}
)

// writeProbeText writes the report as a table of one line per feature,
// each followed by its evidence, then a table of one line per server
// behaviour, each followed by its evidence and the library's guard, and
// the counts of each table's verdicts.
func writeProbeText(w io.Writer, rep *probe.Report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "mongopatterns probe: %s\n", rep.Server)
	dropped := "dropped"
	if !rep.Dropped {
		dropped = "NOT dropped: drop it by hand"
	}
	fmt.Fprintf(&b, "%d features and %d server behaviours probed in %s, in the scratch database %s (%s)\n\n",
		len(rep.Results), len(rep.Checks), rep.Elapsed.Round(100*time.Millisecond), rep.Database, dropped)
	const row = "  %-13s  %-8s  %-12s  %s\n"
	under := func(format string, a ...any) { fmt.Fprintf(&b, "  %-13s  "+format+"\n", append([]any{""}, a...)...) }
	fmt.Fprintf(&b, row, "verdict", "detected", "measured", "feature")
	for _, r := range rep.Results {
		detected := "no"
		if r.Detected {
			detected = "yes"
		}
		fmt.Fprintf(&b, row, r.Verdict, detected, r.Measured, r.Feature)
		under("%s", r.Evidence)
	}
	if len(rep.Checks) > 0 {
		b.WriteString("\n")
		const row = "  %-13s  %-12s  %s\n"
		fmt.Fprintf(&b, row, "verdict", "measured", "server behaviour (the library guards against it on every server)")
		for _, c := range rep.Checks {
			fmt.Fprintf(&b, row, c.Verdict, c.Measured, c.Behaviour)
			under("%s", c.Evidence)
			under("guard: %s", c.Guard)
		}
	}
	b.WriteString("\n")
	counts(&b, verdicts, rep.Count)
	b.WriteString("\nserver behaviours: ")
	counts(&b, checkVerdicts, rep.CountChecks)
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// counts writes "<n> <verdict>" for each of vs, comma-separated.
func counts(b *strings.Builder, vs []probe.Verdict, count func(probe.Verdict) int) {
	for i, v := range vs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(b, "%d %s", count(v), v)
	}
}

// probeJSON is the report in --format json.
type probeJSON struct {
	Server     string                `json:"server"`
	Database   string                `json:"database"`
	Dropped    bool                  `json:"dropped"`
	Seconds    float64               `json:"seconds"`
	Counts     map[probe.Verdict]int `json:"counts"`
	Features   []featureJSON         `json:"features"`
	Behaviours []behaviourJSON       `json:"behaviours"`
	// BehaviourCounts counts the verdicts of Behaviours.
	BehaviourCounts map[probe.Verdict]int `json:"behaviourCounts"`
	// Error is the error the run ended with, also written to stderr;
	// empty when it ended well.
	Error string `json:"error,omitempty"`
}

type featureJSON struct {
	Feature  string  `json:"feature"`
	Detected bool    `json:"detected"`
	Measured string  `json:"measured"`
	Verdict  string  `json:"verdict"`
	Evidence string  `json:"evidence"`
	Seconds  float64 `json:"seconds"`
}

type behaviourJSON struct {
	Behaviour string `json:"behaviour"`
	// Feature is the feature whose use it concerns; empty for every
	// server.
	Feature  string  `json:"feature,omitempty"`
	Measured string  `json:"measured"`
	Verdict  string  `json:"verdict"`
	Evidence string  `json:"evidence"`
	Guard    string  `json:"guard"`
	Seconds  float64 `json:"seconds"`
}

// writeProbeJSON writes the report, and runErr, the error Run returned
// with it (nil when none), as one JSON document.
func writeProbeJSON(w io.Writer, rep *probe.Report, runErr error) error {
	out := probeJSON{Server: rep.Server, Database: rep.Database, Dropped: rep.Dropped, Seconds: rep.Elapsed.Seconds(),
		Counts: map[probe.Verdict]int{}, Features: []featureJSON{}, Behaviours: []behaviourJSON{}, BehaviourCounts: map[probe.Verdict]int{}}
	for _, v := range verdicts {
		out.Counts[v] = rep.Count(v)
	}
	for _, v := range checkVerdicts {
		out.BehaviourCounts[v] = rep.CountChecks(v)
	}
	for _, r := range rep.Results {
		out.Features = append(out.Features, featureJSON{Feature: string(r.Feature), Detected: r.Detected,
			Measured: string(r.Measured), Verdict: string(r.Verdict), Evidence: r.Evidence, Seconds: r.Elapsed.Seconds()})
	}
	for _, c := range rep.Checks {
		out.Behaviours = append(out.Behaviours, behaviourJSON{Behaviour: string(c.Behaviour), Feature: string(c.Feature),
			Measured: string(c.Measured), Verdict: string(c.Verdict), Evidence: c.Evidence, Guard: c.Guard, Seconds: c.Elapsed.Seconds()})
	}
	if runErr != nil {
		out.Error = runErr.Error()
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
