package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
)

// start builds and starts the command with a private TMPDIR, and returns
// it with the URI it printed.
func start(t *testing.T, args ...string) (*exec.Cmd, string, string) {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "devserver")
	build := exec.Command("go", "build", "-o", exe, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	tmp := t.TempDir()
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	return cmd, tmp, func() string {
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		line, err := bufio.NewReader(stdout).ReadString('\n')
		require.NoError(t, err)
		return strings.TrimSpace(line)
	}()
}

func ping(t *testing.T, uri string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := mongo.Connect(options.Client().ApplyURI(uri))
	require.NoError(t, err)
	defer c.Disconnect(ctx)
	require.NoError(t, c.Ping(ctx, readpref.Primary()))
}

func wait(t *testing.T, cmd *exec.Cmd) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("devserver did not exit within 30s")
		return nil
	}
}

func TestCommandPrintsURIAndStopsOnSIGTERM(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd, tmp, uri := start(t)
			require.Regexp(t, `^mongodb://127\.0\.0\.1:\d+/$`, uri)
			ping(t, uri)
			entries, err := os.ReadDir(tmp)
			require.NoError(t, err)
			require.Len(t, entries, 1, "the data lives in a temporary directory")

			require.NoError(t, cmd.Process.Signal(sig))
			require.NoError(t, wait(t, cmd), "a clean shutdown exits 0")
			entries, err = os.ReadDir(tmp)
			require.NoError(t, err)
			require.Empty(t, entries, "the temporary data directory is removed on exit")
		})
	}
}

func TestCommandWatchStdinStopsWhenTheParentGoes(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "devserver")
	out, err := exec.Command("go", "build", "-o", exe, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	cmd := exec.Command(exe, "-watch-stdin", "-addr", "127.0.0.1:0")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	uri, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	ping(t, strings.TrimSpace(uri))
	require.NoError(t, stdin.Close())
	require.NoError(t, wait(t, cmd))
}

func TestCommandRejectsABadLogLevel(t *testing.T) {
	_, err := newLogger("loud")
	require.ErrorContains(t, err, "loud")
	for _, l := range []string{"debug", "info", "warn", "error", "off"} {
		_, err := newLogger(l)
		require.NoError(t, err)
	}
}
