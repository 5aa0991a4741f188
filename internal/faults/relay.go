package faults

import (
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// A relay sits between a [Proxy]'s toxiproxy and the server and forwards
// each connection message by message, counting on each the requests the
// server has not answered yet, so that [Proxy.quiesce] can tell when the
// server has finished every command the faulty client sent. A command
// whose reply a fault dropped (inside the toxiproxy, after the relay saw
// it), or whose caller's deadline passed, may still run on the server, or
// still wait there for a worker (FerretDB 2 queues it for a PostgreSQL
// connection, where currentOp does not list it), and would land in the
// middle of what a test reads or stores next. A request the toxiproxy
// dropped never reaches the relay, and is not counted; nor is a request
// the server does not answer (an unacknowledged write, which the
// library never sends).
//
// The relay removes maxTimeMS from the commands it forwards (the driver
// derives it from the operation's deadline): a server that stops a command
// at its maxTimeMS may answer before its storage has let go of the command,
// which then lands after the answer (FerretDB 2.7 did: a Stall's update
// of the subset, answered, was not yet visible to a reader, and was
// then), where without it the answer comes when the command has ended.
// The client still gives up at its deadline.
//
// When the client's side of a connection ends (it closed, or a fault
// reset it), the relay keeps the server's side open until the server has
// answered every request it received there, and only then closes its
// writing half, reading on until the server closes the connection. A
// server that sees a connection end while a command runs may close it at
// once and let the command finish behind it (FerretDB 2 does: its
// answer is then lost, and the relay could not tell when it ended).
type relay struct {
	server string
	ln     net.Listener
	wg     sync.WaitGroup // the accept loop and both directions of each connection

	mu      sync.Mutex
	conns   map[*relayConn]struct{} // open towards the server
	stopped bool                    // the test has ended
}

// relayConn is one relayed connection: from the client (the toxiproxy)
// and to the server.
type relayConn struct {
	client, server net.Conn
	// Guarded by relay.mu: the requests sent to the server and not
	// answered yet, and whether the client's side has ended.
	unanswered int
	clientGone bool
}

// answered notes the last reply to a request and reports whether the
// server's side is now to be closed: the client has gone and every
// request is answered. With relay.mu held.
func (rc *relayConn) answered() bool {
	rc.unanswered = max(rc.unanswered-1, 0)
	return rc.clientGone && rc.unanswered == 0
}

// gone notes the end of the client's side and reports whether the
// server's side is now to be closed: every request is answered. With
// relay.mu held.
func (rc *relayConn) gone() bool {
	rc.clientGone = true
	return rc.unanswered == 0
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
func (r *relay) serve(c net.Conn) {
	s, err := net.DialTimeout("tcp", r.server, 10*time.Second)
	if err != nil {
		_ = c.Close()
		return
	}
	rc := &relayConn{client: c, server: s}
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
		toClient := true
		for {
			msg, err := readMessage(s)
			if err != nil {
				break
			}
			if !moreToCome(msg) { // the last reply to a request
				r.mu.Lock()
				end := rc.answered()
				r.mu.Unlock()
				if end {
					_ = s.(*net.TCPConn).CloseWrite()
				}
			}
			if toClient {
				_, err := c.Write(msg)
				toClient = err == nil
			}
		}
		_ = s.Close()
		_ = c.Close()
		r.mu.Lock()
		delete(r.conns, rc)
		r.mu.Unlock()
	})
	for {
		msg, err := readMessage(c)
		if err != nil {
			break
		}
		msg = withoutMaxTime(msg)
		if !moreToCome(msg) { // a request the server answers
			r.mu.Lock()
			rc.unanswered++
			r.mu.Unlock()
		}
		if _, err := s.Write(msg); err != nil {
			break
		}
	}
	r.mu.Lock()
	end := rc.gone()
	r.mu.Unlock()
	if end {
		_ = s.(*net.TCPConn).CloseWrite()
	}
}

// idle reports whether the server has answered every request it received
// on the relay's connections.
func (r *relay) idle() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for rc := range r.conns {
		if rc.unanswered > 0 {
			return false
		}
	}
	return true
}

// moreToCome reports whether msg, a wire message, is an OP_MSG with the
// moreToCome flag: a request the server does not answer (an
// unacknowledged write), or a reply that others follow (an exhaust
// cursor's, a streaming hello's). Every other message is a request that
// one reply answers, or such a reply (the driver's OP_COMPRESSED, whose
// flags are compressed, included: it compresses no unacknowledged write
// here).
func moreToCome(msg []byte) bool {
	return len(msg) >= 20 && binary.LittleEndian.Uint32(msg[12:16]) == opMsg && binary.LittleEndian.Uint32(msg[16:20])&2 != 0
}

// withoutMaxTime returns msg, a wire message, without the maxTimeMS field
// of its command: an OP_MSG whose first section is its body (kind 0, as
// drivers send it) gets that body rebuilt without the field, the sections
// after it as they were, and its length fixed. Any other message, one with
// a checksum, or one whose command has no maxTimeMS (or is a getMore,
// whose maxTimeMS is how long a tailable cursor awaits data) is returned
// as is, uncopied.
func withoutMaxTime(msg []byte) []byte {
	if len(msg) < 21 || binary.LittleEndian.Uint32(msg[12:16]) != opMsg || binary.LittleEndian.Uint32(msg[16:20])&1 != 0 || msg[20] != 0 {
		return msg
	}
	body, after, ok := bsoncore.ReadDocument(msg[21:])
	if !ok {
		return msg
	}
	first, err := body.IndexErr(0)
	if err != nil || first.Key() == "getMore" {
		return msg
	}
	if _, err := body.LookupErr("maxTimeMS"); err != nil {
		return msg
	}
	elems, err := body.Elements()
	if err != nil {
		return msg
	}
	idx, out := bsoncore.AppendDocumentStart(append([]byte(nil), msg[:21]...))
	for _, e := range elems {
		if e.Key() != "maxTimeMS" {
			out = append(out, e...)
		}
	}
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	out = append(out, after...)
	binary.LittleEndian.PutUint32(out[0:4], uint32(len(out)))
	return out
}
