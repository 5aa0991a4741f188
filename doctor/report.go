package doctor

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/patterns"
)

// Report is what a check found. Findings and Skipped are sorted (see
// [Report.Sort]), so that two runs over the same data print the same
// report. Its JSON form has the keys findings, skipped, notes, database,
// server, collections and shardKeys; findings and skipped are arrays, empty
// rather than null.
type Report struct {
	Findings []Finding `json:"findings"`
	// Skipped lists the rules that could not be evaluated, and why: a
	// server that lacks $indexStats, an explain the server refuses. A
	// rule is never silently passed.
	Skipped []Skip `json:"skipped"`
	// Notes say how the evidence was gathered where that changes how to
	// read it (for example: samples are the first documents, not random).
	Notes []string `json:"notes,omitempty"`
	// Database is the database checked ("" for CheckIndexes, whose
	// indexes may span databases).
	Database string `json:"database,omitempty"`
	// Server describes the server, as [patterns.Server.String] does.
	Server string `json:"server,omitempty"`
	// Collections describes each collection checked: its size and the
	// distribution of its documents' sizes and array lengths.
	Collections []CollectionSummary `json:"collections,omitempty"`
	// ShardKeys holds the measurements of each proposed shard key.
	ShardKeys []ShardKeyAnalysis `json:"shardKeys,omitempty"`
	// Thresholds are the limits the rules used (defaults filled in);
	// WriteHTML marks them on its charts. Each finding's evidence holds
	// the threshold it crossed, so they are not repeated in JSON.
	Thresholds Thresholds `json:"-"`
}

// Finding is one anti-pattern found.
type Finding struct {
	Rule       string   `json:"rule"` // one of the Rule constants
	Severity   Severity `json:"severity"`
	Collection string   `json:"collection,omitempty"`
	Field      string   `json:"field,omitempty"` // a dotted path, or a key family such as "attr_*"
	Index      string   `json:"index,omitempty"` // an index name
	Query      string   `json:"query,omitempty"` // the query shape, pipeline or shard key the finding is about
	Message    string   `json:"message"`         // what was found, one line
	Evidence   Evidence `json:"evidence"`        // what was measured
	Remedy     string   `json:"remedy"`          // what to do, one line
}

// Skip records a rule that could not be evaluated and why.
type Skip struct {
	Rule       string `json:"rule"`
	Collection string `json:"collection,omitempty"` // empty: every collection
	Reason     string `json:"reason"`
}

// Measure is one measured value: an integer, a float, a string or a bool.
type Measure struct {
	Name  string
	Value any
}

// Evidence is the list of values a finding rests on, in a meaningful order
// (the measured value first, then the threshold it crossed). Its JSON form
// is an object with the measures as keys, in that order.
type Evidence []Measure

// Get returns the value of the named measure.
func (e Evidence) Get(name string) (any, bool) {
	for _, m := range e {
		if m.Name == name {
			return m.Value, true
		}
	}
	return nil, false
}

// String formats the evidence as "name=value, name=value".
func (e Evidence) String() string {
	parts := make([]string, len(e))
	for i, m := range e {
		parts[i] = m.Name + "=" + formatValue(m.Value)
	}
	return strings.Join(parts, ", ")
}

// formatValue prints a measure's value: floats in their shortest form
// (the rules round shares and means to three decimals), strings as they
// are.
func formatValue(v any) string {
	switch v := v.(type) {
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case string:
		return v
	default:
		return fmt.Sprint(v)
	}
}

// humanValue renders a BSON value for people, as the shell shows it:
// numbers as numbers (7, 1.5, not {"$numberInt": "7"}), dates in RFC 3339
// ("2026-03-01T00:00:00Z"), ObjectId("..."), strings quoted, null, true;
// documents in relaxed extended JSON; other types in canonical extended
// JSON.
func humanValue(v bson.RawValue) string {
	switch v.Type {
	case bson.TypeInt32, bson.TypeInt64:
		return strconv.FormatInt(v.AsInt64(), 10)
	case bson.TypeDouble:
		return strconv.FormatFloat(v.Double(), 'g', -1, 64)
	case bson.TypeDecimal128:
		return v.Decimal128().String()
	case bson.TypeDateTime:
		return time.UnixMilli(v.DateTime()).UTC().Format(time.RFC3339Nano)
	case bson.TypeObjectID:
		return `ObjectId("` + v.ObjectID().Hex() + `")`
	case bson.TypeEmbeddedDocument:
		if b, err := bson.MarshalExtJSON(v.Document(), false, false); err == nil {
			return string(b)
		}
	}
	return v.String()
}

// MarshalJSON writes the evidence as one JSON object, keys in order.
func (e Evidence) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range e {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(m.Name)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(m.Value)
		if err != nil {
			return nil, fmt.Errorf("doctor: Evidence.MarshalJSON: %s: %w", m.Name, err)
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads an object written by MarshalJSON, keeping the order
// of its keys. Integral numbers become int64, others float64.
func (e *Evidence) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	fail := func(err error) error {
		return fmt.Errorf("doctor: Evidence.UnmarshalJSON: %w: %w", err, patterns.ErrInvalid)
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return fail(fmt.Errorf("want an object, got %v (%v)", t, err))
	}
	out := Evidence{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return fail(err)
		}
		name, _ := t.(string)
		var raw any
		if err := dec.Decode(&raw); err != nil {
			return fail(err)
		}
		out = append(out, Measure{Name: name, Value: fromJSON(raw)})
	}
	*e = out
	return nil
}

// fromJSON turns the json.Number values of a decoded measure into int64
// or float64.
func fromJSON(v any) any {
	switch v := v.(type) {
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i
		}
		f, _ := v.Float64()
		return f
	case []any:
		for i := range v {
			v[i] = fromJSON(v[i])
		}
		return v
	default:
		return v
	}
}

// ratio rounds a share or a ratio to three decimals for the evidence.
func ratio(f float64) float64 { return math.Round(f*1000) / 1000 }

// Max returns the highest severity among the findings, or 0 when there
// are none.
func (r *Report) Max() Severity {
	var m Severity
	for _, f := range r.Findings {
		m = max(m, f.Severity)
	}
	return m
}

// AtLeast returns the findings of severity s or higher.
func (r *Report) AtLeast(s Severity) []Finding {
	var out []Finding
	for _, f := range r.Findings {
		if f.Severity >= s {
			out = append(out, f)
		}
	}
	return out
}

// Sort orders the findings by severity (critical first), then collection,
// rule, field, index, query and message; the skips by rule, then
// collection; the collections by name. Check and CheckIndexes return
// sorted reports; call Sort after editing one.
func (r *Report) Sort() {
	slices.SortStableFunc(r.Findings, func(a, b Finding) int {
		return cmp.Or(
			cmp.Compare(b.Severity, a.Severity),
			cmp.Compare(a.Collection, b.Collection),
			cmp.Compare(a.Rule, b.Rule),
			cmp.Compare(a.Field, b.Field),
			cmp.Compare(a.Index, b.Index),
			cmp.Compare(a.Query, b.Query),
			cmp.Compare(a.Message, b.Message),
		)
	})
	slices.SortStableFunc(r.Skipped, func(a, b Skip) int {
		return cmp.Or(cmp.Compare(a.Rule, b.Rule), cmp.Compare(a.Collection, b.Collection), cmp.Compare(a.Reason, b.Reason))
	})
	r.Skipped = slices.Compact(r.Skipped)
	slices.SortStableFunc(r.Collections, func(a, b CollectionSummary) int { return cmp.Compare(a.Name, b.Name) })
	if r.Findings == nil {
		r.Findings = []Finding{}
	}
	if r.Skipped == nil {
		r.Skipped = []Skip{}
	}
}

// CollectionSummary describes one collection as the check saw it.
type CollectionSummary struct {
	Name string `json:"name"`
	// Documents is the server's document count: from $collStats, or
	// estimatedDocumentCount where the server lacks it (CountSource says
	// which).
	Documents   int64  `json:"documents"`
	CountSource string `json:"countSource"`
	// DataBytes and IndexBytes are the server's figures (storageStats.size
	// and totalIndexSize); 0 when the server did not give them.
	DataBytes  int64  `json:"dataBytes,omitempty"`
	IndexBytes int64  `json:"indexBytes,omitempty"`
	Indexes    int    `json:"indexes"`
	Sample     Sample `json:"sample"`
	// Sizes is the distribution of the sampled documents' BSON sizes, in
	// bytes.
	Sizes Distribution `json:"sizes"`
	// Arrays holds the array fields with the longest arrays in the sample
	// (at most eight), longest first.
	Arrays []ArraySummary `json:"arrays,omitempty"`
}

// SampleMethod says how a collection's documents were read.
type SampleMethod string

// The sample methods.
const (
	// SampleAll: the collection held no more documents than the sample
	// size, so all were read (find without a filter).
	SampleAll SampleMethod = "all"
	// SampleRandom: $sample picked the documents at random.
	SampleRandom SampleMethod = "random"
	// SampleFirst: the server lacks $sample, so the sample is the first
	// documents in natural order, not a random one.
	SampleFirst SampleMethod = "first"
	// SampleFullScan: Options.FullScan read every document.
	SampleFullScan SampleMethod = "full scan"
)

// Sample says which documents of a collection the rules saw.
type Sample struct {
	Method    SampleMethod `json:"method"`
	Documents int          `json:"documents"` // distinct documents read
	Bytes     int64        `json:"bytes"`     // their total BSON size
	// Truncated: the read stopped at Options.SampleBytes before reaching
	// the sample size.
	Truncated bool `json:"truncated,omitempty"`
}

// Distribution summarises measured values: their count, mean and maximum,
// and a histogram with power-of-two bucket bounds.
type Distribution struct {
	Count   int      `json:"count"`
	Mean    float64  `json:"mean"`
	Max     int64    `json:"max"`
	Buckets []Bucket `json:"buckets,omitempty"`
}

// Bucket counts the values v with Lo <= v < Hi.
type Bucket struct {
	Lo    int64 `json:"lo"`
	Hi    int64 `json:"hi"`
	Count int   `json:"count"`
}

// ArraySummary describes the arrays found at one path in the sample.
type ArraySummary struct {
	Path    string       `json:"path"`
	Lengths Distribution `json:"lengths"`
}
