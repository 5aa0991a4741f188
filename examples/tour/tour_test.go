package main

import (
	"context"
	"testing"
)

// TestTour runs the README's demo: every example program, against
// MONGODB_URI or the embedded dev server.
func TestTour(t *testing.T) {
	if err := run(context.Background()); err != nil {
		t.Fatal(err)
	}
}
