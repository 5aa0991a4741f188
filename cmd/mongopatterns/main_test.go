package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/auth"

	"github.com/mongopatterns/mongopatterns/doctor/doctortest"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
)

func TestMain(m *testing.M) { mongotest.Main(m) }

// doctorRun runs "mongopatterns doctor" with args on the test server's db.
func doctorRun(t *testing.T, db *mongo.Database, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	full := append([]string{"doctor", "--uri", mongotest.URI(), "--db", db.Name()}, args...)
	code = run(context.Background(), full, &out, &errOut)
	return code, out.String(), errOut.String()
}

func seeded(t *testing.T, write func(context.Context, *mongo.Database) error) *mongo.Database {
	t.Helper()
	db := mongotest.DB(t)
	require.NoError(t, write(context.Background(), db))
	return db
}

// jsonReport is the part of --format json this test reads.
type jsonReport struct {
	Findings []struct {
		Rule       string         `json:"rule"`
		Severity   string         `json:"severity"`
		Collection string         `json:"collection"`
		Field      string         `json:"field"`
		Index      string         `json:"index"`
		Query      string         `json:"query"`
		Evidence   map[string]any `json:"evidence"`
		Remedy     string         `json:"remedy"`
	} `json:"findings"`
	Skipped []struct {
		Rule, Reason string
	} `json:"skipped"`
}

// decodeOnly decodes stdout as exactly one JSON document.
func decodeOnly(t *testing.T, stdout string) jsonReport {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(stdout))
	var rep jsonReport
	require.NoError(t, dec.Decode(&rep), stdout)
	_, err := dec.Token()
	require.Error(t, err, "stdout holds the JSON report and nothing else")
	return rep
}

func TestDoctorJSONNamesTheSeededAntiPatterns(t *testing.T) {
	db := seeded(t, doctortest.AntiPatterns)
	code, stdout, stderr := doctorRun(t, db, "--format", "json",
		"--query", `{"collection": "orders", "filter": {"status": "paid"}, "sort": {"createdAt": -1}, "name": "paid by date"}`,
		"--shard-key", `{"collection": "orders", "key": {"_id": 1}}`,
		"--pipeline", `{"collection": "orders", "pipeline": [{"$sort": {"createdAt": -1}}, {"$match": {"status": "paid"}}], "name": "late match"}`)
	require.Equal(t, exitFindings, code, stderr)
	require.Contains(t, stderr, "findings at or above warning")
	rep := decodeOnly(t, stdout)

	type key struct{ rule, collection, where string }
	got := map[key]bool{}
	for _, f := range rep.Findings {
		require.NotEmpty(t, f.Remedy)
		require.NotEmpty(t, f.Evidence)
		got[key{f.Rule, f.Collection, f.Field + f.Index + "|" + f.Query}] = true
	}
	for _, want := range []key{
		{"unbounded-array", "products", "reviews|"},
		{"bloated-document", "files", "content|"},
		{"redundant-index", "orders", "customerId_1|"},
		{"dynamic-field-names", "items", "attr_*|"},
		{"multikey-compound", "catalog", "tags, sizestags_1_sizes_1|"},
		{"esr-order", "orders", "status, createdAtcreatedAt_1_status_1|paid by date"},
		{"shard-key-monotonic", "orders", `_id|orders {"_id":1}`},
		{"shard-key-scatter-gather", "orders", "|paid by date"},
		{"pipeline-match-late", "orders", "status|late match"},
	} {
		require.True(t, got[want], "%v not among %v", want, got)
	}
	for _, f := range rep.Findings {
		if f.Rule == "unbounded-array" {
			require.EqualValues(t, 1500, f.Evidence["maxLength"])
		}
	}
}

func TestDoctorCleanDatabaseExitsZero(t *testing.T) {
	db := seeded(t, doctortest.Clean)
	code, stdout, stderr := doctorRun(t, db, "--format", "json")
	require.Equal(t, exitOK, code, stderr)
	rep := decodeOnly(t, stdout)
	require.Empty(t, rep.Findings)
	require.Contains(t, stdout, `"findings": []`)

	code, stdout, _ = doctorRun(t, db)
	require.Equal(t, exitOK, code)
	require.Contains(t, stdout, "0 findings: 0 critical, 0 warning, 0 info")
}

func TestDoctorFailOn(t *testing.T) {
	db := seeded(t, doctortest.AntiPatterns)
	for failOn, want := range map[string]int{"info": exitFindings, "warning": exitFindings, "critical": exitOK, "never": exitOK} {
		code, stdout, stderr := doctorRun(t, db, "--fail-on", failOn, "--collection", "orders", "--collection", "products")
		require.Equal(t, want, code, "--fail-on %s: %s", failOn, stderr)
		require.Contains(t, stdout, "redundant-index", "the text report is a table of the findings")
	}
}

func TestDoctorUsageAndConnectionErrors(t *testing.T) {
	db := mongotest.DB(t)
	for name, args := range map[string][]string{
		"no database":    {"doctor", "--uri", mongotest.URI()},
		"no uri":         {"doctor", "--uri", "", "--db", "x"},
		"bad format":     {"doctor", "--uri", mongotest.URI(), "--db", db.Name(), "--format", "xml"},
		"bad fail-on":    {"doctor", "--uri", mongotest.URI(), "--db", db.Name(), "--fail-on", "warn"},
		"bad query":      {"doctor", "--uri", mongotest.URI(), "--db", db.Name(), "--query", `{"filter": {}}`},
		"bad shard key":  {"doctor", "--uri", mongotest.URI(), "--db", db.Name(), "--shard-key", `{"collection": "o", "key": {"a": -1}}`},
		"bad pipeline":   {"doctor", "--uri", mongotest.URI(), "--db", db.Name(), "--pipeline", `{"collection": "o", "pipeline": []}`},
		"unknown flag":   {"doctor", "--bogus"},
		"extra args":     {"doctor", "--uri", mongotest.URI(), "--db", db.Name(), "extra"},
		"unknown rule":   {"doctor", "--uri", mongotest.URI(), "--db", db.Name(), "--disable", "nope"},
		"no collection":  {"doctor", "--uri", mongotest.URI(), "--db", db.Name(), "--collection", "nowhere"},
		"bad sample":     {"doctor", "--uri", mongotest.URI(), "--db", db.Name(), "--sample", "-5"},
		"unreachable":    {"doctor", "--uri", "mongodb://127.0.0.1:1/?connectTimeoutMS=500", "--db", "x", "--timeout", "500ms"},
		"bad uri":        {"doctor", "--uri", "postgres://x", "--db", "x"},
		"no command":     {},
		"bad command":    {"vacuum"},
		"empty database": {"doctor", "--uri", mongotest.URI(), "--db", db.Name()},
	} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), args, &out, &errOut)
		require.Equal(t, exitUsage, code, "%s: %s", name, errOut.String())
		require.Empty(t, out.String(), "%s: errors go to stderr", name)
		require.NotEmpty(t, errOut.String(), name)
	}
	var out, errOut bytes.Buffer
	require.Equal(t, exitOK, run(context.Background(), []string{"doctor", "-h"}, &out, &errOut))
	require.Contains(t, errOut.String(), "--fail-on")
	require.Equal(t, exitOK, run(context.Background(), []string{"help"}, &out, &errOut))
	require.Contains(t, out.String(), "doctor")
}

// A query shape, shard key or pipeline on a collection that does not
// exist is a usage error, as a misspelt --collection is: a typo must not
// pass a CI gate (the database has a collection, so only the name is wrong).
func TestDoctorMissingCollectionOfAShapeIsAUsageError(t *testing.T) {
	db := mongotest.DB(t)
	_, err := db.Collection("orders").InsertOne(context.Background(), bson.D{{Key: "status", Value: "paid"}})
	require.NoError(t, err)
	for name, args := range map[string][]string{
		"query":     {"--query", `{"collection": "ordres", "filter": {"status": "paid"}}`},
		"shard key": {"--shard-key", `{"collection": "ordres", "key": {"status": 1}}`},
		"pipeline":  {"--pipeline", `{"collection": "ordres", "pipeline": [{"$match": {"status": "paid"}}]}`},
	} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), append([]string{"doctor", "--uri", mongotest.URI(), "--db", db.Name()}, args...), &out, &errOut)
		require.Equal(t, exitUsage, code, "%s: %s", name, errOut.String())
		require.Contains(t, errOut.String(), `collection "ordres": not found`, name)
		require.Empty(t, out.String(), name)
	}
}

func TestRedactHidesPasswords(t *testing.T) {
	require.Equal(t, "mongodb://app:xxxxx@db.example.com:27017/?tls=true", redact("mongodb://app:s3cret@db.example.com:27017/?tls=true"))
	require.Equal(t, "mongodb://localhost", redact("mongodb://localhost"))
}

// TestDoctorHTMLRendersInABrowser renders --format html in headless
// Chromium and checks that the browser built every chart.
func TestDoctorHTMLRendersInABrowser(t *testing.T) {
	db := seeded(t, doctortest.AntiPatterns)
	code, page, stderr := doctorRun(t, db, "--format", "html")
	require.Equal(t, exitFindings, code, stderr)
	require.True(t, strings.HasPrefix(page, "<!DOCTYPE html>"))
	require.NotContains(t, page, "https://", "self-contained")
	collections := 7
	require.Equal(t, 2*collections, strings.Count(page, `<svg class="chart"`))

	browser, err := exec.LookPath("chromium")
	if err != nil {
		t.Skipf("skipped the browser check: chromium is not installed (%v); Debian: apt-get install chromium", err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "report.html")
	require.NoError(t, os.WriteFile(file, []byte(page), 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--user-data-dir="+filepath.Join(dir, "profile"), "--dump-dom", "file://"+file)
	var dom, logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &dom, &logs
	require.NoError(t, cmd.Run(), logs.String())

	// The page's script counts, in the browser's DOM, the SVG charts and
	// their bars, and writes the counts on <body>.
	body := regexp.MustCompile(`<body data-charts="(\d+)" data-bars="(\d+)"`).FindStringSubmatch(dom.String())
	require.NotNil(t, body, "the script ran and marked <body>: %.500s", dom.String())
	charts, _ := strconv.Atoi(body[1])
	bars, _ := strconv.Atoi(body[2])
	require.Equal(t, 2*collections, charts)
	require.Greater(t, bars, collections, "at least one size bar per collection, and the array bars")
	for _, kind := range []string{"document-sizes", "array-lengths"} {
		require.Equal(t, collections, strings.Count(dom.String(), `data-chart="`+kind+`"`), kind)
	}
	require.Contains(t, dom.String(), `<rect class="bar over"`, "the 3 MB document and the 1,500 reviews are drawn past their limits")
}

// Credentials the server refuses are said to be refused, not reported as
// an unreachable server; the password stays hidden.
func TestPingErrorTellsRefusedCredentials(t *testing.T) {
	uri := "mongodb://ada:secret@db.example:27017/"
	refused := pingError(uri, time.Second, fmt.Errorf("connection() error occurred during connection handshake: %w", &auth.Error{}))
	require.ErrorContains(t, refused, "refused the credentials")
	require.NotContains(t, refused.Error(), "secret")
	unreachable := pingError(uri, time.Second, context.DeadlineExceeded)
	require.ErrorContains(t, unreachable, "cannot reach the server at mongodb://ada:xxxxx@db.example:27017/ within 1s")
}
