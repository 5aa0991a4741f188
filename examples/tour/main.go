// Command tour runs every example program of mongopatterns against one
// server and prints what each did: the documents it stored and the
// commands it sent.
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
	"strings"

	"github.com/mongopatterns/mongopatterns/examples/internal/demo"
)

// programs are the example programs the tour runs, in order: a directory
// of this module and what it shows.
var programs = []struct{ dir, about string }{
	{"products", "subset: each product embeds its 3 newest reviews; out-of-order and retried adds, refill on remove, keyset pages of all reviews"},
	{"orders", "extended references: customer and product copies in orders and carts kept in sync on rename and reprice; drift found by Verify and fixed by Repair"},
	{"posts", "outlier: ordinary posts embed their comments; a viral post keeps 50 and overflows the rest into documents of 20, read back in order"},
	{"iot", "bucket: sensor readings in hourly buckets (one upsert each), hourly summaries from bucket summaries, range read, retention"},
	{"users", "schema versioning: old documents migrated on read and written back, writes stamp the version, a newer document is refused, MigrateAll finishes the rest"},
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
	return errors.Join(failed...)
}
