package doctor

import (
	"fmt"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/check"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Query is a query shape: the filter and sort of a find that an
// application sends. Values in the filter matter only for their kind
// (equality, range, regex); give realistic ones, since the server's
// explain plans the query as given.
type Query struct {
	Collection string
	Filter     bson.D
	Sort       bson.D
	// Name labels the shape in the report; empty means the shape itself
	// (see [Query.String]).
	Name string
}

// String returns the Name, or the shape in relaxed extended JSON:
// orders {"status": "paid"} sort {"createdAt": -1}.
func (q Query) String() string {
	if q.Name != "" {
		return q.Name
	}
	s := q.Collection + " " + extJSON(q.Filter)
	if len(q.Sort) > 0 {
		s += " sort " + extJSON(q.Sort)
	}
	return s
}

// extJSON renders a document in relaxed extended JSON, for messages.
func extJSON(d bson.D) string {
	if d == nil {
		d = bson.D{}
	}
	b, err := bson.MarshalExtJSON(d, false, false)
	if err != nil {
		return fmt.Sprint(d)
	}
	return string(b)
}

func (q Query) validate() error {
	if err := check.Collection(q.Collection); err != nil {
		return err
	}
	_, err := shapeOf(q.Filter, q.Sort)
	return err
}

// ParseQuery reads a query shape from MongoDB extended JSON:
//
//	{"collection": "orders", "filter": {"status": "paid", "createdAt": {"$gte": {"$date": "2026-01-01T00:00:00Z"}}}, "sort": {"createdAt": -1}, "name": "recent paid orders"}
//
// collection and filter are required; sort and name are optional; any
// other key is an error. Errors wrap [patterns.ErrInvalid].
func ParseQuery(data []byte) (Query, error) {
	fields, err := parseSpec("ParseQuery", data, "collection", "filter", "sort", "name")
	if err != nil {
		return Query{}, err
	}
	q := Query{}
	if q.Collection, err = specString("ParseQuery", fields, "collection", true); err != nil {
		return Query{}, err
	}
	if q.Name, err = specString("ParseQuery", fields, "name", false); err != nil {
		return Query{}, err
	}
	if q.Filter, err = specDoc("ParseQuery", fields, "filter", true); err != nil {
		return Query{}, err
	}
	if q.Sort, err = specDoc("ParseQuery", fields, "sort", false); err != nil {
		return Query{}, err
	}
	if err := q.validate(); err != nil {
		return Query{}, fmt.Errorf("doctor: ParseQuery: %w", err)
	}
	return q, nil
}

// parseSpec decodes an extended JSON object and checks its keys against
// the allowed ones.
func parseSpec(op string, data []byte, allowed ...string) (map[string]any, error) {
	var d bson.D
	if err := bson.UnmarshalExtJSON(data, false, &d); err != nil {
		return nil, fmt.Errorf("doctor: %s: not an extended JSON object: %v: %w", op, err, patterns.ErrInvalid)
	}
	fields := map[string]any{}
	for _, e := range d {
		if !slices.Contains(allowed, e.Key) {
			return nil, fmt.Errorf("doctor: %s: unknown key %q (want %s): %w", op, e.Key, strings.Join(allowed, ", "), patterns.ErrInvalid)
		}
		if _, dup := fields[e.Key]; dup {
			return nil, fmt.Errorf("doctor: %s: key %q given twice: %w", op, e.Key, patterns.ErrInvalid)
		}
		fields[e.Key] = e.Value
	}
	return fields, nil
}

func specString(op string, fields map[string]any, key string, required bool) (string, error) {
	v, ok := fields[key]
	if !ok {
		if required {
			return "", fmt.Errorf("doctor: %s: %q is required: %w", op, key, patterns.ErrInvalid)
		}
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("doctor: %s: %q is a %T, not a string: %w", op, key, v, patterns.ErrInvalid)
	}
	return s, nil
}

func specDoc(op string, fields map[string]any, key string, required bool) (bson.D, error) {
	v, ok := fields[key]
	if !ok {
		if required {
			return nil, fmt.Errorf("doctor: %s: %q is required: %w", op, key, patterns.ErrInvalid)
		}
		return nil, nil
	}
	d, ok := v.(bson.D)
	if !ok {
		return nil, fmt.Errorf("doctor: %s: %q is a %T, not a document: %w", op, key, v, patterns.ErrInvalid)
	}
	return d, nil
}

// shape is what a filter and sort ask of an index, by the ESR rule.
type shape struct {
	eq     []string    // fields matched by equality, in filter order
	multi  []string    // equality fields matched by an $in of several values
	sort   []sortField // sort fields not matched by equality, in sort order
	rng    []string    // fields filtered by a range and not sorted on, in filter order
	ranges []string    // every field filtered by a range (and not by equality)
	regexI []regexUse  // case-insensitive regular expressions
	opaque []string    // operators this analysis does not look into ($or, $expr, ...)
}

type sortField struct {
	Path string
	Dir  int
}

type regexUse struct {
	Path, Pattern string
}

// inRangeSize: with a sort, an $in of this many values or more is
// planned like a range, not as a list of equalities (MongoDB's ESR
// guide: under 200 elements the $in is exploded into point lookups merged
// in sort order).
const inRangeSize = 200

// shapeOf classifies the fields of a filter and a sort:
//
//   - equality: {f: v} with v not a regular expression nor an operator
//     document, {f: {$eq: v}}, {f: {$in: [...]}} (but an $in of 200 or
//     more values is a range when there is a sort);
//   - range: every other operator ($gt, $gte, $lt, $lte, $ne, $nin,
//     $exists, $regex, $type, $elemMatch, $all, $size, $not, ...), and a
//     regular expression value;
//   - sort: the sort's fields, except those matched by equality (a
//     constant sorts for free); a field both sorted on and ranged over is
//     a sort field, since the index order serves both.
//
// $and is looked into; $or, $nor, $expr, $where and $text are noted as not
// analysed. A sort value other than 1 or -1 (or {$meta: ...}) is an error
// wrapping [patterns.ErrInvalid].
func shapeOf(filter, sortDoc bson.D) (shape, error) {
	var sh shape
	var eq, rng []string
	var walk func(d bson.D) error
	walk = func(d bson.D) error {
		for _, e := range d {
			switch e.Key {
			case "$and":
				arr, ok := e.Value.(bson.A)
				if !ok {
					return fmt.Errorf("$and takes an array: %w", patterns.ErrInvalid)
				}
				for _, sub := range arr {
					sd, ok := sub.(bson.D)
					if !ok {
						return fmt.Errorf("$and takes an array of documents: %w", patterns.ErrInvalid)
					}
					if err := walk(sd); err != nil {
						return err
					}
				}
				continue
			case "$comment":
				continue
			}
			if strings.HasPrefix(e.Key, "$") {
				if !slices.Contains(sh.opaque, e.Key) {
					sh.opaque = append(sh.opaque, e.Key)
				}
				continue
			}
			isEq, multi, re := classify(e.Value, len(sortDoc) > 0)
			if multi {
				sh.multi = appendNew(sh.multi, e.Key)
			}
			if re != nil {
				sh.regexI = append(sh.regexI, regexUse{Path: e.Key, Pattern: re.Pattern})
			}
			if isEq {
				eq = appendNew(eq, e.Key)
			} else {
				rng = appendNew(rng, e.Key)
			}
		}
		return nil
	}
	if err := walk(filter); err != nil {
		return shape{}, err
	}
	sh.eq = eq
	for _, e := range sortDoc {
		if strings.HasPrefix(e.Key, "$") || e.Key == "" {
			return shape{}, fmt.Errorf("sort field %q: %w", e.Key, patterns.ErrInvalid)
		}
		if d, ok := e.Value.(bson.D); ok && len(d) == 1 && d[0].Key == "$meta" {
			sh.opaque = appendNew(sh.opaque, "sort $meta")
			continue
		}
		dir, ok := direction(e.Value)
		if !ok {
			return shape{}, fmt.Errorf("sort field %q: direction %v is neither 1 nor -1: %w", e.Key, e.Value, patterns.ErrInvalid)
		}
		if !slices.Contains(eq, e.Key) {
			sh.sort = append(sh.sort, sortField{e.Key, dir})
		}
	}
	for _, f := range rng {
		if slices.Contains(eq, f) {
			continue
		}
		sh.ranges = append(sh.ranges, f)
		if !slices.ContainsFunc(sh.sort, func(s sortField) bool { return s.Path == f }) {
			sh.rng = append(sh.rng, f)
		}
	}
	return sh, nil
}

// classify says whether a field's condition is an equality, whether that
// is an $in of several values, and returns its case-insensitive regular
// expression if it has one.
func classify(v any, sorted bool) (isEq, multi bool, regexI *bson.Regex) {
	switch v := v.(type) {
	case bson.Regex:
		if strings.Contains(v.Options, "i") {
			return false, false, &v
		}
		return false, false, nil
	case bson.D:
		if len(v) == 0 || !strings.HasPrefix(v[0].Key, "$") {
			return true, false, nil // an embedded document matched whole
		}
		var pattern *bson.Regex
		options := ""
		for _, op := range v {
			switch op.Key {
			case "$eq":
				isEq = true
			case "$in":
				if arr, ok := op.Value.(bson.A); ok && (!sorted || len(arr) < inRangeSize) {
					isEq, multi = true, len(arr) > 1
				}
			case "$regex":
				switch p := op.Value.(type) {
				case bson.Regex:
					pattern = &p
				case string:
					pattern = &bson.Regex{Pattern: p}
				}
			case "$options":
				options, _ = op.Value.(string)
			}
		}
		if pattern != nil && strings.Contains(pattern.Options+options, "i") {
			regexI = pattern
		}
		return isEq, multi && isEq, regexI
	default:
		return true, false, nil
	}
}

// direction reads a sort or index direction by value: 1, 1.0 and
// int64(1) are all ascending.
func direction(v any) (int, bool) {
	var f float64
	switch v := v.(type) {
	case int32:
		f = float64(v)
	case int64:
		f = float64(v)
	case int:
		f = float64(v)
	case float64:
		f = v
	default:
		return 0, false
	}
	switch f {
	case 1:
		return 1, true
	case -1:
		return -1, true
	}
	return 0, false
}

func appendNew(s []string, v string) []string {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

// withoutRegexI returns the shape without the fields filtered only by a
// case-insensitive regular expression, which give an index no bounds. A
// field the shape sorts on stays: an index serves the sort.
func (sh shape) withoutRegexI() shape {
	drop := func(fields []string) []string {
		return slices.DeleteFunc(slices.Clone(fields), func(f string) bool {
			return slices.ContainsFunc(sh.regexI, func(r regexUse) bool { return r.Path == f })
		})
	}
	out := sh
	out.rng, out.ranges = drop(sh.rng), drop(sh.ranges)
	return out
}

// fields returns every field of the shape.
func (sh shape) fields() []string {
	out := slices.Clone(sh.eq)
	for _, s := range sh.sort {
		out = append(out, s.Path)
	}
	return append(out, sh.rng...)
}

// esrKey is the index that serves the shape best: the equality fields,
// then the sort fields in the sort's directions, then the range fields.
func (sh shape) esrKey() []keyField {
	var key []keyField
	for _, f := range sh.eq {
		key = append(key, keyField{Path: f, Dir: 1})
	}
	for _, s := range sh.sort {
		key = append(key, keyField{Path: s.Path, Dir: s.Dir})
	}
	for _, f := range sh.rng {
		key = append(key, keyField{Path: f, Dir: 1})
	}
	return key
}

// fit says how well an index serves a shape.
type fit int

const (
	// fitNone: the index cannot narrow the query (its first field is not
	// in the shape, or it is of a kind this analysis does not use).
	fitNone fit = iota
	// fitPartial: the index serves part of the shape in ESR order; the
	// rest is filtered or sorted after the index.
	fitPartial
	// fitOrder: the index holds every field of the shape, out of ESR order.
	fitOrder
	// fitFull: the index serves the whole shape in ESR order.
	fitFull
)

// assess says how well index ix serves shape sh, and why. It considers
// only ordinary keys with an optional hashed field (which serves equality
// alone); indexes that are hidden, sparse, partial, or have a collation
// are not used, since whether they may serve depends on values and
// options the shape does not carry.
func assess(sh shape, ix indexSpec) (fit, string) {
	switch {
	case ix.Hidden:
		return fitNone, "hidden"
	case ix.Sparse || ix.Partial != nil:
		return fitNone, "sparse or partial: serves only the documents it indexes"
	case ix.Collation != nil:
		return fitNone, "has a collation the query does not ask for"
	}
	all := sh.fields()
	n := 0 // leading index fields that are in the shape
	for n < len(ix.Key) && slices.Contains(all, ix.Key[n].Path) {
		if k := ix.Key[n]; k.Kind != "" && !(k.Kind == "hashed" && slices.Contains(sh.eq, k.Path)) {
			break
		}
		n++
	}
	if n == 0 {
		return fitNone, fmt.Sprintf("its first field %s is not one the shape can use", ix.Key[0].Path)
	}
	prefix := ix.Key[:n]

	// Walk the prefix in ESR order: equality fields, then the sort fields
	// in order with one consistent direction (as given or all reversed),
	// then range fields.
	i := 0
	for i < n && slices.Contains(sh.eq, prefix[i].Path) {
		i++
	}
	sorted, rel, reversedMix := 0, 0, false
	for sorted < len(sh.sort) && i < n && prefix[i].Path == sh.sort[sorted].Path && prefix[i].Kind == "" {
		r := prefix[i].Dir * sh.sort[sorted].Dir
		if rel != 0 && r != rel {
			reversedMix = true
			break
		}
		rel = r
		sorted++
		i++
	}
	for i < n && slices.Contains(sh.rng, prefix[i].Path) {
		i++
	}
	covered := n == len(all)
	switch {
	case i == n && covered:
		return fitFull, "serves the whole shape in ESR order"
	case covered && reversedMix:
		return fitOrder, fmt.Sprintf("holds every field of the shape, but the sort's directions at %s cannot be read from it forwards or backwards", prefix[i].Path)
	case covered:
		return fitOrder, fmt.Sprintf("holds every field of the shape, but %s comes out of Equality, Sort, Range order", prefix[i].Path)
	case i == 0:
		return fitNone, fmt.Sprintf("its first field %s cannot start a scan for this shape", prefix[0].Path)
	default:
		var left []string
		for _, f := range all {
			if !slices.ContainsFunc(prefix[:i], func(k keyField) bool { return k.Path == f }) {
				left = append(left, f)
			}
		}
		return fitPartial, fmt.Sprintf("serves %s; %s is filtered or sorted after the index", paths(prefix[:i]), strings.Join(left, ", "))
	}
}

func paths(key []keyField) string {
	out := make([]string, len(key))
	for i, k := range key {
		out[i] = k.Path
	}
	return strings.Join(out, ", ")
}
