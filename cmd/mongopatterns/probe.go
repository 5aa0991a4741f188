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

It works in a scratch database that it creates and always drops, also on
an error or an interrupt, and writes nothing anywhere else. --db names the
scratch database; it must not exist, nor be admin, local or config.

Exit status: 0 when no feature is over-claimed, 1 when one is, 2 on a usage
error, an unreachable server, an existing or unusable --db, or an interrupt.

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
	if err != nil {
		return usageErr("%s: %v", redact(*uri), err)
	}
	if *format == "json" {
		err = writeProbeJSON(stdout, rep)
	} else {
		err = writeProbeText(stdout, rep)
	}
	if err != nil {
		return usageErr("write the report: %v", err)
	}
	code := probeStatus(rep)
	if code == exitOverClaimed && *format != "text" {
		fmt.Fprintf(stderr, "mongopatterns probe: %d features OVER-CLAIMED\n", rep.Count(probe.OverClaimed))
	}
	return code
}

// probeStatus is the exit status of a report: exitOverClaimed when a
// feature is over-claimed, else exitOK.
func probeStatus(rep *probe.Report) int {
	if rep.Count(probe.OverClaimed) > 0 {
		return exitOverClaimed
	}
	return exitOK
}

// verdicts lists the verdicts in the order of the summary line.
var verdicts = []probe.Verdict{probe.OK, probe.UnderClaimed, probe.OverClaimed, probe.Absent, probe.Unmeasured}

// writeProbeText writes the report as a table of one line per feature,
// each followed by its evidence.
func writeProbeText(w io.Writer, rep *probe.Report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "mongopatterns probe: %s\n", rep.Server)
	fmt.Fprintf(&b, "%d features probed in %s, in the scratch database %s (dropped)\n\n", len(rep.Results), rep.Elapsed.Round(100*time.Millisecond), rep.Database)
	const row = "  %-13s  %-8s  %-12s  %s\n"
	fmt.Fprintf(&b, row, "verdict", "detected", "measured", "feature")
	for _, r := range rep.Results {
		detected := "no"
		if r.Detected {
			detected = "yes"
		}
		fmt.Fprintf(&b, row, r.Verdict, detected, r.Measured, r.Feature)
		fmt.Fprintf(&b, "  %-13s  %s\n", "", r.Evidence)
	}
	b.WriteString("\n")
	for i, v := range verdicts {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d %s", rep.Count(v), v)
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// probeJSON is the report in --format json.
type probeJSON struct {
	Server   string                `json:"server"`
	Database string                `json:"database"`
	Seconds  float64               `json:"seconds"`
	Counts   map[probe.Verdict]int `json:"counts"`
	Features []featureJSON         `json:"features"`
}

type featureJSON struct {
	Feature  string  `json:"feature"`
	Detected bool    `json:"detected"`
	Measured string  `json:"measured"`
	Verdict  string  `json:"verdict"`
	Evidence string  `json:"evidence"`
	Seconds  float64 `json:"seconds"`
}

func writeProbeJSON(w io.Writer, rep *probe.Report) error {
	out := probeJSON{Server: rep.Server, Database: rep.Database, Seconds: rep.Elapsed.Seconds(),
		Counts: map[probe.Verdict]int{}, Features: []featureJSON{}}
	for _, v := range verdicts {
		out.Counts[v] = rep.Count(v)
	}
	for _, r := range rep.Results {
		out.Features = append(out.Features, featureJSON{Feature: string(r.Feature), Detected: r.Detected,
			Measured: string(r.Measured), Verdict: string(r.Verdict), Evidence: r.Evidence, Seconds: r.Elapsed.Seconds()})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
