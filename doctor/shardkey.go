package doctor

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/check"
	"github.com/mongopatterns/mongopatterns/internal/shard"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// ShardKey is a proposed shard key for a collection: {field: 1} fields
// (ranged) and at most one {field: "hashed"}.
type ShardKey struct {
	Collection string
	Key        bson.D
}

// String returns "orders {"customerId": "hashed"}".
func (k ShardKey) String() string { return k.Collection + " " + extJSON(k.Key) }

// fields parses the key; it is the validation of a ShardKey.
func (k ShardKey) fields() ([]keyField, error) {
	if err := check.Collection(k.Collection); err != nil {
		return nil, err
	}
	if len(k.Key) == 0 {
		return nil, fmt.Errorf("shard key on %s has no fields: %w", k.Collection, patterns.ErrInvalid)
	}
	var out []keyField
	hashed := 0
	for _, e := range k.Key {
		if err := check.Path(e.Key); err != nil {
			return nil, err
		}
		if slices.ContainsFunc(out, func(f keyField) bool { return f.Path == e.Key }) {
			return nil, fmt.Errorf("shard key field %q given twice: %w", e.Key, patterns.ErrInvalid)
		}
		f := keyField{Path: e.Key}
		if d, ok := direction(e.Value); ok && d == 1 {
			f.Dir = 1
		} else if s, ok := e.Value.(string); ok && s == "hashed" {
			f.Kind = "hashed"
			hashed++
		} else {
			return nil, fmt.Errorf("shard key field %q: %v is neither 1 nor \"hashed\": %w", e.Key, e.Value, patterns.ErrInvalid)
		}
		out = append(out, f)
	}
	if hashed > 1 {
		return nil, fmt.Errorf("shard key has %d hashed fields; at most one: %w", hashed, patterns.ErrInvalid)
	}
	return out, nil
}

func (k ShardKey) validate() error {
	_, err := k.fields()
	return err
}

// ParseShardKey reads a proposed shard key from MongoDB extended JSON:
//
//	{"collection": "orders", "key": {"customerId": 1, "createdAt": 1}}
//	{"collection": "events", "key": {"deviceId": "hashed"}}
//
// Both keys are required; any other key is an error. Errors wrap
// [patterns.ErrInvalid].
func ParseShardKey(data []byte) (ShardKey, error) {
	fields, err := parseSpec("ParseShardKey", data, "collection", "key")
	if err != nil {
		return ShardKey{}, err
	}
	var k ShardKey
	if k.Collection, err = specString("ParseShardKey", fields, "collection", true); err != nil {
		return ShardKey{}, err
	}
	if k.Key, err = specDoc("ParseShardKey", fields, "key", true); err != nil {
		return ShardKey{}, err
	}
	if err := k.validate(); err != nil {
		return ShardKey{}, fmt.Errorf("doctor: ParseShardKey: %w", err)
	}
	return k, nil
}

// ShardKeyAnalysis is what the sample says about a proposed shard key.
type ShardKeyAnalysis struct {
	Collection string       `json:"collection"`
	Key        string       `json:"key"`
	Sample     SampleMethod `json:"sample"`
	Documents  int          `json:"documents"` // documents read
	// Distinct is the number of distinct key values among them.
	Distinct int `json:"distinct"`
	// MostCommon holds the five most frequent values, most frequent first.
	MostCommon []ValueCount `json:"mostCommon"`
	// TopShare is the share of the documents read that hold the most
	// frequent value.
	TopShare float64 `json:"topShare"`
	// Missing counts documents without one of the key fields (MongoDB
	// shards them as null); Arrays those with an array in a key field
	// (MongoDB refuses them).
	Missing int `json:"missing"`
	Arrays  int `json:"arrays"`
	// Monotonicity is "monotonic", "not monotonic" or "unknown", from the
	// rank correlation between the first key field and natural (insertion)
	// order, as analyzeShardKey computes it against record ids.
	Monotonicity string  `json:"monotonicity"`
	Correlation  float64 `json:"correlation"`
	// Why says how monotonicity was decided; with no document read, why
	// nothing could be measured: "the collection is empty" or "the
	// collection does not exist".
	Why string `json:"why"`
	// Queries says where each query shape on the collection would be sent.
	Queries []QueryTargeting `json:"queries,omitempty"`
}

// ValueCount is a shard key value and the number of documents read that
// hold it.
type ValueCount struct {
	Value string `json:"value"`
	Count int    `json:"count"`
}

// QueryTargeting says where a query shape would be routed under a shard key.
type QueryTargeting struct {
	Query     string `json:"query"`
	Targeting string `json:"targeting"` // one of the Target constants
	Why       string `json:"why"`
}

// Where a query is sent under a shard key.
const (
	TargetOneShard      = "one shard"
	TargetSomeShards    = "some shards"
	TargetScatterGather = "all shards (scatter-gather)"
)

// AnalyzeShardKey measures a proposed shard key on its collection, on any
// server: it needs neither a sharded cluster nor analyzeShardKey (MongoDB
// 7.0+). It reads the key fields of the sample that [Options] describe
// (one $collStats or count, then one $sample or find with an inclusion
// projection of the key fields), and, when the sample is random, the key
// fields of the first SampleSize documents in natural order (one find) to
// measure monotonicity; one listIndexes (unless Check listed them
// already), to find an index that supports the key (shardCollection
// needs one on a collection that holds documents) and to tell a
// collection that does not exist from an empty one; and one
// listCollections of the collection, to read its time-series fields (a
// time-series collection is sharded on its metaField, fields inside it,
// and its timeField, last). The query shapes of Options.Queries on the
// same collection are classified as one-shard, some-shard or
// scatter-gather. The report holds the measurements (Report.ShardKeys)
// and the shard-key findings.
func AnalyzeShardKey(ctx context.Context, db *mongo.Database, key ShardKey, opts Options) (Report, error) {
	s, err := opts.validate("AnalyzeShardKey")
	if err != nil {
		return Report{}, err
	}
	if db == nil {
		return Report{}, fmt.Errorf("doctor: AnalyzeShardKey: nil database: %w", patterns.ErrInvalid)
	}
	if err := key.validate(); err != nil {
		return Report{}, fmt.Errorf("doctor: AnalyzeShardKey: %w", err)
	}
	c := newChecker(db, s)
	if err := c.shardKey(ctx, key); err != nil {
		return Report{}, fmt.Errorf("doctor: AnalyzeShardKey: %w", err)
	}
	return c.report(), nil
}

// keyValues is the part of the analysis built from the sampled documents.
type keyValues struct {
	docs    int
	counts  map[string]*ValueCount // canonical bytes of the value -> count
	missing int
	arrays  int
	first   []bson.RawValue // the first key field of each document, in read order
}

// addDoc extracts the key's value from a (projected) document.
func (kv *keyValues) addDoc(doc bson.Raw, key []keyField) {
	kv.docs++
	var canon bytes.Buffer
	var shown []string
	var first bson.RawValue
	anyMissing := false
	for i, f := range key {
		v, missing, array := lookupPath(doc, f.Path)
		if array {
			kv.arrays++
			return
		}
		if missing {
			v, anyMissing = bson.RawValue{Type: bson.TypeNull}, true
		}
		if i == 0 {
			first = v
		}
		canon.WriteByte(byte(v.Type))
		canon.Write(v.Value)
		shown = append(shown, humanValue(v))
	}
	if anyMissing {
		kv.missing++
	}
	kv.first = append(kv.first, first)
	k := canon.String()
	vc := kv.counts[k]
	if vc == nil {
		vc = &ValueCount{Value: strings.Join(shown, ", ")}
		kv.counts[k] = vc
	}
	vc.Count++
}

// lookupPath follows a dotted path through embedded documents. It reports
// a missing field, and an array met on the way (shard keys cannot hold
// arrays).
func lookupPath(doc bson.Raw, path string) (v bson.RawValue, missing, array bool) {
	cur := doc
	parts := strings.Split(path, ".")
	for i, p := range parts {
		val, err := cur.LookupErr(p)
		if err != nil {
			return v, true, false
		}
		if val.Type == bson.TypeArray {
			return v, false, true
		}
		if i == len(parts)-1 {
			return val, false, false
		}
		d, ok := val.DocumentOK()
		if !ok {
			return v, true, false
		}
		cur = d
	}
	return v, true, false
}

// shardKey analyses one proposed key and adds its findings.
func (c *checker) shardKey(ctx context.Context, key ShardKey) error {
	fields, _ := key.fields()
	coll := c.db.Collection(key.Collection)
	st, err := readCollStats(ctx, coll)
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	proj := bson.D{{Key: "_id", Value: 1}}
	for _, f := range fields {
		if f.Path != "_id" {
			proj = append(proj, bson.E{Key: f.Path, Value: 1})
		}
	}
	kv := &keyValues{counts: map[string]*ValueCount{}}
	sm, err := c.rd.read(ctx, coll, st.count, proj, func(d bson.Raw) error { kv.addDoc(d, fields); return nil })
	if err != nil {
		return fmt.Errorf("%s: sample: %w", key, err)
	}
	a := ShardKeyAnalysis{Collection: key.Collection, Key: extJSON(key.Key), Sample: sm.Method,
		Documents: kv.docs, Distinct: len(kv.counts), Missing: kv.missing, Arrays: kv.arrays}
	specs, exists, err := c.indexes(ctx, coll)
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	ts, err := timeSeriesOf(ctx, c.db, key.Collection)
	if err != nil {
		return fmt.Errorf("%s: listCollections: %w", key, err)
	}
	if exists {
		c.addAll(keyIndexFindings(key, fields, specs, kv.docs))
		c.addAll(timeSeriesKeyFindings(key, fields, ts))
	}
	if kv.docs == 0 {
		a.Monotonicity, a.Why = "unknown", "the collection is empty"
		if !exists {
			a.Why = "the collection does not exist"
		}
		for _, rule := range []string{RuleShardKeyCardinality, RuleShardKeyFrequency, RuleShardKeyMonotonic} {
			c.skip(rule, key.Collection, fmt.Sprintf("%s: %s", key, a.Why))
		}
		c.rep.ShardKeys = append(c.rep.ShardKeys, a)
		return nil
	}
	counts := slices.Collect(maps.Values(kv.counts))
	slices.SortFunc(counts, func(x, y *ValueCount) int {
		return cmp.Or(cmp.Compare(y.Count, x.Count), cmp.Compare(x.Value, y.Value))
	})
	for _, vc := range counts[:min(5, len(counts))] {
		a.MostCommon = append(a.MostCommon, *vc)
	}
	if len(counts) > 0 {
		a.TopShare = ratio(float64(counts[0].Count) / float64(kv.docs))
	}

	first := kv.first
	if sm.Method == SampleRandom {
		// The random sample has no order; read the first documents in
		// natural order for monotonicity.
		nat := &keyValues{counts: map[string]*ValueCount{}}
		cur, err := coll.Find(ctx, bson.D{}, findOpts(proj, int64(c.s.SampleSize)))
		if err != nil {
			return fmt.Errorf("%s: natural order: %w", key, err)
		}
		defer cur.Close(context.WithoutCancel(ctx))
		for cur.Next(ctx) {
			nat.addDoc(cur.Current, fields)
		}
		if err := cur.Err(); err != nil {
			return fmt.Errorf("%s: natural order: %w", key, err)
		}
		first = nat.first
	}
	a.Monotonicity, a.Correlation, a.Why = monotonicity(fields[0], first, c.s.th.ShardKeyCorrelation)

	for _, q := range c.s.Queries {
		if q.Collection != key.Collection {
			continue
		}
		sh, _ := shapeOf(q.Filter, q.Sort)
		t, why := targeting(sh, fields)
		a.Queries = append(a.Queries, QueryTargeting{Query: q.String(), Targeting: t, Why: why})
		if t == TargetScatterGather {
			c.add(Finding{Rule: RuleShardKeyScatterGather, Severity: Warning, Collection: key.Collection, Query: q.String(),
				Message:  fmt.Sprintf("under shard key %s this query goes to every shard: %s", a.Key, why),
				Evidence: Evidence{{"shardKey", a.Key}, {"targeting", t}},
				Remedy:   "choose a shard key whose first field the frequent queries match by equality, or add that field to the query"})
		}
	}
	c.rep.ShardKeys = append(c.rep.ShardKeys, a)
	c.shardKeyFindings(key, a)
	return nil
}

// supports reports whether an index supports a shard key, as
// shardCollection requires (the manual's "Shard Key Indexes"; mongodb/mongo
// src/mongo/db/s/shard_key_index_util.cpp isCompatibleWithShardKey and
// findShardKeyPrefixedIndex): its key starts with the shard key's fields
// in order, each with the same value (1, or "hashed"), compared by value
// as BSONObj::isPrefixOf does (1, 1.0 and int64(1) are one value; 2 is
// another, though ascending), and it is neither sparse, partial nor
// hidden, with the simple collation.
func supports(ix indexSpec, key []keyField) bool {
	locale, _ := ix.Collation.Lookup("locale").StringValueOK()
	if ix.Sparse || ix.Hidden || len(ix.Partial) > 0 || (len(ix.Collation) > 0 && locale != "simple") || len(ix.Key) < len(key) {
		return false
	}
	for i, f := range key {
		if k := ix.Key[i]; k.Path != f.Path || k.Kind != f.Kind || k.Dir != f.Dir || k.Scaled {
			return false
		}
	}
	return true
}

// keyIndexFindings applies the shard-key-index rule: no index of the
// collection supports the key. shardCollection refuses a collection that
// holds documents without one (a warning); it creates the index on an
// empty one (info).
func keyIndexFindings(key ShardKey, fields []keyField, specs []indexSpec, docs int) []Finding {
	if slices.ContainsFunc(specs, func(ix indexSpec) bool { return supports(ix, fields) }) {
		return nil
	}
	f := Finding{Rule: RuleShardKeyIndex, Severity: Warning, Collection: key.Collection, Query: key.String(), Field: strings.Join(keyPaths(key), ", "),
		Message:  fmt.Sprintf("no index supports the shard key %s: shardCollection refuses a collection that holds documents without one", extJSON(key.Key)),
		Evidence: Evidence{{"indexes", len(specs)}, {"documents", docs}},
		Remedy:   fmt.Sprintf("create the index %s on %s (a compound index that starts with these fields supports it too; not sparse, partial or hidden, with the simple collation) before shardCollection", extJSON(key.Key), key.Collection)}
	if docs == 0 {
		f.Severity = Info
		f.Message = fmt.Sprintf("no index supports the shard key %s: shardCollection creates it while the collection is empty", extJSON(key.Key))
	}
	return []Finding{f}
}

// timeSeries holds the fields of a time-series collection.
type timeSeries struct {
	TimeField string `bson:"timeField"`
	MetaField string `bson:"metaField"`
}

// timeSeriesOf returns the time-series fields of collection name (nil
// for another collection, or none): one listCollections.
func timeSeriesOf(ctx context.Context, db *mongo.Database, name string) (*timeSeries, error) {
	specs, err := db.ListCollectionSpecifications(ctx, bson.D{{Key: "name", Value: name}})
	if err != nil || len(specs) == 0 || specs[0].Type != "timeseries" {
		return nil, err
	}
	var o struct {
		TimeSeries *timeSeries `bson:"timeseries"`
	}
	if err := bson.Unmarshal(specs[0].Options, &o); err != nil {
		return nil, err
	}
	return o.TimeSeries, nil
}

// timeSeriesKeyFindings applies the shard-key-time-series rule, as the
// manual's time-series limitations (Sharding, Shard Key Fields) say a
// time-series collection is sharded: its key names only the metaField,
// fields inside it, and the timeField, which must be ranged and last
// (critical otherwise: shardCollection refuses it); a key that names the
// timeField is a warning (deprecated from 8.0; its values grow with time).
func timeSeriesKeyFindings(key ShardKey, fields []keyField, ts *timeSeries) []Finding {
	if ts == nil {
		return nil
	}
	base := Finding{Rule: RuleShardKeyTimeSeries, Collection: key.Collection, Query: key.String(),
		Evidence: Evidence{{"timeField", ts.TimeField}, {"metaField", ts.MetaField}}}
	refuse := func(field, why string) []Finding {
		f := base
		f.Severity, f.Field = Critical, field
		f.Message = fmt.Sprintf("%s: shardCollection refuses this key on a time-series collection: %s", extJSON(key.Key), why)
		f.Remedy = "shard a time-series collection on its metaField, or on fields inside it"
		if ts.MetaField != "" {
			f.Remedy = fmt.Sprintf("shard on the metaField: {%q: 1}, {%q: \"hashed\"}, or fields inside it", ts.MetaField, ts.MetaField)
		}
		return []Finding{f}
	}
	for i, f := range fields {
		switch {
		case f.Path == ts.TimeField && f.Kind != "":
			return refuse(f.Path, fmt.Sprintf("the timeField %s can only be ranged (1)", f.Path))
		case f.Path == ts.TimeField && i != len(fields)-1:
			return refuse(f.Path, fmt.Sprintf("the timeField %s must be the key's last field", f.Path))
		case f.Path == ts.TimeField:
		case ts.MetaField != "" && (f.Path == ts.MetaField || strings.HasPrefix(f.Path, ts.MetaField+".")):
		default:
			return refuse(f.Path, fmt.Sprintf("%s is neither the metaField%s nor the timeField %s", f.Path, metaName(ts.MetaField), ts.TimeField))
		}
	}
	if fields[len(fields)-1].Path == ts.TimeField {
		f := base
		f.Severity, f.Field = Warning, ts.TimeField
		f.Message = fmt.Sprintf("%s names the timeField %s: deprecated from MongoDB 8.0, and alone its values grow with time, so every insert goes to the last chunk", extJSON(key.Key), ts.TimeField)
		f.Remedy = "shard on the metaField, or on fields inside it, alone"
		return []Finding{f}
	}
	return nil
}

// metaName returns " <name>" for a metaField, " (the collection has
// none)" without one.
func metaName(meta string) string {
	if meta == "" {
		return " (the collection has none)"
	}
	return " " + meta + " (or a field inside it)"
}

// shardKeyFindings turns the measurements into findings.
func (c *checker) shardKeyFindings(key ShardKey, a ShardKeyAnalysis) {
	th := c.s.th
	base := Finding{Collection: key.Collection, Query: key.String(), Field: strings.Join(keyPaths(key), ", ")}
	if a.Arrays > 0 {
		f := base
		f.Rule, f.Severity = RuleShardKeyArray, Critical
		f.Message = fmt.Sprintf("%d of %d documents read hold an array in a field of %s: MongoDB cannot shard on array fields", a.Arrays, a.Documents, a.Key)
		f.Evidence = Evidence{{"arrays", a.Arrays}, {"documents", a.Documents}}
		f.Remedy = "shard on a field that holds a single value in every document"
		c.add(f)
	}
	// The sample is saturated (every value seen at least twice on average)
	// when the distinct count is at most half the documents read: more
	// documents would show few new values.
	if a.Distinct < th.ShardKeyCardinality && 2*a.Distinct <= a.Documents {
		f := base
		f.Rule, f.Severity = RuleShardKeyCardinality, Warning
		f.Message = fmt.Sprintf("%s takes only %d distinct values in %d documents: at most %d chunks, which cannot be split further", a.Key, a.Distinct, a.Documents, a.Distinct)
		f.Evidence = Evidence{{"distinct", a.Distinct}, {"documents", a.Documents}, {"threshold", th.ShardKeyCardinality}}
		f.Remedy = "add a field of high cardinality after it (a compound shard key), or shard on a field with many distinct values"
		c.add(f)
	}
	// A frequent value is one that holds at least ShardKeyShare of the
	// documents and twice an even share: ten values of 10% each are a
	// matter of cardinality, not of skew.
	if a.TopShare >= th.ShardKeyShare && a.TopShare >= 2/float64(a.Distinct) &&
		float64(a.Documents) >= 2/th.ShardKeyShare && len(a.MostCommon) > 0 {
		f := base
		f.Rule, f.Severity = RuleShardKeyFrequency, Warning
		f.Message = fmt.Sprintf("value %s holds %.0f%% of the documents read: its chunk can never be split below that", a.MostCommon[0].Value, 100*a.TopShare)
		f.Evidence = Evidence{{"topShare", a.TopShare}, {"value", a.MostCommon[0].Value}, {"documents", a.Documents}, {"threshold", th.ShardKeyShare}}
		f.Remedy = "add a field that splits the frequent value (a compound shard key), or choose a key whose values are evenly spread"
		c.add(f)
	}
	switch a.Monotonicity {
	case "monotonic":
		f := base
		f.Rule, f.Severity = RuleShardKeyMonotonic, Warning
		f.Message = fmt.Sprintf("%s grows with insertion order (%s): every insert goes to the chunk holding the largest values", a.Key, a.Why)
		f.Evidence = Evidence{{"correlation", a.Correlation}, {"threshold", th.ShardKeyCorrelation}}
		f.Remedy = fmt.Sprintf("use a hashed shard key ({%q: \"hashed\"}), or a compound key that starts with a field that does not grow", keyPaths(key)[0])
		c.add(f)
	case "unknown":
		c.skip(RuleShardKeyMonotonic, key.Collection, fmt.Sprintf("%s: %s", key, a.Why))
	}
}

func keyPaths(k ShardKey) []string {
	out := make([]string, len(k.Key))
	for i, e := range k.Key {
		out[i] = e.Key
	}
	return out
}

// monotonicity decides whether the first key field grows with insertion
// order: the Spearman rank correlation between its values (in natural
// order) and their positions, compared with threshold. A hashed field is
// not monotonic by construction; fewer than three values, or a single
// distinct one, cannot say.
func monotonicity(f keyField, values []bson.RawValue, threshold float64) (kind string, corr float64, why string) {
	if f.Kind == "hashed" {
		return "not monotonic", 0, "the first field is hashed"
	}
	if len(values) < 3 {
		return "unknown", 0, fmt.Sprintf("only %d documents in natural order", len(values))
	}
	ranks := rankOf(values)
	pos := make([]float64, len(values))
	for i := range pos {
		pos[i] = float64(i)
	}
	r, ok := pearson(pos, ranks)
	if !ok {
		return "unknown", 0, "the first field has a single value in the documents read"
	}
	corr = ratio(r)
	types := map[bson.Type]int{}
	for _, v := range values {
		types[v.Type]++
	}
	what := fmt.Sprintf("rank correlation %.3f with natural order over %d documents", corr, len(values))
	switch {
	case types[bson.TypeObjectID] == len(values):
		what += "; ObjectIds start with their creation time"
	case types[bson.TypeDateTime] == len(values) || types[bson.TypeTimestamp] == len(values):
		what += "; the values are timestamps"
	}
	if math.Abs(corr) >= threshold {
		return "monotonic", corr, what
	}
	return "not monotonic", corr, what
}

// rankOf returns the rank of each value (ties get their mean rank).
func rankOf(values []bson.RawValue) []float64 {
	idx := make([]int, len(values))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return compareValues(values[a], values[b]) })
	ranks := make([]float64, len(values))
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && compareValues(values[idx[j+1]], values[idx[i]]) == 0 {
			j++
		}
		mean := float64(i+j) / 2
		for k := i; k <= j; k++ {
			ranks[idx[k]] = mean
		}
		i = j + 1
	}
	return ranks
}

// pearson is the correlation coefficient of x and y; false when either is
// constant.
func pearson(x, y []float64) (float64, bool) {
	n := float64(len(x))
	var mx, my float64
	for i := range x {
		mx += x[i]
		my += y[i]
	}
	mx, my = mx/n, my/n
	var sxy, sxx, syy float64
	for i := range x {
		dx, dy := x[i]-mx, y[i]-my
		sxy += dx * dy
		sxx += dx * dx
		syy += dy * dy
	}
	if sxx == 0 || syy == 0 {
		return 0, false
	}
	return sxy / math.Sqrt(sxx*syy), true
}

// typeOrder is MongoDB's comparison order of BSON types.
func typeOrder(t bson.Type) int {
	switch t {
	case bson.TypeMinKey:
		return 0
	case bson.TypeNull, bson.TypeUndefined:
		return 1
	case bson.TypeInt32, bson.TypeInt64, bson.TypeDouble, bson.TypeDecimal128:
		return 2
	case bson.TypeString, bson.TypeSymbol:
		return 3
	case bson.TypeEmbeddedDocument:
		return 4
	case bson.TypeArray:
		return 5
	case bson.TypeBinary:
		return 6
	case bson.TypeObjectID:
		return 7
	case bson.TypeBoolean:
		return 8
	case bson.TypeDateTime:
		return 9
	case bson.TypeTimestamp:
		return 10
	case bson.TypeRegex:
		return 11
	case bson.TypeMaxKey:
		return 13
	default:
		return 12
	}
}

// compareValues orders two values as MongoDB does for the types a shard
// key holds: by type order, then numbers by value, strings by bytes
// (simple collation), ObjectIds by bytes, dates and timestamps by time;
// other types by their bytes.
func compareValues(a, b bson.RawValue) int {
	if c := cmp.Compare(typeOrder(a.Type), typeOrder(b.Type)); c != 0 {
		return c
	}
	switch {
	case a.IsNumber() && b.IsNumber():
		return cmp.Compare(numberOf(a), numberOf(b))
	case a.Type == bson.TypeDateTime && b.Type == bson.TypeDateTime:
		return cmp.Compare(a.DateTime(), b.DateTime())
	case a.Type == bson.TypeTimestamp && b.Type == bson.TypeTimestamp:
		at, ai := a.Timestamp()
		bt, bi := b.Timestamp()
		return cmp.Or(cmp.Compare(at, bt), cmp.Compare(ai, bi))
	case a.Type == bson.TypeBoolean && b.Type == bson.TypeBoolean:
		return cmp.Compare(boolInt(a.Boolean()), boolInt(b.Boolean()))
	case (a.Type == bson.TypeString || a.Type == bson.TypeSymbol) && (b.Type == bson.TypeString || b.Type == bson.TypeSymbol):
		return strings.Compare(a.StringValue(), b.StringValue())
	}
	return bytes.Compare(a.Value, b.Value)
}

func numberOf(v bson.RawValue) float64 {
	if v.Type == bson.TypeDecimal128 {
		f, err := strconv.ParseFloat(v.Decimal128().String(), 64)
		if err == nil {
			return f
		}
	}
	return v.AsFloat64()
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// targeting says where a query shape would be sent under a shard key, as
// internal/shard's Key.Filter decides for a filter of the shape's
// conditions: one shard when it matches every key field by a single
// equality; some shards when it matches the first field by equality (an
// $in of several values, or a prefix of the key) or, for a ranged first
// field, by a range; every shard when it does not match the first field,
// or matches a hashed first field only by a range.
func targeting(sh shape, key []keyField) (string, string) {
	k := make(shard.Key, len(key))
	for i, f := range key {
		k[i] = shard.Field{Path: f.Path, Hashed: f.Kind == "hashed"}
	}
	var filter bson.D // the shape's conditions, with stand-in values
	for _, p := range sh.eq {
		var v any = 0
		if slices.Contains(sh.multi, p) {
			v = bson.D{{Key: "$in", Value: bson.A{0, 1}}}
		}
		filter = append(filter, bson.E{Key: p, Value: v})
	}
	for _, p := range sh.ranges {
		filter = append(filter, bson.E{Key: p, Value: bson.D{{Key: "$gt", Value: 0}}})
	}
	r := k.Filter(filter)
	switch r.Target {
	case shard.OneShard:
		return TargetOneShard, r.Why
	case shard.SomeShards:
		return TargetSomeShards, r.Why
	}
	return TargetScatterGather, r.Why
}
