// Package devserver runs an embedded FerretDB v1.24.2 with its SQLite
// backend: a real MongoDB wire-protocol server in the same process, with no
// service to install. It is for development, examples and tests on machines
// without MongoDB; it is not MongoDB. FerretDB 1.x silently ignores the
// $push modifiers $sort/$slice/$position, lacks transactions, arrayFilters,
// TTL and partial indexes and more, and loses concurrent updates to one
// document unless the client uses a single connection
// (options.Client().SetMaxPoolSize(1)).
//
// It is a module of its own so that FerretDB and its dependencies (SQLite,
// pgx, OpenTelemetry, Prometheus) never enter the requirement graph of the
// mongopatterns library.
package devserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/FerretDB/FerretDB/ferretdb"
)

// Options configure [Start]. The zero value listens on a free loopback port
// and keeps its data in a temporary directory that [Server.Stop] removes.
type Options struct {
	// Addr is the TCP listen address; "" means "127.0.0.1:0" (a free port).
	Addr string
	// Dir holds the SQLite files; "" means a new temporary directory,
	// removed by Stop. A directory given here is kept.
	Dir string
	// Logger receives FerretDB's logs; nil discards them.
	Logger *slog.Logger
}

// Server is a running embedded FerretDB.
type Server struct {
	uri     string
	dir     string
	tempDir bool
	cancel  context.CancelFunc
	done    chan error

	stopOnce sync.Once
	stopErr  error
}

// Start starts FerretDB and returns once it accepts connections. The server
// runs until [Server.Stop] or until ctx is cancelled.
func Start(ctx context.Context, opts Options) (*Server, error) {
	addr := opts.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &Server{dir: opts.Dir}
	if s.dir == "" {
		d, err := os.MkdirTemp("", "mongopatterns-devserver-")
		if err != nil {
			return nil, fmt.Errorf("devserver: data directory: %w", err)
		}
		s.dir, s.tempDir = d, true
	} else if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return nil, fmt.Errorf("devserver: data directory: %w", err)
	}
	abs, err := filepath.Abs(s.dir)
	if err != nil {
		s.removeTemp()
		return nil, fmt.Errorf("devserver: data directory: %w", err)
	}
	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{TCP: addr},
		Logger:    logger,
		Handler:   "sqlite",
		SQLiteURL: "file:" + abs + "/",
	})
	if err != nil {
		s.removeTemp()
		return nil, fmt.Errorf("devserver: start FerretDB on %s: %w", addr, err)
	}
	// New has already bound the listener, so the URI is final and the
	// server accepts connections as soon as Run starts its accept loop;
	// connections made earlier wait in the listen backlog.
	s.uri = f.MongoDBURI()
	runCtx, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	s.done = make(chan error, 1)
	go func() { s.done <- f.Run(runCtx) }()
	return s, nil
}

// URI returns the connection string, for example "mongodb://127.0.0.1:40123/".
func (s *Server) URI() string { return s.uri }

// Dir returns the data directory.
func (s *Server) Dir() string { return s.dir }

// Stop stops the server, waits for it to close its connections and
// backend, and removes the data directory if Start created it. It is safe
// to call more than once.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		s.cancel()
		err := <-s.done
		if rmErr := s.removeTemp(); rmErr != nil {
			err = errors.Join(err, rmErr)
		}
		s.stopErr = err
	})
	return s.stopErr
}

func (s *Server) removeTemp() error {
	if !s.tempDir {
		return nil
	}
	if err := os.RemoveAll(s.dir); err != nil {
		return fmt.Errorf("devserver: remove data directory: %w", err)
	}
	return nil
}
