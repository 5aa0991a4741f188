// Command devserver runs the embedded FerretDB of package devserver as a
// process: it prints the connection URI on one line once it accepts
// connections, and stops cleanly on SIGINT or SIGTERM.
//
//	go -C devserver run ./cmd/devserver -addr 127.0.0.1:27017
//
// Flags:
//
//	-addr        listen address (default 127.0.0.1:0, a free port)
//	-dir         data directory (default: a temporary directory removed on exit)
//	-log-level   FerretDB log level to stderr: debug, info, warn, error or off (default error;
//	             FerretDB warns on every command it does not know, such as endSessions)
//	-watch-stdin also stop when standard input reaches end of file, so that
//	             a parent that dies without signalling takes the server with it
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/mongopatterns/mongopatterns/devserver"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	dir := flag.String("dir", "", "data directory (default: a temporary directory removed on exit)")
	level := flag.String("log-level", "error", "log level to stderr: debug, info, warn, error or off")
	watchStdin := flag.Bool("watch-stdin", false, "stop when standard input reaches end of file")
	flag.Parse()
	if err := run(*addr, *dir, *level, *watchStdin); err != nil {
		fmt.Fprintln(os.Stderr, "devserver:", err)
		os.Exit(1)
	}
}

func run(addr, dir, level string, watchStdin bool) error {
	logger, err := newLogger(level)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if watchStdin {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			cancel()
		}()
	}
	srv, err := devserver.Start(ctx, devserver.Options{Addr: addr, Dir: dir, Logger: logger})
	if err != nil {
		return err
	}
	fmt.Println(srv.URI())
	<-ctx.Done()
	return srv.Stop()
}

func newLogger(level string) (*slog.Logger, error) {
	if level == "off" {
		return slog.New(slog.NewTextHandler(io.Discard, nil)), nil
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("-log-level %q: %w", level, err)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}
