package faults

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/internal/srverr"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// The transient proxy backs the promise that a repository's writes are
// sent again after a transient failure that applied nothing (FerretDB
// 2.x's "deadlock detected", which the driver does not retry): it answers
// one write command with that error instead of forwarding it, and the
// operation must succeed, whole, without the caller seeing anything.
// FerretDB 2.x cannot run here and no other server fails this way on
// demand, so the proxy forges the reply; everything else goes to the
// real server. (Moved from outlier's tests, for every repository.)

// DeadlockCode is FerretDB 2.x's code for PostgreSQL's deadlock detected,
// which srverr.Transient recognises.
const DeadlockCode = 16908292

// opMsg is the wire protocol's OP_MSG opcode, the only one the driver
// sends commands with.
const opMsg = 2013

// TransientProxy forwards a client's connections to the server, and
// answers the armed write command (the n-th update, insert, delete or
// findAndModify from Arm on) with a deadlock error instead of forwarding
// it.
type TransientProxy struct {
	server string
	client *mongo.Client

	mu     sync.Mutex
	armed  int  // the write to fail, counted from 1; 0: none
	dupKey bool // fail it with a duplicate key rather than a deadlock
	writes int  // writes seen since Arm
	forged int  // replies forged since Arm
}

// NewTransient starts a proxy in front of the server in use and connects
// a client through it; both stop when the test ends. It skips the test
// where the server's URI is not a single mongodb://host:port.
func NewTransient(t *testing.T) *TransientProxy {
	t.Helper()
	u := serverURL(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("faults: listen: %v", err)
	}
	p := &TransientProxy{server: u.Host}
	var conns sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		conns.Wait()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Go(func() { p.serve(c) })
		}
	}()
	p.client = mongotest.Connect(t, through(u, ln.Addr().String()), nil, func(o *options.ClientOptions) {
		// Polled heartbeats: the server streams nothing the proxy must
		// interleave with a forged reply.
		o.SetServerMonitoringMode(options.ServerMonitoringModePoll)
	})
	return p
}

// Client returns the client connected through the proxy.
func (p *TransientProxy) Client() *mongo.Client { return p.client }

// Arm makes the n-th write command the client sends from now fail with a
// deadlock (n 0: none), once.
func (p *TransientProxy) Arm(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed, p.dupKey, p.writes, p.forged = n, false, 0, 0
}

// ArmDuplicateKey makes the n-th write command the client sends from now
// fail, once, without reaching the server, with a duplicate key on _id
// for its first statement (a write error, code 11000, in an ok reply):
// what a server answers an upsert that matched nothing and whose insert
// then met a document with its _id, inserted meanwhile by a write in
// flight. That interleaving happens inside the server, where no test can
// force it; a test stores the document in the window before the write
// ([mongotest.OnCommand]) and lets the proxy answer.
func (p *TransientProxy) ArmDuplicateKey(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed, p.dupKey, p.writes, p.forged = n, true, 0, 0
}

// Counts returns the writes seen and the replies forged since Arm.
func (p *TransientProxy) Counts() (writes, forged int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.writes, p.forged
}

// serve relays one connection, message by message from the client (so
// that it can answer one itself), byte for byte from the server.
func (p *TransientProxy) serve(c net.Conn) {
	defer c.Close()
	s, err := net.DialTimeout("tcp", p.server, 10*time.Second)
	if err != nil {
		return
	}
	defer s.Close()
	var toClient sync.Mutex // the server's replies and the forged ones
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := s.Read(buf)
			if n > 0 {
				toClient.Lock()
				_, werr := c.Write(buf[:n])
				toClient.Unlock()
				if werr != nil {
					return
				}
			}
			if err != nil {
				_ = c.Close()
				return
			}
		}
	}()
	for {
		msg, err := readMessage(c)
		if err != nil {
			return
		}
		if reply := p.forge(msg); reply != nil {
			toClient.Lock()
			_, err = c.Write(reply)
			toClient.Unlock()
		} else {
			_, err = s.Write(msg)
		}
		if err != nil {
			return
		}
	}
}

// readMessage reads one wire protocol message.
func readMessage(r io.Reader) ([]byte, error) {
	var header [16]byte
	if _, err := io.ReadFull(r, header[:]); err != nil {
		return nil, err
	}
	n := int(binary.LittleEndian.Uint32(header[:4]))
	if n < 16 || n > 64<<20 {
		return nil, fmt.Errorf("message of %d bytes", n)
	}
	msg := make([]byte, n)
	copy(msg, header[:])
	_, err := io.ReadFull(r, msg[16:])
	return msg, err
}

// forge returns the reply to send instead of forwarding msg, or nil.
// Writes alternate between the two shapes a deadlock takes: a command
// error (ok: 0), and a write error in an ok reply; a duplicate key is a
// write error.
func (p *TransientProxy) forge(msg []byte) []byte {
	name := commandName(msg)
	switch name {
	case "update", "insert", "delete", "findAndModify":
	default:
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.writes++; p.writes != p.armed {
		return nil
	}
	p.forged++
	body := bson.D{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: "deadlock detected"}, {Key: "code", Value: int32(DeadlockCode)}, {Key: "codeName", Value: "InternalError"}}
	switch {
	case p.dupKey:
		body = bson.D{{Key: "n", Value: int32(0)}, {Key: "writeErrors", Value: bson.A{bson.D{
			{Key: "index", Value: int32(0)}, {Key: "code", Value: int32(11000)}, {Key: "errmsg", Value: "E11000 duplicate key error, index: _id_"},
		}}}, {Key: "ok", Value: 1.0}}
	case p.armed%2 == 0 && name != "findAndModify":
		body = bson.D{{Key: "n", Value: int32(0)}, {Key: "writeErrors", Value: bson.A{bson.D{
			{Key: "index", Value: int32(0)}, {Key: "code", Value: int32(DeadlockCode)}, {Key: "errmsg", Value: "deadlock detected"},
		}}}, {Key: "ok", Value: 1.0}}
	}
	doc, err := bson.Marshal(body)
	if err != nil {
		panic(err)
	}
	reply := make([]byte, 16+4+1, 16+4+1+len(doc))
	binary.LittleEndian.PutUint32(reply[0:], uint32(cap(reply)))
	binary.LittleEndian.PutUint32(reply[4:], 1<<30|binary.LittleEndian.Uint32(msg[4:])) // a request id of its own
	binary.LittleEndian.PutUint32(reply[8:], binary.LittleEndian.Uint32(msg[4:]))       // responseTo
	binary.LittleEndian.PutUint32(reply[12:], opMsg)
	// flagBits 0, then a body section (kind 0).
	return append(reply, doc...)
}

// commandName returns the name of the command an OP_MSG carries: the
// first key of its body section; "" for any other message.
func commandName(msg []byte) string {
	if len(msg) < 21 || binary.LittleEndian.Uint32(msg[12:]) != opMsg {
		return ""
	}
	for rest := msg[20:]; len(rest) > 5; {
		kind, size := rest[0], int(binary.LittleEndian.Uint32(rest[1:]))
		if size < 5 || 1+size > len(rest) {
			return ""
		}
		if kind == 0 {
			elems, err := bson.Raw(rest[1 : 1+size]).Elements()
			if err != nil || len(elems) == 0 {
				return ""
			}
			return elems[0].Key()
		}
		rest = rest[1+size:]
	}
	return ""
}

// RunTransient runs c's operation once healthy through p's client,
// counting its writes (w), and checks it; then, for each write k of
// 1..w, as a subtest on fresh data, fails write k with a deadlock and
// requires that the operation returns nil having sent that write once
// more, and no other, with its whole effect (Check). c.Retry is not used.
func RunTransient[S any](t *testing.T, p *TransientProxy, c Case[S]) {
	t.Helper()
	ctx := context.Background()
	db := mongotest.DB(t)
	fresh := c.fresh(db)
	s := c.Prepare(t, db)
	p.Arm(0)
	if err := c.Op(ctx, p.client.Database(db.Name()), s); err != nil {
		t.Fatalf("faults: the operation fails without a deadlock: %v", err)
	}
	c.Check(t, db, s)
	w, _ := p.Counts()
	mongotest.Detail(t, "the operation sends %d writes", w)
	for k := 1; k <= w; k++ {
		t.Run(fmt.Sprintf("deadlock_write_%d", k), func(t *testing.T) {
			db := fresh(t)
			s := c.Prepare(t, db)
			p.Arm(k)
			err := c.Op(ctx, p.client.Database(db.Name()), s)
			sent, forged := p.Counts()
			p.Arm(0)
			if forged != 1 {
				t.Fatalf("write %d was not failed with a deadlock (%d forged, err %v)", k, forged, err)
			}
			if err != nil {
				t.Fatalf("the write failed with a deadlock was not sent again: %v", err)
			}
			if sent != w+1 {
				t.Fatalf("%d writes sent; want %d: only the failed write sent again", sent, w+1)
			}
			c.Check(t, db, s)
		})
	}
}

// RequireRetried requires of op, an operation that rec recorded while p
// was armed, that it met the one deadlock p forged and sent the write
// again: it succeeded, and reported one retry, an [patterns.EventRetry]
// carrying the transient error.
func (p *TransientProxy) RequireRetried(t testing.TB, rec *mongotest.Recorder, op *patterns.Operation) {
	t.Helper()
	_, forged := p.Counts()
	require.Equal(t, 1, forged, "replies forged")
	require.NoError(t, op.Err)
	require.Equal(t, 1, op.Retries())
	events := rec.Events(op)
	require.Len(t, events, 1)
	require.Equal(t, patterns.EventRetry, events[0].Kind)
	require.True(t, srverr.Transient(events[0].Err), "the event carries the transient error: %v", events[0].Err)
}
