package main

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mongopatterns/mongopatterns/doctor/doctortest"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
)

// TestBuiltBinaryExitCodes builds the command as a user does (go build
// -o) and checks the exit status a CI gate reads from the process: 0 on a
// clean database, 1 on findings, 2 when the server cannot be reached or
// the flags are wrong.
func TestBuiltBinaryExitCodes(t *testing.T) {
	goTool, err := exec.LookPath("go")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "mongopatterns")
	out, err := exec.CommandContext(ctx, goTool, "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)

	clean := seeded(t, doctortest.Clean)
	dirty := seeded(t, doctortest.AntiPatterns)
	for _, tc := range []struct {
		name string
		args []string
		want int
	}{
		{"clean database", []string{"doctor", "--uri", mongotest.URI(), "--db", clean.Name()}, exitOK},
		{"findings", []string{"doctor", "--uri", mongotest.URI(), "--db", dirty.Name(), "--collection", "orders"}, exitFindings},
		{"findings under --fail-on critical", []string{"doctor", "--uri", mongotest.URI(), "--db", dirty.Name(), "--collection", "orders", "--fail-on", "critical"}, exitOK},
		{"unreachable server", []string{"doctor", "--uri", "mongodb://127.0.0.1:1/", "--db", "shop", "--timeout", "500ms"}, exitUsage},
		{"no --db", []string{"doctor", "--uri", mongotest.URI()}, exitUsage},
	} {
		cmd := exec.CommandContext(ctx, bin, tc.args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			code = ee.ExitCode()
		} else {
			require.NoError(t, err, tc.name)
		}
		require.Equal(t, tc.want, code, "%s: %s", tc.name, stderr.String())
	}
}
