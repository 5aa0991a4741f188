package faults

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// A relay sits between a [Proxy]'s toxiproxy and the server and forwards
// each connection byte for byte, so that [Proxy.quiesce] can tell when the
// server has finished every command the faulty client sent. A command
// whose reply a fault dropped, or whose caller's deadline passed, may
// still run on the server, or still wait there for a worker (FerretDB 2
// queues it for a PostgreSQL connection, where currentOp does not list
// it), and would land in the middle of what a test reads or stores next.
// A server runs the commands of a connection in order, and closes the
// connection once it reads the end of it after the last: so cutting a
// connection (closing it towards the client, and only the writing half
// towards the server) and reading on until the server closes it waits for
// exactly the commands sent on it, however slow the server is.
type relay struct {
	server string
	ln     net.Listener
	wg     sync.WaitGroup // the accept loop and both copies of each connection

	mu      sync.Mutex
	conns   map[*relayConn]struct{} // open towards the server
	stopped bool                    // the test has ended
}

// relayConn is one relayed connection: from the client (the toxiproxy)
// and to the server; done is closed once the server has closed it.
type relayConn struct {
	client, server net.Conn
	done           chan struct{}
}

// newRelay starts a relay to server on a port of 127.0.0.1; it stops when
// the test ends: it closes every connection, on both sides (a command
// still running then is the ended test's), and waits until each of its
// goroutines has returned.
func newRelay(t testing.TB, server string) *relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("faults: start the relay: %v", err)
	}
	r := &relay{server: server, ln: ln, conns: map[*relayConn]struct{}{}}
	t.Cleanup(func() {
		_ = ln.Close()
		r.mu.Lock()
		r.stopped = true
		for rc := range r.conns {
			_ = rc.client.Close()
			_ = rc.server.Close()
		}
		r.mu.Unlock()
		r.wg.Wait()
	})
	r.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r.wg.Go(func() { r.serve(c) })
		}
	})
	return r
}

// addr is where the relay listens.
func (r *relay) addr() string { return r.ln.Addr().String() }

// serve relays c to the server until the server closes the connection.
// When the client's side ends (it closed, or a fault reset it), the
// relay closes its writing half towards the server and reads on, so that
// the server finishes what it received and then closes.
func (r *relay) serve(c net.Conn) {
	s, err := net.DialTimeout("tcp", r.server, 10*time.Second)
	if err != nil {
		_ = c.Close()
		return
	}
	rc := &relayConn{client: c, server: s, done: make(chan struct{})}
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		_ = s.Close()
		_ = c.Close()
		return
	}
	r.conns[rc] = struct{}{}
	r.mu.Unlock()
	r.wg.Go(func() {
		// From the server, until it closes: to the client while the
		// client reads, then nowhere.
		_, _ = io.Copy(c, s)
		_, _ = io.Copy(io.Discard, s)
		_ = s.Close()
		_ = c.Close()
		r.mu.Lock()
		delete(r.conns, rc)
		r.mu.Unlock()
		close(rc.done)
	})
	_, _ = io.Copy(s, c)
	_ = s.(*net.TCPConn).CloseWrite()
}

// cut ends every connection on the client's side and returns the
// connections, for the caller to wait until the server has closed them.
func (r *relay) cut() []*relayConn {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*relayConn, 0, len(r.conns))
	for rc := range r.conns {
		_ = rc.client.Close()
		out = append(out, rc)
	}
	return out
}
