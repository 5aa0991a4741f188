package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/internal/probe"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// probeRun runs "mongopatterns probe" with args.
func probeRun(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(context.Background(), append([]string{"probe"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

// scratch is a scratch database name of the test's own.
func scratch(t *testing.T, what string) string {
	return fmt.Sprintf("mpt_cmd_probe_%s_%d", what, os.Getpid()%100000)
}

// requireDropped checks that the server lists no database called name.
func requireDropped(t *testing.T, name string) {
	t.Helper()
	names, err := mongotest.Client().ListDatabaseNames(context.Background(), bson.D{})
	require.NoError(t, err)
	require.NotContains(t, names, name, "the scratch database is dropped")
}

// wellJudged is what a verdict must be on the test server: the
// capabilities match it.
var wellJudged = []string{string(probe.OK), string(probe.Absent)}

func TestProbeJSON(t *testing.T) {
	name := scratch(t, "json")
	code, stdout, stderr := probeRun("--uri", mongotest.URI(), "--db", name, "--format", "json")
	require.Equal(t, exitOK, code, stderr)
	require.Empty(t, stderr)
	requireDropped(t, name)

	var rep struct {
		Server, Database string
		Dropped          bool
		Seconds          float64
		Counts           map[string]int
		Features         []struct {
			Feature, Measured, Verdict, Evidence string
			Detected                             bool
			Seconds                              float64
		}
		Behaviours []struct {
			Behaviour, Feature, Measured, Verdict, Evidence, Guard string
			Seconds                                                float64
		}
		BehaviourCounts map[string]int
		Error           *string
	}
	dec := json.NewDecoder(strings.NewReader(stdout))
	require.NoError(t, dec.Decode(&rep), stdout)
	_, err := dec.Token()
	require.Error(t, err, "stdout holds the JSON report and nothing else")

	srv := mongotest.Server()
	require.Equal(t, srv.String(), rep.Server)
	require.Equal(t, name, rep.Database)
	require.Positive(t, rep.Seconds)
	require.Len(t, rep.Features, len(patterns.AllFeatures()))
	counts := map[string]int{}
	for i, f := range patterns.AllFeatures() {
		got := rep.Features[i]
		require.Equal(t, string(f), got.Feature)
		require.Equal(t, srv.Has(f), got.Detected, got.Feature)
		if mongosOnly(f) {
			require.Equal(t, "not measured", got.Verdict, got.Evidence)
			counts[got.Verdict]++
			continue
		}
		require.Contains(t, wellJudged, got.Verdict, "%s: %s: %s", got.Feature, got.Measured, got.Evidence)
		require.Contains(t, []string{"works", "refused", "wrong"}, got.Measured, got.Feature)
		require.NotEmpty(t, got.Evidence, got.Feature)
		counts[got.Verdict]++
	}
	require.Equal(t, map[string]int{
		"ok": counts["ok"], "absent": counts["absent"], "under-claimed": 0, "OVER-CLAIMED": 0, "not measured": counts["not measured"],
	}, rep.Counts)
	require.True(t, rep.Dropped)
	require.Nil(t, rep.Error, "no error field when the run ended well")

	// A behaviour the server gets wrong is guarded, and leaves the exit
	// status 0 (FerretDB 2 gets all three wrong).
	require.Len(t, rep.Behaviours, len(probe.AllBehaviours()))
	behaviourCounts := map[string]int{}
	for i, b := range probe.AllBehaviours() {
		got := rep.Behaviours[i]
		require.Equal(t, string(b), got.Behaviour)
		require.Contains(t, []string{"ok", "guarded", "absent"}, got.Verdict, "%s: %s", got.Behaviour, got.Evidence)
		require.Equal(t, string(probe.JudgeBehaviour(probe.Measured(got.Measured))), got.Verdict, got.Behaviour)
		require.NotEmpty(t, got.Evidence, got.Behaviour)
		require.NotEmpty(t, got.Guard, got.Behaviour)
		behaviourCounts[got.Verdict]++
	}
	require.Equal(t, map[string]int{
		"ok": behaviourCounts["ok"], "guarded": behaviourCounts["guarded"], "absent": behaviourCounts["absent"], "not measured": 0,
	}, rep.BehaviourCounts)
	mongotest.Detail(t, "behaviours: %v", rep.BehaviourCounts)
}

// mongosOnly reports whether the probe of f measures nothing on the
// server the tests reach: writes without the shard key need a mongos.
func mongosOnly(f patterns.Feature) bool {
	return f == patterns.FeatureWritesWithoutShardKey && mongotest.Server().Topology != patterns.Sharded
}

// TestProbeBinary builds the command and runs it as a user would: the text
// report and exit status 0, then an interrupt in the middle of the run,
// which exits 2 and drops the scratch database all the same.
func TestProbeBinary(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("skipped: the go command is not on PATH to build mongopatterns: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "mongopatterns")
	build := exec.Command(goCmd, "build", "-o", bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	t.Run("text", func(t *testing.T) {
		name := scratch(t, "text")
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(bin, "probe", "--uri", mongotest.URI(), "--db", name)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.NoError(t, cmd.Run(), "exit status 0: %s", stderr.String())
		require.Empty(t, stderr.String())
		requireDropped(t, name)
		mongotest.Detail(t, "\n%s", stdout.String())

		lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
		require.Equal(t, "mongopatterns probe: "+mongotest.Server().String(), lines[0])
		require.Equal(t, fmt.Sprintf("%d features and %d server behaviours probed in", len(patterns.AllFeatures()), len(probe.AllBehaviours())),
			strings.Join(strings.Fields(lines[1])[:8], " "))
		require.True(t, strings.HasSuffix(lines[1], "in the scratch database "+name+" (dropped)"), lines[1])
		require.Equal(t, []string{"verdict", "detected", "measured", "feature"}, strings.Fields(lines[3]))
		rows := lines[4 : 4+2*len(patterns.AllFeatures())]
		ok, absent, unmeasured := 0, 0, 0
		for i, f := range patterns.AllFeatures() {
			row, evidence := rows[2*i], rows[2*i+1]
			require.True(t, strings.HasSuffix(row, "  "+string(f)), "row %q names %s", row, f)
			verdict := strings.Fields(row)[0]
			if mongosOnly(f) {
				unmeasured++
				continue
			}
			require.Contains(t, wellJudged, verdict, "%s\n%s", row, evidence)
			if verdict == "ok" {
				ok++
			} else {
				absent++
			}
			require.True(t, strings.HasPrefix(evidence, strings.Repeat(" ", 17)), "evidence under its row: %q", evidence)
			require.NotEmpty(t, strings.TrimSpace(evidence))
		}
		checks := lines[4+2*len(patterns.AllFeatures()):]
		require.Empty(t, checks[0])
		require.Equal(t, "  verdict        measured      server behaviour (the library guards against it on every server)", checks[1])
		verdicts := map[string]int{}
		for i, b := range probe.AllBehaviours() {
			row, evidence, guard := checks[2+3*i], checks[3+3*i], checks[4+3*i]
			require.True(t, strings.HasSuffix(row, "  "+string(b)), "row %q names %s", row, b)
			verdict := strings.Fields(row)[0]
			require.Contains(t, []string{"ok", "guarded", "absent"}, verdict, "%s\n%s", row, evidence)
			verdicts[verdict]++
			require.True(t, strings.HasPrefix(evidence, strings.Repeat(" ", 17)) && len(evidence) > 17, "evidence under its row: %q", evidence)
			require.True(t, strings.HasPrefix(guard, strings.Repeat(" ", 17)+"guard: "), "guard under its evidence: %q", guard)
		}
		require.Equal(t, []string{
			"",
			fmt.Sprintf("%d ok, 0 under-claimed, 0 OVER-CLAIMED, %d absent, %d not measured", ok, absent, unmeasured),
			fmt.Sprintf("server behaviours: %d ok, %d guarded, %d absent, 0 not measured", verdicts["ok"], verdicts["guarded"], verdicts["absent"]),
		}, checks[2+3*len(probe.AllBehaviours()):])
	})

	t.Run("interrupt", func(t *testing.T) {
		name := scratch(t, "interrupt")
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(bin, "probe", "--uri", mongotest.URI(), "--db", name)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.NoError(t, cmd.Start())
		db := mongotest.Client().Database(name)
		require.Eventually(t, func() bool {
			names, err := db.ListCollectionNames(context.Background(), bson.D{})
			return err == nil && len(names) > 0
		}, time.Minute, 5*time.Millisecond, "the probe starts writing")
		require.NoError(t, cmd.Process.Signal(os.Interrupt))
		err := cmd.Wait()
		exit, ok := errors.AsType[*exec.ExitError](err)
		require.True(t, ok, "%v", err)
		require.Equal(t, exitUsage, exit.ExitCode(), stderr.String())
		require.Contains(t, stderr.String(), "interrupted at ")
		require.True(t, strings.HasPrefix(stdout.String(), "mongopatterns probe: "), "what was measured is printed: %s", stdout.String())
		require.Contains(t, stdout.String(), "in the scratch database "+name+" (dropped)")
		requireDropped(t, name)
	})
}

func TestProbeUsageAndConnectionErrors(t *testing.T) {
	db := mongotest.DB(t)
	_, err := db.Collection("keep").InsertOne(context.Background(), bson.D{{Key: "_id", Value: 1}})
	require.NoError(t, err)
	for name, args := range map[string][]string{
		"no uri":          {"--uri", ""},
		"bad format":      {"--uri", mongotest.URI(), "--format", "html"},
		"unknown flag":    {"--bogus"},
		"extra args":      {"--uri", mongotest.URI(), "extra"},
		"bad uri":         {"--uri", "postgres://x"},
		"unreachable":     {"--uri", "mongodb://127.0.0.1:1/", "--timeout", "300ms"},
		"database exists": {"--uri", mongotest.URI(), "--db", db.Name()},
		"server's own db": {"--uri", mongotest.URI(), "--db", "admin"},
		"bad db name":     {"--uri", mongotest.URI(), "--db", "a.b"},
	} {
		code, stdout, stderr := probeRun(args...)
		require.Equal(t, exitUsage, code, "%s: %s", name, stderr)
		require.Empty(t, stdout, "%s: errors go to stderr", name)
		require.NotEmpty(t, stderr, name)
	}
	n, err := db.Collection("keep").CountDocuments(context.Background(), bson.D{})
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "an existing --db is left as it was")

	code, stdout, stderr := probeRun("-h")
	require.Equal(t, exitOK, code)
	require.Empty(t, stdout)
	require.Contains(t, stderr, "OVER-CLAIMED")
	var out, errOut bytes.Buffer
	require.Equal(t, exitOK, run(context.Background(), []string{"help"}, &out, &errOut))
	require.Contains(t, out.String(), "probe")
}

// TestProbeOverClaimExitsOne checks the report and exit status of an
// over-claim, which no server the tests reach gives, with a guarded
// server behaviour, which leaves the status alone.
func TestProbeOverClaimExitsOne(t *testing.T) {
	rep := &probe.Report{Server: "Example 1.0 (standalone)", Database: "scratch", Dropped: true, Elapsed: 1200 * time.Millisecond, Results: []probe.Result{
		{Feature: patterns.FeatureDateTrunc, Detected: true, Measured: probe.Wrong, Verdict: probe.OverClaimed,
			Evidence: "$dateTrunc of 2026-11-30T12:42:07Z to day gave 2026-11-26T00:00:00Z, want 2026-11-30T00:00:00Z"},
		{Feature: patterns.FeatureLookup, Detected: true, Measured: probe.Works, Verdict: probe.OK, Evidence: "fine"},
		{Feature: patterns.FeatureSortArray, Detected: false, Measured: probe.NotMeasured, Verdict: probe.Unmeasured,
			Evidence: "not measured: insert the fixture: quota exceeded"},
	}, Checks: []probe.Check{
		{Behaviour: probe.BehaviourDeleteWhileRewritten, Measured: probe.Wrong, Verdict: probe.Guarded,
			Evidence: "deleteOne did not delete it", Guard: "srverr.DeleteOne"},
	}}
	require.Equal(t, exitOverClaimed, probeStatus(rep, nil))
	var text bytes.Buffer
	require.NoError(t, writeProbeText(&text, rep))
	require.Equal(t, `mongopatterns probe: Example 1.0 (standalone)
3 features and 1 server behaviours probed in 1.2s, in the scratch database scratch (dropped)

  verdict        detected  measured      feature
  OVER-CLAIMED   yes       wrong         $dateTrunc
                 $dateTrunc of 2026-11-30T12:42:07Z to day gave 2026-11-26T00:00:00Z, want 2026-11-30T00:00:00Z
  ok             yes       works         $lookup
                 fine
  not measured   no        not measured  $sortArray
                 not measured: insert the fixture: quota exceeded

  verdict        measured      server behaviour (the library guards against it on every server)
  guarded        wrong         deleteOne of a document concurrent updates are rewriting
                 deleteOne did not delete it
                 guard: srverr.DeleteOne

1 ok, 0 under-claimed, 1 OVER-CLAIMED, 0 absent, 1 not measured
server behaviours: 0 ok, 1 guarded, 0 absent, 0 not measured
`, text.String())

	failed := errors.New("probe: Run: drop the scratch database")
	require.Equal(t, exitOverClaimed, probeStatus(rep, failed), "what was measured stands")
	rep.Results = slices.Delete(rep.Results, 0, 1)
	require.Equal(t, exitOK, probeStatus(rep, nil), "not measured and guarded are no over-claim")
	require.Equal(t, exitUsage, probeStatus(rep, failed))

	rep.Dropped = false
	text.Reset()
	require.NoError(t, writeProbeText(&text, rep))
	require.Contains(t, text.String(), "in the scratch database scratch (NOT dropped: drop it by hand)\n")
	var out bytes.Buffer
	require.NoError(t, writeProbeJSON(&out, rep, failed))
	var got struct {
		Dropped bool
		Error   string
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &got))
	require.Equal(t, struct {
		Dropped bool
		Error   string
	}{false, failed.Error()}, got)
}

// TestProbePrintsTheReportOfAFailedRun interrupts a run once it has
// written to its scratch database: in both formats, what was measured
// goes to stdout (the JSON with the error), the error to stderr, and the
// exit status is 2. Before, the command printed the error alone.
func TestProbePrintsTheReportOfAFailedRun(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			name := scratch(t, "failed"+format)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			db := mongotest.Client().Database(name)
			go func() {
				defer cancel()
				for ctx.Err() == nil {
					if names, err := db.ListCollectionNames(ctx, bson.D{}); err == nil && len(names) > 0 {
						return
					}
					time.Sleep(5 * time.Millisecond)
				}
			}()
			var stdout, stderr bytes.Buffer
			code := run(ctx, []string{"probe", "--uri", mongotest.URI(), "--db", name, "--format", format}, &stdout, &stderr)
			require.Equal(t, exitUsage, code, stderr.String())
			require.Contains(t, stderr.String(), "mongopatterns probe: "+redact(mongotest.URI())+": probe: Run: interrupted at ")
			requireDropped(t, name)
			if format == "text" {
				require.True(t, strings.HasPrefix(stdout.String(), "mongopatterns probe: "+mongotest.Server().String()+"\n"), stdout.String())
				require.Contains(t, stdout.String(), "in the scratch database "+name+" (dropped)")
				require.Contains(t, stdout.String(), "  verdict        detected  measured      feature\n")
				return
			}
			var rep struct {
				Database string
				Dropped  bool
				Features []struct{ Feature string }
				Error    string
			}
			require.NoError(t, json.Unmarshal(stdout.Bytes(), &rep), stdout.String())
			require.Equal(t, name, rep.Database)
			require.True(t, rep.Dropped)
			require.NotEmpty(t, rep.Features)
			require.Less(t, len(rep.Features), len(patterns.AllFeatures()))
			require.Contains(t, rep.Error, "probe: Run: interrupted at ")
		})
	}
}
