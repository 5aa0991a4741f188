// Command tour runs every example program of mongopatterns against one
// server and prints what each did: the documents it stored and the
// commands it sent. It ends by running the doctor (package doctor) on the
// databases the programs wrote, and prints what it finds.
//
//	go -C examples run ./tour
//
// It uses MONGODB_URI when set; otherwise it starts the embedded dev server
// (FerretDB on SQLite, in a temporary directory) and hands its URI to the
// programs.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/doctor"
	"github.com/mongopatterns/mongopatterns/examples/internal/demo"
)

// programs are the example programs the tour runs, in order: a directory
// of this module, the database it writes (the name it gives demo.Run) and
// what it shows.
var programs = []struct{ dir, db, about string }{
	{"products", "example_products", "subset: each product embeds its 3 newest reviews; out-of-order and retried adds, refill on remove, keyset pages of all reviews"},
	{"orders", "example_orders", "extended references: customer and product copies in orders and carts kept in sync on rename and reprice; drift found by Verify and fixed by Repair"},
	{"posts", "example_posts", "outlier: ordinary posts embed their comments; a viral post keeps 50 and overflows the rest into documents of 20, read back in order"},
	{"iot", "example_iot", "bucket: sensor readings in hourly buckets (AddMany: one write per bucket it fills), hourly summaries from bucket summaries, range read, retention"},
	{"users", "example_users", "schema versioning: old documents migrated on read and written back, writes stamp the version, a newer document is refused, MigrateAll finishes the rest"},
	{"schema", "example_schema", "schema validation: the users validator generated from a Go type, measured with Check on the stored documents, then applied and enforced"},
}

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "tour:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	env, err := demo.Connect(ctx)
	if err != nil {
		return err
	}
	defer env.Close()
	fmt.Printf("server: %s at %s\n", env.Server, env.URI)
	feats := make([]string, 0)
	for _, f := range env.Server.Features() {
		feats = append(feats, string(f))
	}
	if len(feats) == 0 {
		feats = append(feats, "none of the optional ones: every repository takes its portable path")
	}
	fmt.Printf("features: %s\n", strings.Join(feats, "; "))
	if len(programs) == 0 {
		return nil
	}

	_, self, _, _ := runtime.Caller(0)
	module := filepath.Join(filepath.Dir(self), "..")
	bin, err := os.MkdirTemp("", "mongopatterns-tour-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(bin)
	args := []string{"build", "-o", bin + string(filepath.Separator)}
	for _, p := range programs {
		args = append(args, "./"+p.dir)
	}
	build := exec.CommandContext(ctx, "go", args...)
	build.Dir, build.Stdout, build.Stderr = module, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("go build the examples: %w", err)
	}
	var failed []error
	for _, p := range programs {
		fmt.Printf("\n== %s: %s\n", p.dir, p.about)
		cmd := exec.CommandContext(ctx, filepath.Join(bin, filepath.Base(p.dir)))
		cmd.Env = append(os.Environ(), "MONGODB_URI="+env.URI)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			failed = append(failed, fmt.Errorf("%s: %w", p.dir, err))
		}
	}
	if err := errors.Join(failed...); err != nil {
		return err
	}
	return checkExamples(ctx, env.Client)
}

// checkExamples runs the doctor on each database the programs wrote and
// prints its findings, one line each, then the rules it could not
// evaluate on this server, once.
func checkExamples(ctx context.Context, client *mongo.Client) error {
	fmt.Printf("\n== doctor: the schema and index checks of package doctor, on the databases above\n")
	var skipped []string
	for _, p := range programs {
		rep, err := doctor.Check(ctx, client.Database(p.db), doctor.Options{})
		if err != nil {
			return fmt.Errorf("doctor %s: %w", p.db, err)
		}
		docs := int64(0)
		for _, c := range rep.Collections {
			docs += c.Documents
		}
		fmt.Printf("%s: %s, %s, %s\n", p.db, count(len(rep.Collections), "collection"), count(int(docs), "document"), count(len(rep.Findings), "finding"))
		for _, f := range rep.Findings {
			fmt.Printf("  %-8s %s %s: %s\n", f.Severity, f.Rule, f.Collection, f.Message)
		}
		for _, s := range rep.Skipped {
			if line := s.Rule + ": " + s.Reason; !slices.Contains(skipped, line) {
				skipped = append(skipped, line)
			}
		}
	}
	for _, s := range skipped {
		fmt.Printf("not evaluated on this server: %s\n", s)
	}
	return nil
}

// count writes n with its noun, in the plural unless n is one.
func count(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
