package faults

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/mongo"
)

// Strike arms f, as [Proxy.Arm] does, unless a fault is already armed or
// a toxic of an earlier one is still in place (its command has not failed
// yet): a history's storm of faults ([Proxy.Fired] tells whether the last
// one struck) strikes one fault at a time on the client's connections,
// whatever the client's goroutines are doing, and never leaves a toxic
// behind that nothing would remove. It reports whether it armed f.
func (p *Proxy) Strike(f Fault) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.armed != nil || p.toxic != "" {
		return false
	}
	p.armed, p.seen, p.request = &f, 0, 0
	p.fired.Store(false)
	return true
}

// Settle ends a storm: it disarms a fault that has not struck, removes a
// toxic left in place, waits until the server has answered every request
// the client sent and runs no command on db (a command whose reply a
// fault dropped, or whose caller's deadline passed, may still run), and
// pings through the proxy until the client's pool is healthy again. What
// is read from db afterwards is the history's final state.
func (p *Proxy) Settle(t testing.TB, db *mongo.Database) {
	t.Helper()
	p.Disarm()
	p.quiesce(t)
	settle(t, db)
	p.ready(t)
}
