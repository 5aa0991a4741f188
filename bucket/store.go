package bucket

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/mongopatterns/mongopatterns/patterns"
)

// Store is what an application does with time series: write measurements,
// read them back by interval, summarise them by step, and expire old
// ones. M is the series key (the meta: a sensor id, or a struct such as
// {site, sensor}); V is the measurement type.
//
// Two backends implement it: [Buckets] (bucket documents, every server)
// and [TimeSeries] (a native time-series collection, MongoDB 5.0+); their
// methods say what each call costs in round trips, what concurrent
// readers and writers see, and what happens on a server that lacks a
// feature. A service depends on Store and substitutes it in its own unit
// tests.
type Store[M, V any] interface {
	// Add stores one measurement of the series meta.
	Add(ctx context.Context, meta M, v V) error
	// AddMany stores many measurements, of any series: one write per
	// bucket filled ([Buckets.AddMany]), or one insert command
	// ([TimeSeries.AddMany]).
	AddMany(ctx context.Context, points []Point[M, V]) error
	// Range yields the measurements of the series with from <= time < to,
	// in time order.
	Range(ctx context.Context, meta M, from, to time.Time) iter.Seq2[V, error]
	// Summaries yields count, sum, min, max and mean of the series'
	// measurements in [from, to), per step, for the steps that have any.
	Summaries(ctx context.Context, meta M, from, to time.Time, step time.Duration) iter.Seq2[Summary, error]
	// DeleteBefore deletes the measurements, of every series, before t.
	DeleteBefore(ctx context.Context, t time.Time) error
	// DeleteSeriesBefore deletes the measurements of one series before t.
	DeleteSeriesBefore(ctx context.Context, meta M, t time.Time) error
	// Indexes returns the indexes the store's queries need.
	Indexes() []patterns.Index
}

// Point is one measurement of one series, for [Store.AddMany].
type Point[M, V any] struct {
	Meta  M
	Value V
}

// Summary describes the measurements of one step: [Start, End).
type Summary struct {
	Start time.Time // from + k*step
	End   time.Time // Start + step, or the end of the interval asked for
	Count int64     // measurements in the step (at least one)
	// Values has one entry per Config.ValueFields.
	Values map[string]Stats
}

// Stats summarises one value field over a step.
type Stats struct {
	Min, Max, Sum float64
	Mean          float64 // Sum / Count
}

// PartialError reports that [Store.AddMany] stored some measurements and
// not others: the ones listed were not stored (the server refused them,
// or a read [Buckets.AddMany] needed failed before they were sent), and
// every other one was stored exactly once. Retrying just the failed ones
// is safe; retrying the whole batch would store the others twice.
type PartialError struct {
	Failed []int // indexes into the points given to AddMany, in increasing order
	Err    error // why the first of them (the lowest index) was not stored
}

// Error says how many measurements were not stored and why.
func (e *PartialError) Error() string {
	return fmt.Sprintf("%d measurement(s) not stored (indexes %v): %v", len(e.Failed), e.Failed, e.Err)
}

// Unwrap returns the cause.
func (e *PartialError) Unwrap() error { return e.Err }
