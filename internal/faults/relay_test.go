package faults

import (
	"encoding/binary"
	"io"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// opMsgOf returns an OP_MSG of flags with a body of n bytes.
func opMsgOf(flags uint32, n int) []byte {
	msg := make([]byte, 20+n)
	binary.LittleEndian.PutUint32(msg[0:4], uint32(len(msg)))
	binary.LittleEndian.PutUint32(msg[12:16], opMsg)
	binary.LittleEndian.PutUint32(msg[16:20], flags)
	return msg
}

// slowServer serves wire messages as a database server does, each in
// turn on its connection: it takes 300 ms to run a request and answers
// it, runs a request with moreToCome at once without an answer, and
// closes a connection at the end of its input. It returns its address
// and the number of requests it has run.
func slowServer(t *testing.T) (string, *atomic.Int64) {
	var ran atomic.Int64
	addr := fakeServer(t, func(c net.Conn) {
		for {
			msg, err := readMessage(c)
			if err != nil {
				return // the end of its input: close
			}
			if moreToCome(msg) {
				ran.Add(1)
				continue
			}
			time.Sleep(300 * time.Millisecond)
			ran.Add(1)
			if _, err := c.Write(opMsgOf(0, 8)); err != nil {
				return
			}
		}
	})
	return addr, &ran
}

// fakeServer listens on a port of 127.0.0.1 until the test ends, serves
// each connection with serve, and closes it when serve returns; it
// returns its address.
func fakeServer(t *testing.T, serve func(net.Conn)) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c)
			}()
		}
	}()
	return ln.Addr().String()
}

// TestQuiesceWaitsForTheServer: quiesce returns once the server behind
// the relay has answered every request it received, however long that
// takes, on a connection whose client has gone as on one still open; a
// request that expects no answer (moreToCome) is not counted; and
// quiesce cuts nothing: an idle connection still carries requests after
// it.
func TestQuiesceWaitsForTheServer(t *testing.T) {
	addr, ran := slowServer(t)
	r := newRelay(t, addr)
	p := &Proxy{relay: r}
	idle, err := net.Dial("tcp", r.addr())
	require.NoError(t, err)
	defer idle.Close()
	gone, err := net.Dial("tcp", r.addr())
	require.NoError(t, err)
	_, err = gone.Write(append(opMsgOf(0, 4), opMsgOf(0, 4)...))
	require.NoError(t, err)
	require.NoError(t, gone.Close()) // the client gives up at once
	waiting, err := net.Dial("tcp", r.addr())
	require.NoError(t, err)
	defer waiting.Close()
	_, err = waiting.Write(append(opMsgOf(2, 4), opMsgOf(0, 4)...)) // the server runs them in order
	require.NoError(t, err)
	require.Eventually(t, func() bool { return !r.idle() && ran.Load() >= 1 }, 5*time.Second, time.Millisecond, "requests relayed")
	p.quiesce(t)
	require.EqualValues(t, 4, ran.Load(), "quiesce returned after the server ran the 3 requests it answers, and the one it does not")
	require.True(t, r.idle())

	reply, err := readMessage(waiting)
	require.NoError(t, err, "the reply reaches a client still reading")
	require.False(t, moreToCome(reply))
	_, err = idle.Write(opMsgOf(0, 4))
	require.NoError(t, err)
	_, err = readMessage(idle)
	require.NoError(t, err, "the idle connection was not cut")
	require.EqualValues(t, 5, ran.Load())
}

// TestQuiesceWaitsForAServerThatClosesEarly: a server that closes a
// connection as soon as its input ends, and finishes the request it runs
// behind it (as FerretDB 2 does), still has the request run when quiesce
// returns: the relay keeps the connection open until the answer.
func TestQuiesceWaitsForAServerThatClosesEarly(t *testing.T) {
	var ran atomic.Int64
	addr := fakeServer(t, func(c net.Conn) {
		requests := make(chan []byte, 8)
		go func() {
			defer close(requests)
			for {
				msg, err := readMessage(c)
				if err != nil {
					_ = c.Close() // at once, whatever still runs
					return
				}
				requests <- msg
			}
		}()
		for range requests {
			time.Sleep(300 * time.Millisecond)
			ran.Add(1)
			_, _ = c.Write(opMsgOf(0, 8))
		}
	})
	r := newRelay(t, addr)
	p := &Proxy{relay: r}
	c, err := net.Dial("tcp", r.addr())
	require.NoError(t, err)
	_, err = c.Write(opMsgOf(0, 4))
	require.NoError(t, err)
	require.NoError(t, c.Close()) // the client gives up at once
	require.Eventually(t, func() bool { return !r.idle() }, 5*time.Second, time.Millisecond,
		"the relay holds the request unanswered (it forgot it if the server closed the connection first)")
	p.quiesce(t)
	require.EqualValues(t, 1, ran.Load(), "the request ran before quiesce returned")
}

// TestRelayStopsWithTheTest: once the test that started a relay has
// ended, none of the relay's goroutines runs, even for a connection that
// the server has not closed (here a server that keeps each connection
// open after the end of its input).
func TestRelayStopsWithTheTest(t *testing.T) {
	held := make(chan struct{})
	t.Cleanup(func() { close(held) })
	addr := fakeServer(t, func(c net.Conn) {
		_, _ = io.Copy(io.Discard, c)
		<-held
	})
	var r *relay
	t.Run("relay", func(t *testing.T) {
		r = newRelay(t, addr)
		c, err := net.Dial("tcp", r.addr())
		require.NoError(t, err)
		require.NoError(t, c.Close())
		require.Eventually(t, func() bool {
			r.mu.Lock()
			defer r.mu.Unlock()
			return len(r.conns) == 1
		}, 5*time.Second, time.Millisecond, "the connection relayed")
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	require.Empty(t, r.conns, "a connection's goroutines ended with the test")
}

// TestWithoutMaxTime: the relay forwards a command without its maxTimeMS,
// the rest of the message as it was (its document sequence too); a
// message without one, or of another kind, goes as it is.
func TestWithoutMaxTime(t *testing.T) {
	marshal := func(d bson.D) []byte {
		raw, err := bson.Marshal(d)
		require.NoError(t, err)
		return raw
	}
	doc := marshal(bson.D{{Key: "_id", Value: 1}, {Key: "maxTimeMS", Value: "a field of a document, not of the command"}})
	msg := func(body bson.D) []byte {
		m := append(opMsgOf(0, 0), 0)
		m = append(m, marshal(body)...)
		m = append(m, 1)
		m = bsoncore.AppendInt32(m, int32(4+len("documents")+1+len(doc)))
		m = append(append(append(m, "documents"...), 0), doc...)
		binary.LittleEndian.PutUint32(m[0:4], uint32(len(m)))
		return m
	}
	with := msg(bson.D{{Key: "insert", Value: "c"}, {Key: "maxTimeMS", Value: int64(120)}, {Key: "$db", Value: "x"}})
	without := msg(bson.D{{Key: "insert", Value: "c"}, {Key: "$db", Value: "x"}})
	require.Equal(t, without, withoutMaxTime(with))
	require.Equal(t, without, withoutMaxTime(without), "no maxTimeMS: as it is")
	getMore := msg(bson.D{{Key: "getMore", Value: int64(7)}, {Key: "maxTimeMS", Value: int64(120)}, {Key: "$db", Value: "x"}})
	require.Equal(t, getMore, withoutMaxTime(getMore), "a getMore: as it is")
	other := slices.Clone(with)
	binary.LittleEndian.PutUint32(other[12:16], 2004)
	require.Equal(t, other, withoutMaxTime(other), "not an OP_MSG: as it is")
}
