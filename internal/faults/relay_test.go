package faults

import (
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestQuiesceWaitsForTheServer: a connection whose client has gone is
// cut, and quiesce returns only once the server behind the relay has
// finished what it received on it and closed it, however long that takes
// (here a server that takes 300 ms per request and closes at the end of
// its input, as a database server does).
func TestQuiesceWaitsForTheServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	var finished atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 1)
				for {
					if _, err := io.ReadFull(c, buf); err != nil {
						return // the end of its input: close
					}
					time.Sleep(300 * time.Millisecond)
					finished.Add(1)
				}
			}()
		}
	}()
	r := newRelay(t, ln.Addr().String())
	p := &Proxy{relay: r}
	idle, err := net.Dial("tcp", r.addr())
	require.NoError(t, err)
	defer idle.Close()
	busy, err := net.Dial("tcp", r.addr())
	require.NoError(t, err)
	_, err = busy.Write([]byte{1, 2})
	require.NoError(t, err)
	require.NoError(t, busy.Close()) // the client gives up at once
	require.Eventually(t, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.conns) == 2
	}, 5*time.Second, time.Millisecond, "both connections relayed")
	start := time.Now()
	p.quiesce(t)
	require.EqualValues(t, 2, finished.Load(), "quiesce returned after the server ran both requests")
	require.GreaterOrEqual(t, time.Since(start), 500*time.Millisecond)
	r.mu.Lock()
	require.Empty(t, r.conns, "the idle connection is cut too")
	r.mu.Unlock()
	_, err = idle.Read(make([]byte, 1))
	require.Error(t, err, "the client's side of a cut connection is closed")
}

// TestRelayStopsWithTheTest: once the test that started a relay has
// ended, none of the relay's goroutines runs, even for a connection that
// the server has not closed (here a server that keeps each connection
// open after the end of its input).
func TestRelayStopsWithTheTest(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	held := make(chan struct{})
	t.Cleanup(func() {
		close(held)
		_ = ln.Close()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(io.Discard, c)
				<-held
			}()
		}
	}()
	var r *relay
	t.Run("relay", func(t *testing.T) {
		r = newRelay(t, ln.Addr().String())
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
