package bucket

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/check"
	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Config configures a [Store]: where the measurements go, how to read a
// measurement, and how they are grouped. One Config serves both backends
// ([New] and [NewTimeSeries]), so an application can switch or compare them
// by changing the constructor only.
//
// A measurement V is stored as the BSON document it marshals to; the store
// reads its time and values from that document by field name, so they are
// BSON names (the struct tags), not Go names.
type Config struct {
	// Collection is the name of the collection. Required.
	Collection string

	// TimeField is the BSON field of a measurement that holds its time, a
	// BSON date (a time.Time in Go). Required. Times are stored with
	// millisecond precision, as every BSON date is; a zero time.Time is
	// rejected.
	TimeField string

	// ValueFields are the BSON fields of a measurement that summaries
	// cover: each must hold a finite double, int32 or int64 in every
	// measurement. Summaries give count, sum, min, max and mean per field,
	// computed in float64 (an int64 beyond 2^53 loses precision there; the
	// stored measurement keeps its exact value). Empty: summaries count
	// measurements only.
	ValueFields []string

	// MetaField is the field that holds the series key (the meta, M) in
	// each bucket or time-series document. Empty means [DefaultMetaField].
	MetaField string

	// Window is the time span of one bucket: a bucket holds the
	// measurements of one series whose time falls in [start, start+Window),
	// windows being aligned on the Unix epoch (so an hour window starts on
	// the hour, UTC, and a day window at midnight UTC). A whole number of
	// milliseconds.
	//
	// Required by [New]. [NewTimeSeries] uses it, when Granularity is
	// empty, as the collection's bucketMaxSpanSeconds and
	// bucketRoundingSeconds (MongoDB 6.3+; a whole number of seconds).
	Window time.Duration

	// Cap is the most measurements one bucket holds. Required by [New],
	// which rejects a cap whose buckets could pass the 16 MiB document
	// limit, estimated from the size of a zero V. [NewTimeSeries] ignores
	// it: the server caps its own buckets (1,000 measurements by default).
	Cap int

	// Granularity is the granularity of a time-series collection, used by
	// [NewTimeSeries] only. Empty: Window decides the bucketing, or the
	// server's default when Window is zero too.
	Granularity Granularity

	// TTL, when positive, makes the server delete measurements older than
	// TTL (a whole number of seconds). [New] adds a TTL index on each
	// bucket's last time to [Buckets.Indexes], so a bucket goes when its
	// newest measurement is TTL old; [NewTimeSeries] creates the
	// collection with expireAfterSeconds, with the same rule for the
	// server's buckets. On a server without TTL indexes every method of
	// the store returns an [*patterns.UnsupportedError] naming
	// [patterns.FeatureTTLIndexes].
	TTL time.Duration

	// Hook, when set, observes every operation of the repository (see
	// [patterns.Hook]); nil reports nothing and costs nothing.
	Hook patterns.Hook
}

// DefaultMetaField is the field that holds the series key when
// Config.MetaField is empty.
const DefaultMetaField = "meta"

// Granularity is the granularity of a native time-series collection.
type Granularity string

// The granularities MongoDB accepts; each sets the span of the server's
// internal buckets (one hour, one day, thirty days).
const (
	Seconds Granularity = "seconds"
	Minutes Granularity = "minutes"
	Hours   Granularity = "hours"
)

// The fields of a bucket document, besides the meta field (Config.MetaField).
const (
	fieldStart   = "start"        // window start, a date
	fieldFirst   = "first"        // earliest measurement time, a date
	fieldLast    = "last"         // latest measurement time, a date
	fieldCount   = "count"        // number of measurements, an int32
	fieldPoints  = "measurements" // the measurements, an array of documents
	fieldSummary = "summary"      // {<value field>: {min, max, sum}}
	// fieldWrites holds the ids of the AddMany statements that wrote to
	// the bucket, an array of ObjectIDs (see [Buckets.AddMany]): at most
	// Cap of them, since each statement adds a measurement at least.
	fieldWrites = "writes"
)

// reservedFields are the bucket fields the meta field must not shadow.
var reservedFields = []string{"_id", fieldStart, fieldFirst, fieldLast, fieldCount, fieldPoints, fieldSummary, fieldWrites}

// maxBucketSpan is the largest bucketMaxSpanSeconds MongoDB accepts: one
// year.
const maxBucketSpan = 365 * 24 * time.Hour

// normalize fills in the defaults and checks what both backends need,
// wrapping [patterns.ErrInvalid]; the constructors add their own checks.
func (c Config) normalize() (Config, error) {
	c.ValueFields = slices.Clone(c.ValueFields)
	if c.MetaField == "" {
		c.MetaField = DefaultMetaField
	}
	if err := check.Collection(c.Collection); err != nil {
		return Config{}, fmt.Errorf("config.Collection: %w", err)
	}
	if err := check.Field(c.TimeField); err != nil {
		return Config{}, fmt.Errorf("config.TimeField: %w", err)
	}
	if err := check.Field(c.MetaField); err != nil {
		return Config{}, fmt.Errorf("config.MetaField: %w", err)
	}
	if c.MetaField == c.TimeField {
		return Config{}, errs.Invalid("MetaField and TimeField are both %q", c.MetaField)
	}
	for i, f := range c.ValueFields {
		if err := check.Field(f); err != nil {
			return Config{}, fmt.Errorf("config.ValueFields[%d]: %w", i, err)
		}
		switch {
		case f == c.TimeField:
			return Config{}, errs.Invalid("ValueFields[%d] %q is the time field", i, f)
		case f == c.MetaField:
			return Config{}, errs.Invalid("ValueFields[%d] %q is the meta field", i, f)
		case slices.Contains(c.ValueFields[:i], f):
			return Config{}, errs.Invalid("ValueFields[%d] %q appears twice", i, f)
		}
	}
	if c.Window < 0 || c.Window%time.Millisecond != 0 {
		return Config{}, errs.Invalid("Window %v is negative or not a whole number of milliseconds", c.Window)
	}
	if c.TTL < 0 || c.TTL%time.Second != 0 {
		return Config{}, errs.Invalid("TTL %v is negative or not a whole number of seconds", c.TTL)
	}
	if c.TTL/time.Second > math.MaxInt32 {
		return Config{}, errs.Invalid("TTL %v passes the server's limit of %d seconds", c.TTL, math.MaxInt32)
	}
	switch c.Granularity {
	case "", Seconds, Minutes, Hours:
	default:
		return Config{}, errs.Invalid("Granularity %q is none of %q, %q, %q", c.Granularity, Seconds, Minutes, Hours)
	}
	return c, nil
}

// settings is a normalized Config with the values both backends derive
// from it.
type settings struct {
	coll        *mongo.Collection
	timeField   string
	valueFields []string
	metaField   string
	window      int64 // milliseconds; 0 for a time-series store without one
	cap         int
	granularity Granularity
	ttl         int64 // seconds; 0: none
	// summaryPaths are the paths of each value field's summary in a
	// bucket: summary.<field>.sum, .min and .max.
	summaryPaths []summaryPath
	// hasRoom is the condition of a bucket with room for a measurement,
	// {$lt: Cap}, built once: Add sends it with every measurement.
	hasRoom bson.D
	// hook is Config.Hook; collections the one collection's name, as
	// the operations of the store report it.
	hook        patterns.Hook
	collections []string
}

type summaryPath struct{ sum, min, max string }

// newSettings normalizes cfg and derives the settings on db.
func newSettings(db *mongo.Database, cfg Config) (*settings, error) {
	if db == nil {
		return nil, errs.Invalid("nil database")
	}
	c, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	s := &settings{
		coll:        db.Collection(c.Collection),
		timeField:   c.TimeField,
		valueFields: c.ValueFields,
		metaField:   c.MetaField,
		window:      c.Window.Milliseconds(),
		cap:         c.Cap,
		granularity: c.Granularity,
		ttl:         int64(c.TTL / time.Second),
		hasRoom:     bson.D{{Key: "$lt", Value: int32(c.Cap)}},
		hook:        c.Hook,
		collections: []string{c.Collection},
	}
	for _, f := range s.valueFields {
		path := fieldSummary + "." + f + "."
		s.summaryPaths = append(s.summaryPaths, summaryPath{path + "sum", path + "min", path + "max"})
	}
	return s, nil
}

// bucketSize bounds the size of a full bucket: the fixed fields, the
// summary, the meta element, cap measurements of pointSize bytes each
// (an array element adds a type byte, its decimal index and a NUL), and
// the ids of up to cap AddMany statements that wrote them.
func (s *settings) bucketSize(metaSize, pointSize int) int {
	size := 4 + 1 + // document length and terminator
		elem("_id", 12) + elem(s.metaField, metaSize) +
		elem(fieldStart, 8) + elem(fieldFirst, 8) + elem(fieldLast, 8) + elem(fieldCount, 4) +
		elem(fieldPoints, 5) + elem(fieldWrites, 5)
	summary := 5
	for _, f := range s.valueFields {
		summary += elem(f, 5+elem("min", 8)+elem("max", 8)+elem("sum", 8))
	}
	size += elem(fieldSummary, summary)
	// An array element: type byte, decimal index, NUL. The digits are
	// counted on the stack: Add and AddMany check every measurement.
	var digits [20]byte
	element := 2 + len(strconv.AppendInt(digits[:0], int64(s.cap-1), 10))
	return size + s.cap*(element+pointSize) + s.cap*(element+12)
}

// elem is the size of a BSON element: type byte, key, NUL, value.
func elem(key string, value int) int { return 1 + len(key) + 1 + value }

// sizeOf is the encoded size of v as a BSON value, 0 when v cannot be
// encoded (the estimate then leaves it out; the value is rejected when
// used).
func sizeOf(v any) int {
	_, data, err := bson.MarshalValue(v)
	if err != nil {
		return 0
	}
	return len(data)
}
