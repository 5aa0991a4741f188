package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/mongopatterns/mongopatterns/examples/internal/demo"
)

// TestObserve runs the program and reads back the spans it printed: one
// per operation, named after it, children of the request's span, and the
// Get of a missing product with status Error.
func TestObserve(t *testing.T) {
	ctx := context.Background()
	env, err := demo.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	db, err := env.Database(ctx, "example_observe_test")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Drop(ctx)
	var out bytes.Buffer
	if err := observe(ctx, db, &out); err != nil {
		t.Fatal(err)
	}

	type spanContext struct{ SpanID string }
	type span struct {
		Name        string
		SpanContext spanContext
		Parent      spanContext
		Status      struct{ Code string }
	}
	var spans []span
	dec := json.NewDecoder(&out)
	for {
		var s span
		if err := dec.Decode(&s); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			break // the summary line after the spans
		}
		spans = append(spans, s)
	}
	var names, codes []string
	for _, s := range spans[:len(spans)-1] {
		names, codes = append(names, s.Name), append(codes, s.Status.Code)
		if s.Parent.SpanID != spans[len(spans)-1].SpanContext.SpanID {
			t.Errorf("span %s is not a child of the request's", s.Name)
		}
	}
	if got, want := names, []string{"subset.Add", "subset.Get", "subset.Get"}; !slices.Equal(got, want) {
		t.Errorf("spans %q, want %q", got, want)
	}
	if got, want := codes, []string{"Unset", "Unset", "Error"}; !slices.Equal(got, want) {
		t.Errorf("status codes %q, want %q", got, want)
	}
}
