package faults

import "testing"

// Quiesce is Proxy.quiesce, for the tests of package faults_test.
func Quiesce(t testing.TB, p *Proxy) { p.quiesce(t) }
