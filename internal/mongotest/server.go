package mongotest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/modules/mongodb"
)

// mongoImage is the MongoDB image the container step runs.
const mongoImage = "mongo:8"

// started is a server the harness found or started, and how to stop it.
type started struct {
	uri  string
	how  string // how it was found, for the log line
	stop func() error
}

// startServer picks a server in the documented order and returns the
// first that works, or an error listing why each step failed.
func startServer(ctx context.Context) (*started, error) {
	if uri := os.Getenv("MONGODB_URI"); uri != "" {
		return &started{uri: uri, how: "MONGODB_URI", stop: func() error { return nil }}, nil
	}
	force := os.Getenv("MONGOTEST_SERVER")
	var reasons []error
	if force == "" || force == "container" {
		s, err := startContainer(ctx)
		if err == nil {
			return s, nil
		}
		reasons = append(reasons, fmt.Errorf("container: %w", err))
	}
	if force == "" || force == "embedded" {
		s, err := startEmbedded(ctx)
		if err == nil {
			if len(reasons) > 0 {
				s.how += fmt.Sprintf(" (%v)", errors.Join(reasons...))
			}
			return s, nil
		}
		reasons = append(reasons, fmt.Errorf("embedded dev server: %w", err))
	}
	if len(reasons) == 0 {
		return nil, fmt.Errorf("MONGOTEST_SERVER=%q: want container or embedded", force)
	}
	return nil, fmt.Errorf("no server could be started: %w", errors.Join(reasons...))
}

// startContainer runs MongoDB in a container when a Docker provider is
// healthy. Probing an absent Docker costs about a millisecond.
func startContainer(ctx context.Context) (*started, error) {
	p, err := testcontainers.NewDockerProvider()
	if err != nil {
		return nil, fmt.Errorf("no Docker provider: %w", err)
	}
	if err := p.Health(ctx); err != nil { // Health closes p
		return nil, fmt.Errorf("the Docker provider is unhealthy: %w", err)
	}
	c, err := mongodb.Run(ctx, mongoImage, mongodb.WithReplicaSet("rs0"))
	if err != nil {
		if c != nil {
			_ = testcontainers.TerminateContainer(c)
		}
		return nil, fmt.Errorf("run %s: %w", mongoImage, err)
	}
	raw, err := c.ConnectionString(ctx)
	if err != nil {
		_ = testcontainers.TerminateContainer(c)
		return nil, fmt.Errorf("connection string: %w", err)
	}
	// The replica set's member is named by the container's own IP, which the
	// host may not reach (Docker Desktop): connect to the mapped port
	// directly instead of discovering the set.
	u, err := url.Parse(raw)
	if err != nil {
		_ = testcontainers.TerminateContainer(c)
		return nil, fmt.Errorf("connection string %q: %w", raw, err)
	}
	u.RawQuery = "directConnection=true"
	return &started{
		uri:  u.String(),
		how:  "testcontainers " + mongoImage + " single-node replica set",
		stop: func() error { return testcontainers.TerminateContainer(c) },
	}, nil
}

// devserverDir is the dev server's module, found from this file's path:
// the harness runs from a checkout of the repository.
func devserverDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot locate the harness source")
	}
	dir := filepath.Join(filepath.Dir(file), "..", "..", "devserver")
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("dev server module: %w", err)
	}
	return dir, nil
}

// startEmbedded builds the dev server command with the go command (or
// takes the one MONGOTEST_DEVSERVER names) and runs it on a free port; the
// server keeps its data in a temporary directory that it removes when it
// stops.
func startEmbedded(ctx context.Context) (*started, error) {
	exe, bin, err := devserverExe(ctx)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "-watch-stdin", "-log-level", "error")
	// With -watch-stdin the server also stops when this process dies
	// without stopping it (a test timeout), because the pipe closes.
	stdin, err := cmd.StdinPipe()
	if err != nil {
		_ = os.RemoveAll(bin)
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		_ = os.RemoveAll(bin)
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(bin)
		return nil, fmt.Errorf("start %s: %w", exe, err)
	}
	stop := func() error {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			err = fmt.Errorf("dev server did not stop within 30s: killed (%v)", <-done)
		}
		_ = stdin.Close()
		return errors.Join(err, os.RemoveAll(bin))
	}
	line := make(chan string, 1)
	go func() {
		r := bufio.NewReader(stdout)
		s, _ := r.ReadString('\n')
		line <- strings.TrimSpace(s)
		_, _ = io.Copy(io.Discard, r)
	}()
	select {
	case uri := <-line:
		if !strings.HasPrefix(uri, "mongodb://") {
			return nil, errors.Join(fmt.Errorf("dev server printed %q instead of its URI", uri), stop())
		}
		return &started{uri: uri, how: "embedded dev server (FerretDB v1.24.2, SQLite)", stop: stop}, nil
	case <-time.After(time.Minute):
		return nil, errors.Join(errors.New("dev server printed no URI within a minute"), stop())
	}
}

// devserverExe returns the dev server's executable: the one
// MONGOTEST_DEVSERVER names, or one built now with the go command into a
// new temporary directory, bin, which the caller removes ("" when nothing
// was built). Linking FerretDB costs a few seconds of CPU in every test
// binary; scripts/test builds it once and names it for all of them.
func devserverExe(ctx context.Context) (exe, bin string, err error) {
	if exe := os.Getenv("MONGOTEST_DEVSERVER"); exe != "" {
		if _, err := os.Stat(exe); err != nil {
			return "", "", fmt.Errorf("MONGOTEST_DEVSERVER: %w", err)
		}
		return exe, "", nil
	}
	dir, err := devserverDir()
	if err != nil {
		return "", "", err
	}
	bin, err = os.MkdirTemp("", "mongotest-bin-")
	if err != nil {
		return "", "", err
	}
	exe = filepath.Join(bin, "devserver")
	build := exec.CommandContext(ctx, "go", "build", "-o", exe, "./cmd/devserver")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		_ = os.RemoveAll(bin)
		return "", "", fmt.Errorf("go build ./cmd/devserver in %s: %w\n%s", dir, err, out)
	}
	return exe, bin, nil
}
