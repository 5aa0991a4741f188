package doctor

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// indexSpec is one index as listIndexes describes it.
type indexSpec struct {
	Name      string
	Key       []keyField
	Unique    bool
	Sparse    bool
	Hidden    bool
	TTL       *int64   // expireAfterSeconds
	Partial   bson.Raw // partialFilterExpression
	Collation bson.Raw
	Weights   bson.Raw // text indexes
}

// keyField is one field of an index key.
type keyField struct {
	Path string
	Dir  int    // 1 or -1 for an ordinary field, 0 for a special one
	Kind string // "" for an ordinary field; "hashed", "text", "2dsphere", "2d", "wildcard"
	// Scaled: an ordinary field whose direction is a number other than 1
	// and -1 by value ({a: 2}, {a: 0.5}): the same order as 1 or -1, but
	// another key value (shardCollection compares the values).
	Scaled bool
}

// regular reports whether every field of the key is ordinary (ascending or
// descending), the only kind the prefix and ESR rules reason about.
func (s indexSpec) regular() bool {
	for _, k := range s.Key {
		if k.Kind != "" {
			return false
		}
	}
	return len(s.Key) > 0
}

// keyString renders a key as {a: 1, b: -1, c: "hashed"}.
func keyString(key []keyField) string {
	parts := make([]string, len(key))
	for i, k := range key {
		v := strconv.Itoa(k.Dir)
		if k.Kind != "" {
			v = strconv.Quote(k.Kind)
			if k.Kind == "wildcard" {
				v = "1"
			}
		}
		parts[i] = k.Path + ": " + v
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// parseKey reads an index key document. Directions are compared by value:
// 1, 1.0 and int64(1) are the same direction; 2 is ascending too, but
// Scaled.
func parseKey(raw bson.Raw) ([]keyField, error) {
	elems, err := raw.Elements()
	if err != nil {
		return nil, err
	}
	key := make([]keyField, 0, len(elems))
	for _, e := range elems {
		k := keyField{Path: e.Key()}
		v := e.Value()
		switch {
		case k.Path == "$**" || strings.HasSuffix(k.Path, ".$**"):
			k.Kind = "wildcard"
		case v.IsNumber():
			f := v.AsFloat64()
			if f == 0 {
				return nil, fmt.Errorf("field %q has direction 0", k.Path)
			}
			k.Dir = 1
			if f < 0 {
				k.Dir = -1
			}
			k.Scaled = f != 1 && f != -1
		case v.Type == bson.TypeString:
			k.Kind = v.StringValue()
		default:
			return nil, fmt.Errorf("field %q has a %s as its direction", k.Path, v.Type)
		}
		key = append(key, k)
	}
	return key, nil
}

// parseIndex reads one document of a listIndexes reply.
func parseIndex(raw bson.Raw) (indexSpec, error) {
	var d struct {
		Name      string   `bson:"name"`
		Key       bson.Raw `bson:"key"`
		Unique    bool     `bson:"unique"`
		Sparse    bool     `bson:"sparse"`
		Hidden    bool     `bson:"hidden"`
		Partial   bson.Raw `bson:"partialFilterExpression"`
		Collation bson.Raw `bson:"collation"`
		Weights   bson.Raw `bson:"weights"`
	}
	if err := bson.Unmarshal(raw, &d); err != nil {
		return indexSpec{}, fmt.Errorf("index %s: %w", raw, err)
	}
	key, err := parseKey(d.Key)
	if err != nil {
		return indexSpec{}, fmt.Errorf("index %q: %w", d.Name, err)
	}
	s := indexSpec{Name: d.Name, Key: key, Unique: d.Unique, Sparse: d.Sparse, Hidden: d.Hidden,
		Partial: d.Partial, Collation: d.Collation, Weights: d.Weights}
	if v, err := raw.LookupErr("expireAfterSeconds"); err == nil && v.IsNumber() {
		ttl := v.AsInt64()
		s.TTL = &ttl
	}
	return s, nil
}

// codeNamespaceNotFound is the server's error code for a collection that
// does not exist.
const codeNamespaceNotFound = 26

// listIndexes reads the indexes of a collection: one listIndexes command.
// A collection that does not exist has none (exists is false). The
// command is sent as is: the driver's Indexes().List hides the server's
// NamespaceNotFound behind an empty list.
func listIndexes(ctx context.Context, coll *mongo.Collection) (specs []indexSpec, exists bool, err error) {
	cur, err := coll.Database().RunCommandCursor(ctx, bson.D{{Key: "listIndexes", Value: coll.Name()}})
	if ce, ok := errors.AsType[mongo.CommandError](err); ok && ce.Code == codeNamespaceNotFound {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer cur.Close(context.WithoutCancel(ctx))
	for cur.Next(ctx) {
		s, err := parseIndex(cur.Current)
		if err != nil {
			return nil, true, err
		}
		specs = append(specs, s)
	}
	return specs, true, cur.Err()
}

// tooManyIndexes applies the too-many-indexes rule (the _id index counts).
func tooManyIndexes(coll string, specs []indexSpec, th Thresholds) []Finding {
	if len(specs) <= th.Indexes {
		return nil
	}
	return []Finding{{
		Rule: RuleTooManyIndexes, Severity: Warning, Collection: coll,
		Message:  fmt.Sprintf("%d indexes: every write updates each of them", len(specs)),
		Evidence: Evidence{{"indexes", len(specs)}, {"threshold", th.Indexes}},
		Remedy:   "drop unused and redundant indexes; index many optional attributes with one {k: 1, v: 1} index (the attribute pattern) or a wildcard index",
	}}
}

// redundantIndexes applies the redundant-index rule: index a is redundant
// when b's key starts with a's key (same directions, or all of them
// reversed) and b can serve every query a serves. That requires: both
// keys ordinary; a neither unique, sparse, partial nor TTL (those give a
// a role of its own); b neither sparse, partial nor hidden (b must index
// every document); and the same collation.
func redundantIndexes(coll string, specs []indexSpec) []Finding {
	var out []Finding
	for _, a := range specs {
		if a.Name == "_id_" || !a.regular() || a.Unique || a.Sparse || a.Partial != nil || a.TTL != nil {
			continue
		}
		for _, b := range specs {
			if b.Name == a.Name || !b.regular() || b.Sparse || b.Partial != nil || b.Hidden ||
				len(b.Key) <= len(a.Key) || !isPrefix(a.Key, b.Key) || string(a.Collation) != string(b.Collation) {
				continue
			}
			out = append(out, Finding{
				Rule: RuleRedundantIndex, Severity: Warning, Collection: coll, Index: a.Name,
				Message: fmt.Sprintf("index %s %s is a prefix of index %s %s", a.Name, keyString(a.Key), b.Name, keyString(b.Key)),
				Evidence: Evidence{
					{"index", a.Name}, {"key", keyString(a.Key)},
					{"prefixOf", b.Name}, {"prefixOfKey", keyString(b.Key)},
				},
				Remedy: fmt.Sprintf("drop index %s: %s serves every query it serves, and each write updates both", a.Name, b.Name),
			})
			break
		}
	}
	return out
}

// isPrefix reports whether a's fields are the first fields of b with the
// same directions, or with every direction reversed (an index is walked
// both ways).
func isPrefix(a, b []keyField) bool {
	same, reversed := true, true
	for i, k := range a {
		if b[i].Path != k.Path {
			return false
		}
		same = same && b[i].Dir == k.Dir
		reversed = reversed && b[i].Dir == -k.Dir
	}
	return same || reversed
}

// multikeyCompound applies the multikey-compound rule: a compound index
// whose fields run through different arrays in the sample. MongoDB
// refuses to index a document with two different arrays in the fields of
// one index ("cannot index parallel arrays"). Fields in one array are
// valid: {"items.sku": 1, "items.qty": 1} over items: [{sku, qty}] indexes
// each element once. So each field is described by the innermost of the
// arrays the sample saw on its path (at the field or above it), and two
// fields conflict when neither of those paths is a prefix of the other:
// "items" and "items.sizes" are nested, "tags" and "sizes" are not.
func multikeyCompound(coll string, specs []indexSpec, p *profile) []Finding {
	var out []Finding
	for _, s := range specs {
		if len(s.Key) < 2 {
			continue
		}
		type field struct {
			path, array string // array: the innermost array on path
			arrays      int    // arrays the sample saw at the path or above it
		}
		var fields []field
		for _, k := range s.Key {
			if k.Kind == "wildcard" {
				continue
			}
			if at, n := p.arraysAt(k.Path); n > 0 {
				fields = append(fields, field{k.Path, at[len(at)-1], n})
			}
		}
		conflict := make([]bool, len(fields))
		for i := range fields {
			for j := i + 1; j < len(fields); j++ {
				if !nestedPaths(fields[i].array, fields[j].array) {
					conflict[i], conflict[j] = true, true
				}
			}
		}
		var names, desc []string
		var ev Evidence
		for i, f := range fields {
			if conflict[i] {
				names = append(names, f.path)
				desc = append(desc, fmt.Sprintf("%s (array at %s)", f.path, f.array))
				ev = append(ev, Measure{"arraysAt." + f.path, f.arrays}, Measure{"arrayOf." + f.path, f.array})
			}
		}
		if len(names) == 0 {
			continue
		}
		out = append(out, Finding{
			Rule: RuleMultikeyCompound, Severity: Warning, Collection: coll, Index: s.Name,
			Field:    strings.Join(names, ", "),
			Message:  fmt.Sprintf("index %s %s has fields in different arrays: %s", s.Name, keyString(s.Key), strings.Join(desc, ", ")),
			Evidence: append(Evidence{{"arrayFields", len(names)}}, ev...),
			Remedy:   "index at most one array per compound index (patterns.ESRKey refuses two array fields): a document with arrays in both cannot be inserted; split it into one index per array, fields of one array's elements may share an index",
		})
	}
	return out
}

// nestedPaths reports whether one dotted path is the other or one of its
// prefixes: "a" and "a.b" are nested, "a.b" and "a.c" are not.
func nestedPaths(a, b string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	return a == b || strings.HasPrefix(b, a+".")
}

// indexUse is what $indexStats says of one index, summed over the hosts
// that answered (one per shard on a sharded cluster).
type indexUse struct {
	ops   int64
	since time.Time // the youngest start of the counters among the hosts
}

// readIndexStats runs $indexStats on a collection: one aggregate command.
func readIndexStats(ctx context.Context, coll *mongo.Collection) (map[string]indexUse, error) {
	cur, err := coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$indexStats", Value: bson.D{}}}})
	if err != nil {
		return nil, err
	}
	defer cur.Close(context.WithoutCancel(ctx))
	uses := map[string]indexUse{}
	for cur.Next(ctx) {
		var d struct {
			Name     string `bson:"name"`
			Accesses struct {
				Ops   int64     `bson:"ops"`
				Since time.Time `bson:"since"`
			} `bson:"accesses"`
		}
		if err := cur.Decode(&d); err != nil {
			return nil, err
		}
		u := uses[d.Name]
		u.ops += d.Accesses.Ops
		if d.Accesses.Since.After(u.since) {
			u.since = d.Accesses.Since
		}
		uses[d.Name] = u
	}
	return uses, cur.Err()
}

// unusedIndexes applies the unused-index rule. It leaves out the _id
// index, unique indexes (they enforce a constraint even when no query
// uses them), TTL indexes (their deletions are not counted as accesses)
// and hidden indexes (hidden on purpose). The indexes whose counters
// started less than age before now cannot be judged: they are returned as
// one skip for the collection, which names them and says each start of
// the counters once (they usually share one: the server's start).
func unusedIndexes(coll string, specs []indexSpec, uses map[string]indexUse, now time.Time, age time.Duration) ([]Finding, []Skip) {
	var out []Finding
	var starts []string            // distinct starts of the young indexes' counters (RFC 3339), in order met
	young := map[string][]string{} // start -> the young indexes counting since then
	for _, s := range specs {
		if s.Name == "_id_" || s.Unique || s.TTL != nil || s.Hidden {
			continue
		}
		u, ok := uses[s.Name]
		if !ok || u.ops > 0 {
			continue
		}
		window := now.Sub(u.since)
		if window < age {
			since := u.since.UTC().Format(time.RFC3339)
			if young[since] == nil {
				starts = append(starts, since)
			}
			young[since] = append(young[since], s.Name)
			continue
		}
		out = append(out, Finding{
			Rule: RuleUnusedIndex, Severity: Warning, Collection: coll, Index: s.Name,
			Message: fmt.Sprintf("index %s %s has not been used in %s", s.Name, keyString(s.Key), window.Round(time.Hour)),
			Evidence: Evidence{
				{"ops", u.ops}, {"since", u.since.UTC().Format(time.RFC3339)},
				{"days", ratio(window.Hours() / 24)}, {"thresholdDays", ratio(age.Hours() / 24)},
			},
			Remedy: fmt.Sprintf("drop index %s after checking that no rare job (monthly report, restore) needs it; hide it first (collMod hidden: true) to test", s.Name),
		})
	}
	if len(starts) == 0 {
		return out, nil
	}
	groups := make([]string, len(starts))
	for i, since := range starts {
		groups[i] = fmt.Sprintf("%s (counters since %s)", strings.Join(young[since], ", "), since)
	}
	return out, []Skip{{Rule: RuleUnusedIndex, Collection: coll, Reason: fmt.Sprintf(
		"no operation used %s, but $indexStats counters cover less than %s (they restart with the server)",
		strings.Join(groups, "; "), age)}}
}
