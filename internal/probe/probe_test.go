package probe_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/internal/probe"
	"github.com/mongopatterns/mongopatterns/patterns"
)

func TestMain(m *testing.M) { mongotest.Main(m) }

func TestJudge(t *testing.T) {
	for _, c := range []struct {
		detected bool
		measured probe.Measured
		want     probe.Verdict
	}{
		{true, probe.Works, probe.OK},
		{false, probe.Works, probe.UnderClaimed},
		{true, probe.Wrong, probe.OverClaimed},
		{true, probe.Refused, probe.OverClaimed},
		{false, probe.Wrong, probe.Absent},
		{false, probe.Refused, probe.Absent},
		{true, probe.NotMeasured, probe.Unmeasured},
		{false, probe.NotMeasured, probe.Unmeasured},
	} {
		require.Equal(t, c.want, probe.Judge(c.detected, c.measured), "detected %v, measured %s", c.detected, c.measured)
	}
}

func TestJudgeBehaviour(t *testing.T) {
	for m, want := range map[probe.Measured]probe.Verdict{
		probe.Works: probe.OK, probe.Wrong: probe.Guarded, probe.Refused: probe.Absent, probe.NotMeasured: probe.Unmeasured,
	} {
		require.Equal(t, want, probe.JudgeBehaviour(m), "measured %s", m)
	}
}

// scratchName is a scratch database name of the test's own.
func scratchName(t *testing.T) string {
	return fmt.Sprintf("mpt_probe_%s_%d", strings.ToLower(t.Name()[4:]), os.Getpid()%100000)
}

// databaseExists reports whether the server lists a database called name.
func databaseExists(t *testing.T, name string) bool {
	names, err := mongotest.Client().ListDatabaseNames(context.Background(), bson.D{})
	require.NoError(t, err)
	return slices.Contains(names, name)
}

// silentlyWrong lists, per server this project measured, the features it
// accepts and gets wrong: the probes must see each as wrong, not refused.
var silentlyWrong = map[string][]patterns.Feature{
	"FerretDB 1.x": {
		patterns.FeaturePushModifiers, patterns.FeaturePullConditions, patterns.FeatureUpdateSizeLimit,
		patterns.FeatureBatchedUpdates, patterns.FeatureConcurrentUpdates,
	},
	"FerretDB v2.": {
		patterns.FeatureTransactions, patterns.FeatureJSONSchema, patterns.FeatureTimeSeries,
		patterns.FeatureDateTrunc, patterns.FeatureTimeSeriesCustomBucketing, patterns.FeatureTimeSeriesDeletes,
	},
}

// behaviours lists, per server this project measured, what the checks of
// server behaviours must measure there. MongoDB does each as it should.
var behaviours = map[string]map[probe.Behaviour]probe.Measured{
	"FerretDB 1.x": {
		probe.BehaviourMinOverMissing:             probe.Refused,
		probe.BehaviourMissingInAccumulatedObject: probe.Refused,
		probe.BehaviourDeleteWhileRewritten:       probe.Works,
	},
	"FerretDB v2.": {
		probe.BehaviourMinOverMissing:             probe.Wrong,
		probe.BehaviourMissingInAccumulatedObject: probe.Wrong,
		probe.BehaviourDeleteWhileRewritten:       probe.Wrong,
	},
	"MongoDB ": {
		probe.BehaviourMinOverMissing:             probe.Works,
		probe.BehaviourMissingInAccumulatedObject: probe.Works,
		probe.BehaviourDeleteWhileRewritten:       probe.Works,
	},
}

// TestRun runs every probe and check once and checks what the run
// promises: a report line per feature with its evidence, every silently
// wrong feature of a known server seen as wrong, a line per server
// behaviour with its evidence and guard, measured as recorded for a known
// server and never an over-claim, nothing sent to another database but
// the session and server commands, and the scratch database dropped.
func TestRun(t *testing.T) {
	ctx := context.Background()
	name := scratchName(t)
	type sent struct{ db, command string }
	var mu sync.Mutex
	var commands []sent
	monitor := &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		mu.Lock()
		commands = append(commands, sent{e.DatabaseName, e.CommandName})
		mu.Unlock()
	}}
	rep, err := probe.Run(ctx, mongotest.URI(), probe.Options{Database: name, Client: func() *options.ClientOptions {
		return options.Client().SetMonitor(monitor)
	}})
	require.NoError(t, err)
	mongotest.Detail(t, "%s: %d probes in %s", rep.Server, len(rep.Results), rep.Elapsed)

	require.Equal(t, mongotest.Server().String(), rep.Server)
	require.Equal(t, name, rep.Database)
	require.Len(t, rep.Results, len(patterns.AllFeatures()))
	measured := map[patterns.Feature]probe.Measured{}
	for i, r := range rep.Results {
		require.Equal(t, patterns.AllFeatures()[i], r.Feature)
		require.NotEmpty(t, r.Evidence, r.Feature)
		require.NotContains(t, r.Evidence, "\n", "one line of evidence")
		if r.Feature == patterns.FeatureWritesWithoutShardKey && mongotest.Server().Topology != patterns.Sharded {
			require.Equal(t, probe.NotMeasured, r.Measured, r.Evidence)
			require.Equal(t, "not measured: the deployment is not sharded", r.Evidence)
		} else {
			require.NotEqual(t, probe.NotMeasured, r.Measured, "%s: %s", r.Feature, r.Evidence)
		}
		mongotest.Detail(t, "%-44s %-8s %6.2fs", r.Feature, r.Measured, r.Elapsed.Seconds())
		measured[r.Feature] = r.Measured
	}

	require.True(t, rep.Dropped)
	require.Len(t, rep.Checks, len(probe.AllBehaviours()))
	for i, c := range rep.Checks {
		require.Equal(t, probe.AllBehaviours()[i], c.Behaviour)
		require.Equal(t, probe.JudgeBehaviour(c.Measured), c.Verdict, "%s", c.Behaviour)
		require.NotEqual(t, probe.NotMeasured, c.Measured, "%s: %s", c.Behaviour, c.Evidence)
		for _, line := range []string{c.Evidence, c.Guard} {
			require.NotEmpty(t, line, c.Behaviour)
			require.NotContains(t, line, "\n", "one line")
		}
		mongotest.Detail(t, "%-44s %-8s %6.2fs %s", c.Behaviour, c.Measured, c.Elapsed.Seconds(), c.Evidence)
	}
	require.Zero(t, rep.Count(probe.Guarded), "guarded is a verdict of behaviours only")

	t.Run("behaviours measured as recorded", func(t *testing.T) {
		for prefix, want := range behaviours {
			if !strings.HasPrefix(rep.Server, prefix) {
				continue
			}
			for _, c := range rep.Checks {
				require.Equal(t, want[c.Behaviour], c.Measured, "%s on %s: %s", c.Behaviour, rep.Server, c.Evidence)
			}
			return
		}
		t.Skipf("skipped: no behaviours are recorded for %s", rep.Server)
	})

	t.Run("silently wrong features are seen as wrong", func(t *testing.T) {
		known := false
		for prefix, features := range silentlyWrong {
			if !strings.HasPrefix(rep.Server, prefix) {
				continue
			}
			known = true
			for _, f := range features {
				require.Equal(t, probe.Wrong, measured[f], "%s on %s", f, rep.Server)
			}
		}
		if !known {
			t.Skipf("skipped: no silently wrong features are recorded for %s", rep.Server)
		}
	})

	t.Run("nothing sent to another database but server and session commands", func(t *testing.T) {
		outside := []string{"hello", "isMaster", "buildInfo", "ping", "endSessions", "commitTransaction", "abortTransaction"}
		mu.Lock()
		defer mu.Unlock()
		for _, c := range commands {
			if c.db != name {
				require.Contains(t, outside, c.command, "%s sent to database %s", c.command, c.db)
			}
		}
		var last sent
		for _, c := range commands {
			if c.db != "admin" {
				last = c
			}
		}
		require.Equal(t, sent{name, "dropDatabase"}, last, "the last command to a database drops the scratch database")
	})
	names, _ := mongotest.Client().Database(name).ListCollectionNames(context.Background(), bson.D{})
	require.False(t, databaseExists(t, name), "the scratch database is dropped; it holds %v", names)
	time.Sleep(2 * time.Second)
	require.False(t, databaseExists(t, name), "no late write of the run created the scratch database again")
}

func TestRunRefusesADatabaseThatExists(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	_, err := db.Collection("keep").InsertOne(ctx, bson.D{{Key: "_id", Value: 1}})
	require.NoError(t, err)
	rep, err := probe.Run(ctx, mongotest.URI(), probe.Options{Database: db.Name()})
	require.ErrorIs(t, err, patterns.ErrInvalid)
	require.ErrorContains(t, err, fmt.Sprintf("probe: Run: database %q exists (it holds keep)", db.Name()))
	require.Nil(t, rep)
	n, err := db.Collection("keep").CountDocuments(ctx, bson.D{})
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "the database is untouched")
}

func TestRunUnreachable(t *testing.T) {
	start := time.Now()
	rep, err := probe.Run(context.Background(), "mongodb://127.0.0.1:1/", probe.Options{Client: func() *options.ClientOptions {
		return options.Client().SetServerSelectionTimeout(300 * time.Millisecond)
	}})
	require.ErrorContains(t, err, "probe: Run: ping: ")
	require.Nil(t, rep)
	require.Less(t, time.Since(start), 10*time.Second)
}

// TestRunDropsTheScratchDatabaseWhenInterrupted cancels the run as soon as
// a given collection of it exists: its first, and the 16 MiB probe's,
// whose writes outlast the grace given to the probe running at an
// interrupt on the slower servers. The run stops after that probe (which
// may finish, or say it was interrupted), and the database is dropped all
// the same, and stays dropped.
func TestRunDropsTheScratchDatabaseWhenInterrupted(t *testing.T) {
	for what, when := range map[string]func(names []string) bool{
		"at the first collection": func(names []string) bool { return len(names) > 0 },
		"in the 16 MiB probe":     func(names []string) bool { return slices.Contains(names, "big") },
	} {
		t.Run(what, func(t *testing.T) {
			name := fmt.Sprintf("%s_%d", scratchName(t)[:30], len(what))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			type result struct {
				rep *probe.Report
				err error
			}
			done := make(chan result, 1)
			go func() {
				rep, err := probe.Run(ctx, mongotest.URI(), probe.Options{Database: name})
				done <- result{rep, err}
			}()
			scratch := mongotest.Client().Database(name)
			require.Eventually(t, func() bool {
				names, err := scratch.ListCollectionNames(context.Background(), bson.D{})
				return err == nil && when(names)
			}, time.Minute, 5*time.Millisecond)
			cancel()
			got := <-done
			require.ErrorIs(t, got.err, context.Canceled)
			require.ErrorContains(t, got.err, "probe: Run: interrupted at ")
			require.NotNil(t, got.rep)
			require.Less(t, len(got.rep.Results), len(patterns.AllFeatures()))
			last := got.rep.Results[len(got.rep.Results)-1]
			mongotest.Detail(t, "stopped after %s: %s: %s", last.Feature, last.Measured, last.Evidence)
			if last.Measured == probe.NotMeasured {
				require.True(t, strings.HasPrefix(last.Evidence, "not measured: interrupted"), last.Evidence)
			}
			names, _ := scratch.ListCollectionNames(context.Background(), bson.D{})
			require.False(t, databaseExists(t, name), "the scratch database is dropped; it holds %v", names)
			time.Sleep(2 * time.Second)
			require.False(t, databaseExists(t, name), "no late write of the run created the scratch database again")
		})
	}
}

// TestRunRefusesNamesThatAreNoScratchDatabase: the server's own databases
// and names the server refuses are refused before any probe runs, with
// ErrInvalid and no report. Before, "--db a.b" ran every probe, each
// refused with InvalidNamespace, and reported the detected features
// OVER-CLAIMED; "--db admin" on FerretDB 2 probed in admin and dropped it.
func TestRunRefusesNamesThatAreNoScratchDatabase(t *testing.T) {
	for _, name := range []string{"admin", "local", "config", "Admin", "a.b", "a/b", `a\b`, "a b", `a"b`, "a$b", "a\x00b", strings.Repeat("x", 64)} {
		var sent []string
		start := time.Now()
		rep, err := probe.Run(context.Background(), mongotest.URI(), probe.Options{Database: name, Client: func() *options.ClientOptions {
			return options.Client().SetMonitor(&event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
				if e.DatabaseName == name {
					sent = append(sent, e.CommandName)
				}
			}})
		}})
		require.ErrorIs(t, err, patterns.ErrInvalid, "%q", name)
		require.ErrorContains(t, err, "probe: Run: ")
		require.Nil(t, rep, "%q", name)
		require.Empty(t, sent, "%q: nothing sent to it", name)
		require.Less(t, time.Since(start), 30*time.Second)
	}
}

// TestRefusedIsAboutTheFeature: a request that failed for a reason that
// is not the server's answer about the feature (a deadline, a
// permission, a bad namespace, a transient deadlock) makes the
// probe not measured, never refused: refused would be an over-claim of a
// detected feature.
func TestRefusedIsAboutTheFeature(t *testing.T) {
	for name, err := range map[string]error{
		"unauthorized":      mongo.CommandError{Code: 13, Name: "Unauthorized", Message: "not authorized on scratch to execute command"},
		"invalid namespace": mongo.CommandError{Code: 73, Name: "InvalidNamespace", Message: "Database a.b has an invalid character ."},
		"deadlock":          mongo.WriteException{WriteErrors: mongo.WriteErrors{{Code: 16908292, Message: "deadlock detected"}}},
		"server time-out":   mongo.CommandError{Code: 50, Name: "MaxTimeMSExpired", Message: "operation exceeded time limit"},
		"deadline":          context.DeadlineExceeded,
	} {
		m, evidence := probe.RefusedFinding("createIndexes with expireAfterSeconds", err)
		require.Equal(t, probe.NotMeasured, m, "%s: %s", name, evidence)
		require.True(t, strings.HasPrefix(evidence, "not measured: createIndexes with expireAfterSeconds: "), evidence)
	}
	m, evidence := probe.RefusedFinding("open a change stream", mongo.CommandError{Code: 115, Name: "CommandNotSupported", Message: "Stage $changeStream is not supported yet"})
	require.Equal(t, probe.Refused, m)
	require.Equal(t, "open a change stream: (CommandNotSupported) Stage $changeStream is not supported yet", evidence)
}
