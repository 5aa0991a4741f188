package faults

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"slices"
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
	// partial: fail the last statement of the next insert, update or
	// delete of two statements or more, and forward the others
	// (ArmPartial).
	partial bool
	// victims maps the request id of a write forwarded without its last
	// statement to that statement's index, until its reply comes.
	victims map[uint32]int
	writes  int // writes seen since Arm
	forged  int // replies forged since Arm
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
	p.armed, p.dupKey, p.partial, p.writes, p.forged = n, false, false, 0, 0
}

// ArmPartial makes the next write command of two statements or more (an
// insert, an update or a delete, its statements in a document sequence,
// as the driver sends them) that the client sends from now apply all its
// statements but the last, and fail that one with a deadlock (a write
// error at its index in an ok reply), once: what FerretDB 2.x answers an
// unordered insertMany or bulk write one of whose statements PostgreSQL
// chose as a deadlock's victim, the others applied. The proxy forwards
// the command without its last statement and adds the write error to the
// server's reply, whose counts (n, nModified) are those of the statements
// the server ran. Counts reports the forged reply once the command has
// gone through.
func (p *TransientProxy) ArmPartial() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed, p.dupKey, p.partial, p.writes, p.forged = 0, false, true, 0, 0
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
	p.armed, p.dupKey, p.partial, p.writes, p.forged = n, true, false, 0, 0
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
		defer c.Close()
		for {
			msg, err := readMessage(s)
			if err != nil {
				return
			}
			toClient.Lock()
			_, err = c.Write(p.victim(msg))
			toClient.Unlock()
			if err != nil {
				return
			}
		}
	}()
	for {
		msg, err := readMessage(c)
		if err != nil {
			return
		}
		msg = p.sacrifice(msg)
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
// error (ok: 0), and a write error of each statement in an ok reply (the
// forged write applied nothing); a duplicate key is a write error of the
// first statement.
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
		var errs bson.A
		for i := range statements(msg, name) {
			errs = append(errs, deadlockAt(i))
		}
		body = bson.D{{Key: "n", Value: int32(0)}, {Key: "writeErrors", Value: errs}, {Key: "ok", Value: 1.0}}
	}
	return reply(msg, body)
}

// deadlockAt is the write error of a deadlock of statement i.
func deadlockAt(i int) bson.D {
	return bson.D{{Key: "index", Value: int32(i)}, {Key: "code", Value: int32(DeadlockCode)}, {Key: "errmsg", Value: "deadlock detected"}}
}

// reply returns an OP_MSG answering msg with body.
func reply(msg []byte, body bson.D) []byte {
	doc, err := bson.Marshal(body)
	if err != nil {
		panic(err)
	}
	out := make([]byte, 16+4+1, 16+4+1+len(doc))
	binary.LittleEndian.PutUint32(out[0:], uint32(cap(out)))
	binary.LittleEndian.PutUint32(out[4:], 1<<30|binary.LittleEndian.Uint32(msg[4:])) // a request id of its own
	binary.LittleEndian.PutUint32(out[8:], binary.LittleEndian.Uint32(msg[4:]))       // responseTo
	binary.LittleEndian.PutUint32(out[12:], opMsg)
	// flagBits 0, then a body section (kind 0).
	return append(out, doc...)
}

// section is one section of an OP_MSG: its kind (0, the body; 1, a
// document sequence), its identifier (kind 1) and its documents.
type section struct {
	kind byte
	id   string
	docs []bson.Raw
}

// sections returns the sections of msg, an OP_MSG without a checksum;
// false for any other message.
func sections(msg []byte) ([]section, bool) {
	if len(msg) < 21 || binary.LittleEndian.Uint32(msg[12:]) != opMsg || binary.LittleEndian.Uint32(msg[16:])&1 != 0 {
		return nil, false
	}
	var out []section
	for rest := msg[20:]; len(rest) > 0; {
		if len(rest) < 5 {
			return nil, false
		}
		kind, size := rest[0], int(binary.LittleEndian.Uint32(rest[1:]))
		if size < 5 || 1+size > len(rest) {
			return nil, false
		}
		switch kind {
		case 0:
			out = append(out, section{kind: 0, docs: []bson.Raw{bson.Raw(rest[1 : 1+size])}})
		case 1:
			body := rest[5 : 1+size]
			end := slices.Index(body, 0)
			if end < 0 {
				return nil, false
			}
			sec := section{kind: 1, id: string(body[:end])}
			for docs := body[end+1:]; len(docs) > 0; {
				if len(docs) < 5 {
					return nil, false
				}
				n := int(binary.LittleEndian.Uint32(docs))
				if n < 5 || n > len(docs) {
					return nil, false
				}
				sec.docs = append(sec.docs, bson.Raw(docs[:n]))
				docs = docs[n:]
			}
			out = append(out, sec)
		default:
			return nil, false
		}
		rest = rest[1+size:]
	}
	return out, true
}

// message returns an OP_MSG with the header of msg (its length set) and
// secs, flagBits 0.
func message(msg []byte, secs []section) []byte {
	out := append([]byte(nil), msg[:16]...)
	out = binary.LittleEndian.AppendUint32(out, 0)
	for _, sec := range secs {
		out = append(out, sec.kind)
		if sec.kind == 0 {
			out = append(out, sec.docs[0]...)
			continue
		}
		size := 4 + len(sec.id) + 1
		for _, d := range sec.docs {
			size += len(d)
		}
		out = binary.LittleEndian.AppendUint32(out, uint32(size))
		out = append(append(out, sec.id...), 0)
		for _, d := range sec.docs {
			out = append(out, d...)
		}
	}
	binary.LittleEndian.PutUint32(out, uint32(len(out)))
	return out
}

// statementsOf names the field holding a write command's statements.
var statementsOf = map[string]string{"insert": "documents", "update": "updates", "delete": "deletes"}

// statements returns the number of statements of the write command msg
// (name), in a document sequence or in its body; 1 for a command of one
// (findAndModify) or one it cannot read.
func statements(msg []byte, name string) int {
	secs, ok := sections(msg)
	field := statementsOf[name]
	if !ok || field == "" {
		return 1
	}
	for _, sec := range secs {
		if sec.kind == 1 && sec.id == field {
			return max(len(sec.docs), 1)
		}
		if sec.kind == 0 {
			if arr, ok := sec.docs[0].Lookup(field).ArrayOK(); ok {
				if vals, err := arr.Values(); err == nil {
					return max(len(vals), 1)
				}
			}
		}
	}
	return 1
}

// sacrifice returns msg without the last statement of its write when
// ArmPartial armed the proxy and msg is an insert, an update or a delete
// of two statements or more in a document sequence (as the driver sends
// them: statementsOf names it), noting which statement its reply must
// report failed; msg as it is otherwise.
func (p *TransientProxy) sacrifice(msg []byte) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.partial {
		return msg
	}
	field := statementsOf[commandName(msg)]
	if field == "" {
		return msg
	}
	secs, ok := sections(msg)
	if !ok {
		return msg
	}
	for i, sec := range secs {
		if sec.kind == 1 && sec.id == field && len(sec.docs) >= 2 {
			last := len(sec.docs) - 1
			secs[i].docs = sec.docs[:last]
			if p.victims == nil {
				p.victims = map[uint32]int{}
			}
			p.victims[binary.LittleEndian.Uint32(msg[4:])] = last
			p.partial = false
			return message(msg, secs)
		}
	}
	return msg
}

// victim returns the reply msg with a deadlock of the statement that
// sacrifice held back, when msg answers such a write and the server
// ran the rest (ok: 1); msg as it is otherwise.
func (p *TransientProxy) victim(msg []byte) []byte {
	if len(msg) < 16 {
		return msg
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	to := binary.LittleEndian.Uint32(msg[8:])
	last, ok := p.victims[to]
	if !ok {
		return msg
	}
	delete(p.victims, to)
	secs, ok := sections(msg)
	if !ok || len(secs) != 1 || secs[0].kind != 0 {
		return msg
	}
	var body bson.D
	if err := bson.Unmarshal(secs[0].docs[0], &body); err != nil {
		return msg
	}
	var errs bson.A
	at := -1
	for i, e := range body {
		switch e.Key {
		case "ok":
			if f, ok := e.Value.(float64); !ok || f != 1 {
				return msg
			}
		case "writeErrors":
			if a, ok := e.Value.(bson.A); ok {
				errs = a
			}
			at = i
		}
	}
	errs = append(errs, deadlockAt(last))
	if at < 0 {
		body = append(body, bson.E{Key: "writeErrors", Value: errs})
	} else {
		body[at].Value = errs
	}
	p.forged++
	raw, err := bson.Marshal(body)
	if err != nil {
		panic(err)
	}
	return message(msg, []section{{kind: 0, docs: []bson.Raw{raw}}})
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
