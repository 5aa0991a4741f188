package bucket

import (
	"context"
	"fmt"
	"iter"
	"strings"
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
	// bucket filled ([Buckets.AddMany], exact to retry after any error),
	// or one insert command ([TimeSeries.AddMany], not).
	AddMany(ctx context.Context, points []Point[M, V]) error
	// Range yields the measurements of the series with from <= time < to,
	// in time order.
	Range(ctx context.Context, meta M, from, to time.Time) iter.Seq2[V, error]
	// Summaries yields count, sum, min, max and mean of the series'
	// measurements in [from, to), per step, for the steps that have any.
	Summaries(ctx context.Context, meta M, from, to time.Time, step time.Duration) iter.Seq2[Summary, error]
	// SummariesBySeries yields, for each series with measurements in
	// [from, to), their count, sum, min, max and mean: one summary per
	// series, in the order of their metas.
	SummariesBySeries(ctx context.Context, from, to time.Time) iter.Seq2[SeriesSummary[M], error]
	// Latest returns the newest measurement of the series meta, or
	// [patterns.ErrNotFound].
	Latest(ctx context.Context, meta M) (V, error)
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
// not others, or may have: the ones in Failed were not stored (the server
// refused them, or the call ended before it sent them), those in Unknown
// may or may not have been (a command that wrote them failed without
// saying whether it applied: a network error, a timeout), and every other
// one was stored exactly once. Sending just the Failed ones again is
// safe; what else is, each backend's AddMany says ([Buckets.AddMany]
// retries exactly).
type PartialError struct {
	Failed  []int // indexes into the points given to AddMany, in increasing order
	Unknown []int // likewise; empty unless the call was cut short, or a statement a retry sent again was refused
	// Err is the error that cut the call short, if one did; else why the
	// first of Failed (the lowest index) was not stored.
	Err error
}

// Error says how many measurements were not stored, or may not have
// been, and why.
func (e *PartialError) Error() string {
	var parts []string
	if len(e.Failed) > 0 || len(e.Unknown) == 0 {
		parts = append(parts, fmt.Sprintf("%d measurement(s) not stored (indexes %v)", len(e.Failed), e.Failed))
	}
	if len(e.Unknown) > 0 {
		parts = append(parts, fmt.Sprintf("%d of unknown outcome (indexes %v)", len(e.Unknown), e.Unknown))
	}
	return strings.Join(parts, ", ") + ": " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *PartialError) Unwrap() error { return e.Err }
