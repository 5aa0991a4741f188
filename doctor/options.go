package doctor

import (
	"fmt"
	"time"

	"github.com/mongopatterns/mongopatterns/internal/check"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Defaults of [Options] and [Thresholds], and where each comes from.
const (
	// DefaultSampleSize is the number of documents sampled per collection.
	DefaultSampleSize = 1000
	// MaxSampleSize bounds Options.SampleSize; read everything with
	// Options.FullScan instead.
	MaxSampleSize = 1_000_000
	// DefaultSampleBytes bounds the bytes read per collection (128 MiB):
	// a sample of 1,000 documents of 16 MiB would otherwise be 16 GiB.
	DefaultSampleBytes = 128 << 20

	// DefaultArrayLength: MongoDB's schema design anti-pattern guide
	// ("Avoid Unbounded Arrays") warns about arrays of more than about
	// 1,000 elements.
	DefaultArrayLength = 1000
	// DefaultArrayLengthCritical: Atlas's schema advisor flags arrays of
	// more than 10,000 entries.
	DefaultArrayLengthCritical = 10_000
	// DefaultDocumentBytes: Atlas's schema advisor flags documents over
	// 2 MB (2,000,000 bytes).
	DefaultDocumentBytes = 2_000_000
	// DefaultDocumentBytesCritical: half of the 16 MiB document limit
	// ([patterns.MaxDocumentSize]); a document past it can double only
	// once more. This package's choice.
	DefaultDocumentBytesCritical = patterns.MaxDocumentSize / 2
	// DefaultIndexes: Atlas's schema advisor flags more than 30 indexes
	// on a collection.
	DefaultIndexes = 30
	// DefaultCollections: Atlas's schema advisor flags more than 100
	// collections in a database.
	DefaultCollections = 100
	// DefaultDynamicKeys and DefaultDynamicKeySpread parameterise the
	// dynamic-field-names rule (see [Thresholds]): a family of at least 20
	// distinct keys of which an object holds on average a quarter or
	// less. This package's choice.
	DefaultDynamicKeys      = 20
	DefaultDynamicKeySpread = 4.0
	// DefaultUnusedIndexAge: an index is reported unused only when its
	// $indexStats counters cover at least 7 days (they restart with the
	// server). This package's choice: a week covers weekly jobs.
	DefaultUnusedIndexAge = 7 * 24 * time.Hour
	// DefaultTimeSeriesDocuments and DefaultTimeSeriesBytes
	// parameterise the time-series-documents rule: at least 100,000
	// documents of at most 512 bytes on average. This package's choice.
	DefaultTimeSeriesDocuments = 100_000
	DefaultTimeSeriesBytes     = 512
	// DefaultShardKeyCardinality: a shard key with fewer distinct values
	// cannot be split into the 100 ranges that analyzeShardKey uses to
	// measure hot spots (its analyzeShardKeyNumRanges default).
	DefaultShardKeyCardinality = 100
	// DefaultShardKeyShare: a value that holds a tenth of the documents
	// makes a chunk that can never be split below a tenth of the
	// collection. (The value must also hold twice an even share, 2 /
	// distinct values: otherwise the key has few values, a matter of
	// cardinality, not skew.) This package's choice.
	DefaultShardKeyShare = 0.1
	// DefaultShardKeyCorrelation: analyzeShardKey calls a key monotonic
	// when the correlation between its order and the record ids is 0.7
	// or more (analyzeShardKeyMonotonicityCorrelationCoefficientThreshold).
	DefaultShardKeyCorrelation = 0.7
	// DefaultLookupFields: a $lookup of which the pipeline reads at most
	// 3 fields is a candidate for an extended reference. This package's
	// choice.
	DefaultLookupFields = 3
)

// Options configures [Check]. The zero value samples every collection of
// the database with the default sample size and thresholds, and checks no
// query shapes, pipelines, shard keys or repository indexes.
type Options struct {
	// SampleSize is the number of documents read per collection: 0 means
	// [DefaultSampleSize]; at most [MaxSampleSize]. A collection with no
	// more documents is read whole (find); a larger one through $sample,
	// which MongoDB serves with a random cursor when the size is under 5%
	// of the collection and otherwise by reading the collection into a
	// top-k random sort: at most 20 x SampleSize documents read by the
	// server. On a server without $sample the sample is the first
	// SampleSize documents in natural order, and the report says so.
	SampleSize int
	// SampleBytes stops reading a collection once the documents read add
	// up to this many bytes: 0 means [DefaultSampleBytes].
	SampleBytes int64
	// FullScan reads every document of every collection instead of a
	// sample (SampleSize is then ignored; SampleBytes is not).
	FullScan bool
	// Collections restricts the check to these collections; empty means
	// all (views and system collections are never sampled).
	Collections []string
	// Queries are query shapes to check against the indexes and, where
	// the server's explain can say, against its plan.
	Queries []Query
	// Pipelines are aggregation pipelines to lint.
	Pipelines []Pipeline
	// ShardKeys are proposed shard keys to measure.
	ShardKeys []ShardKey
	// Indexes are indexes that repositories need (their Indexes()
	// methods); each one absent is a missing-index finding, as
	// [CheckIndexes] reports.
	Indexes []patterns.Index
	// Validators, when set, runs the validator rules (see [ValidatorCheck]).
	Validators *ValidatorCheck
	// Disable lists rule ids not to evaluate.
	Disable []string
	// Thresholds: zero fields take their defaults.
	Thresholds Thresholds
	// Progress, if set, is called after each collection is checked, from
	// the goroutine that called Check.
	Progress func(Progress)
}

// Progress reports how far a [Check] has got.
type Progress struct {
	Collection string // the collection just checked
	Done       int    // collections checked so far
	Total      int    // collections to check
}

// Thresholds are the limits the rules compare measurements with. A zero
// field takes the default named beside it; negative values are invalid.
type Thresholds struct {
	ArrayLength             int           // warning above; DefaultArrayLength
	ArrayLengthCritical     int           // critical above; DefaultArrayLengthCritical
	DocumentBytes           int64         // warning above; DefaultDocumentBytes
	DocumentBytesCritical   int64         // critical above; DefaultDocumentBytesCritical
	Indexes                 int           // warning above; DefaultIndexes
	Collections             int           // warning above; DefaultCollections
	DynamicKeys             int           // distinct keys of a family; DefaultDynamicKeys
	DynamicKeySpread        float64       // distinct keys / keys per object; DefaultDynamicKeySpread (more than 1)
	UnusedIndexAge          time.Duration // statistics window; DefaultUnusedIndexAge
	TimeSeriesDocuments     int64         // DefaultTimeSeriesDocuments
	TimeSeriesDocumentBytes int64         // mean size at most; DefaultTimeSeriesBytes
	ShardKeyCardinality     int           // distinct values below; DefaultShardKeyCardinality
	ShardKeyShare           float64       // share of the most frequent value at or above, in (0, 1]; DefaultShardKeyShare
	ShardKeyCorrelation     float64       // |correlation| at or above, in (0, 1]; DefaultShardKeyCorrelation
	LookupFields            int           // fields read of a $lookup, at most; DefaultLookupFields
}

// withDefaults fills the zero fields of t and validates the result.
func (t Thresholds) withDefaults() (Thresholds, error) {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def64 := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	deff := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&t.ArrayLength, DefaultArrayLength)
	def(&t.ArrayLengthCritical, max(DefaultArrayLengthCritical, t.ArrayLength))
	def64(&t.DocumentBytes, DefaultDocumentBytes)
	def64(&t.DocumentBytesCritical, max(DefaultDocumentBytesCritical, t.DocumentBytes))
	def(&t.Indexes, DefaultIndexes)
	def(&t.Collections, DefaultCollections)
	def(&t.DynamicKeys, DefaultDynamicKeys)
	deff(&t.DynamicKeySpread, DefaultDynamicKeySpread)
	if t.UnusedIndexAge == 0 {
		t.UnusedIndexAge = DefaultUnusedIndexAge
	}
	def64(&t.TimeSeriesDocuments, DefaultTimeSeriesDocuments)
	def64(&t.TimeSeriesDocumentBytes, DefaultTimeSeriesBytes)
	def(&t.ShardKeyCardinality, DefaultShardKeyCardinality)
	deff(&t.ShardKeyShare, DefaultShardKeyShare)
	deff(&t.ShardKeyCorrelation, DefaultShardKeyCorrelation)
	def(&t.LookupFields, DefaultLookupFields)

	bad := func(what string, v any) (Thresholds, error) {
		return t, fmt.Errorf("doctor: Thresholds: %s %v: %w", what, v, patterns.ErrInvalid)
	}
	switch {
	case t.ArrayLength < 0 || t.ArrayLengthCritical < t.ArrayLength:
		return bad("ArrayLength/ArrayLengthCritical", fmt.Sprint(t.ArrayLength, "/", t.ArrayLengthCritical))
	case t.DocumentBytes < 0 || t.DocumentBytesCritical < t.DocumentBytes:
		return bad("DocumentBytes/DocumentBytesCritical", fmt.Sprint(t.DocumentBytes, "/", t.DocumentBytesCritical))
	case t.Indexes < 0:
		return bad("Indexes", t.Indexes)
	case t.Collections < 0:
		return bad("Collections", t.Collections)
	case t.DynamicKeys < 0:
		return bad("DynamicKeys", t.DynamicKeys)
	case t.DynamicKeySpread <= 1:
		return bad("DynamicKeySpread (must be more than 1)", t.DynamicKeySpread)
	case t.UnusedIndexAge < 0:
		return bad("UnusedIndexAge", t.UnusedIndexAge)
	case t.TimeSeriesDocuments < 0 || t.TimeSeriesDocumentBytes < 0:
		return bad("TimeSeriesDocuments/TimeSeriesDocumentBytes", fmt.Sprint(t.TimeSeriesDocuments, "/", t.TimeSeriesDocumentBytes))
	case t.ShardKeyCardinality < 0:
		return bad("ShardKeyCardinality", t.ShardKeyCardinality)
	case t.ShardKeyShare < 0 || t.ShardKeyShare > 1:
		return bad("ShardKeyShare", t.ShardKeyShare)
	case t.ShardKeyCorrelation < 0 || t.ShardKeyCorrelation > 1:
		return bad("ShardKeyCorrelation", t.ShardKeyCorrelation)
	case t.LookupFields < 0:
		return bad("LookupFields", t.LookupFields)
	}
	return t, nil
}

// settings are validated Options with defaults applied.
type settings struct {
	Options
	th       Thresholds
	disabled map[string]bool
}

func (o Options) validate(op string) (settings, error) {
	s := settings{Options: o, disabled: map[string]bool{}}
	switch {
	case o.SampleSize < 0 || o.SampleSize > MaxSampleSize:
		return s, fmt.Errorf("doctor: %s: sample size %d (want 0 to %d): %w", op, o.SampleSize, MaxSampleSize, patterns.ErrInvalid)
	case o.SampleSize == 0:
		s.SampleSize = DefaultSampleSize
	}
	switch {
	case o.SampleBytes < 0:
		return s, fmt.Errorf("doctor: %s: sample bytes %d: %w", op, o.SampleBytes, patterns.ErrInvalid)
	case o.SampleBytes == 0:
		s.SampleBytes = DefaultSampleBytes
	}
	for _, id := range o.Disable {
		if !knownRule(id) {
			return s, fmt.Errorf("doctor: %s: disable %q: no such rule: %w", op, id, patterns.ErrInvalid)
		}
		s.disabled[id] = true
	}
	for i, c := range o.Collections {
		if err := check.Collection(c); err != nil {
			return s, fmt.Errorf("doctor: %s: collection %d: %w", op, i, err)
		}
	}
	for i, q := range o.Queries {
		if err := q.validate(); err != nil {
			return s, fmt.Errorf("doctor: %s: query %d: %w", op, i, err)
		}
	}
	for i, p := range o.Pipelines {
		if err := p.validate(); err != nil {
			return s, fmt.Errorf("doctor: %s: pipeline %d: %w", op, i, err)
		}
	}
	for i, k := range o.ShardKeys {
		if err := k.validate(); err != nil {
			return s, fmt.Errorf("doctor: %s: shard key %d: %w", op, i, err)
		}
	}
	th, err := o.Thresholds.withDefaults()
	if err != nil {
		return s, fmt.Errorf("doctor: %s: %w", op, err)
	}
	s.th = th
	return s, nil
}

// on reports whether the rule is to be evaluated.
func (s settings) on(rule string) bool { return !s.disabled[rule] }
