// Package shard decides where a command goes on a sharded MongoDB
// cluster: to one shard, to some shards, to every shard, or nowhere
// because mongos refuses it (with the server's error code). It is a pure
// function of the command as the driver encodes it, the shard keys of the
// collections, and the server's version, written from the routing rules of
// MongoDB 6.0 to 8.0 (the manual's pages for each command and mongos's
// targeting code):
//
//   - A filter reaches one shard when it matches every field of the shard
//     key by one equality (a hashed field by equality too), or, on a key
//     without a hashed field, bounds a field to the null point as {a:
//     null} does ({$exists: false}, {$not: {$exists: true}}, {$gte: null},
//     {$lte: null}); some shards when it matches a prefix of the key so, a
//     key field by an $in of several values, or a ranged (not hashed)
//     first field by a range (or, on a key without a hashed field, by the
//     negation of a range: {$not: {$gt: 5}}); every shard otherwise. An
//     $or of one branch is that branch.
//   - The exact shard key, which upserts need before 7.1, is what mongos
//     extracts from the filter's equalities: not from a field matched by
//     equality twice ({$and: [{a: 1}, {a: 1}]}, {a: {$all: [1, 1]}},
//     whatever the values), nor from a value that holds a $-prefixed field
//     ({a: {b: {$eq: 1}}} is a document, no equality on a.b), nor from a
//     null point that is no equality. Such a filter still reaches one
//     shard by its bounds (two different values: one shard, matching
//     nothing). {a: {$all: [1]}} is an equality, and so is one on a parent
//     document ({a: {b: 1}} for a.b), but the parent gives the key only:
//     given twice, it bounds nothing.
//   - findAndModify goes to the shard of its exact shard key. Without it,
//     up to 7.0 (6.0 and 7.0 patch releases since 2023, SERVER-44422),
//     it goes to the one shard its filter reaches, and is refused when
//     the filter reaches several (61 ShardKeyNotFound; an _id alone is not
//     enough); from 7.1 on, mongos accepts any filter and routes it with a
//     two-phase write.
//   - A single update (multi: false) or delete (limit: 1) goes to one shard
//     when its filter reaches one; up to 7.0, it otherwise needs an exact
//     _id match, which is sent to the shards its filter reaches (72
//     InvalidOptions for updates, 61 for deletes). From 7.1 on any filter
//     is accepted (two-phase write). A replacement is also targeted by the
//     shard key the replacement document holds.
//   - A two-phase write (7.1+) reads on the shards its filter reaches
//     (some shards for a prefix of the key, every shard without one), then
//     writes on the one shard holding the document it found: its route is
//     its filter's.
//   - An upsert needs the exact shard key (61, "Failed to target upsert by
//     query"); from 7.1 on, a single upsert goes where its filter goes (one
//     shard, or a two-phase write), a multi upsert still needs the key. An
//     upsert whose filter matches a path by equality twice (a key field,
//     or any path for an update by operators) cannot build the document
//     it inserts: refused (54 NotSingleValueField) whenever nothing
//     matches, on every version.
//   - An update that changes a shard-key field must hold the full shard key
//     in its filter (31025) and cannot be a multi-update (72).
//   - A unique index must be prefixed by the shard key (67
//     CannotCreateIndex), or start with _id, which suits every key.
//   - updateMany and deleteMany go where their filter goes.
//   - aggregate goes where its first $match goes; $lookup and $graphLookup
//     from a sharded collection need 5.1 (28769); $merge into a sharded
//     collection needs "on" to hold every shard-key field (51190), which
//     it does when "on" is left out (it defaults to the key and _id); $out
//     cannot write to a sharded collection (28769).
//   - An insert goes to the shard of each document's key; a document with
//     an array at, or above, a shard-key field is refused (61).
//
// The doctor's shard-key analysis and every pattern package's tests use
// it: one implementation of the rules.
package shard

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/check"
	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Field is one field of a shard key.
type Field struct {
	Path   string
	Hashed bool
}

// Key is a shard key: its fields in order, at most one of them hashed.
type Key []Field

// ParseKey reads a shard key as shardCollection takes it ({a: 1, b:
// "hashed"}). It rejects, wrapping patterns.ErrInvalid: no fields, an
// invalid path, a field given twice, a value other than 1 or "hashed",
// and more than one hashed field.
func ParseKey(d bson.D) (Key, error) {
	if len(d) == 0 {
		return nil, errs.Invalid("shard key has no fields")
	}
	var k Key
	for _, e := range d {
		if err := check.Path(e.Key); err != nil {
			return nil, err
		}
		if k.Has(e.Key) {
			return nil, errs.Invalid("shard key field %q given twice", e.Key)
		}
		f := Field{Path: e.Key}
		switch v := e.Value.(type) {
		case string:
			if v != "hashed" {
				return nil, errs.Invalid("shard key field %q: %q is neither 1 nor \"hashed\"", e.Key, v)
			}
			f.Hashed = true
		default:
			if n, ok := number(v); !ok || n != 1 {
				return nil, errs.Invalid("shard key field %q: %v is neither 1 nor \"hashed\"", e.Key, e.Value)
			}
		}
		k = append(k, f)
	}
	if n := len(slices.DeleteFunc(slices.Clone(k), func(f Field) bool { return !f.Hashed })); n > 1 {
		return nil, errs.Invalid("shard key has %d hashed fields; at most one", n)
	}
	return k, nil
}

// MustParseKey is [ParseKey] for keys written in code; it panics on an
// invalid key.
func MustParseKey(d bson.D) Key {
	k, err := ParseKey(d)
	if err != nil {
		panic(err)
	}
	return k
}

// Has reports whether path is a field of the key.
func (k Key) Has(path string) bool {
	return slices.ContainsFunc(k, func(f Field) bool { return f.Path == path })
}

// String returns the key as shardCollection takes it, for example
// {"meta": 1, "start": 1}.
func (k Key) String() string {
	parts := make([]string, len(k))
	for i, f := range k {
		v := "1"
		if f.Hashed {
			v = `"hashed"`
		}
		parts[i] = fmt.Sprintf("%q: %s", f.Path, v)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case int64:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

// Target says where a command goes.
type Target int

// The targets, from the best to the worst.
const (
	OneShard   Target = iota // mongos sends it to the one shard that owns the key
	SomeShards               // to the shards owning the chunks of a key range
	EveryShard               // to every shard (scatter-gather, or an _id write broadcast)
	Refused                  // mongos refuses it; Route.Code is the server's error code
)

// String returns "one shard", "some shards", "every shard" or "refused".
func (t Target) String() string {
	switch t {
	case OneShard:
		return "one shard"
	case SomeShards:
		return "some shards"
	case EveryShard:
		return "every shard"
	default:
		return "refused"
	}
}

// Route is where a command goes, and why.
type Route struct {
	Target Target
	Code   int32  // the server's error code when Refused
	Why    string // one sentence
}

// String returns "one shard: <why>", or "refused (code N): <why>".
func (r Route) String() string {
	if r.Target == Refused {
		return fmt.Sprintf("refused (code %d): %s", r.Code, r.Why)
	}
	return fmt.Sprintf("%s: %s", r.Target, r.Why)
}

// worse returns the worse of two routes (the first of equals).
func worse(a, b Route) Route {
	if b.Target > a.Target {
		return b
	}
	return a
}

// Filter says where a query with this filter goes on a collection sharded
// on k, with the simple collation: the rules of the package documentation
// for a filter alone. A top-level $or goes where the union of its
// branches goes (each read with the filter's other fields); a condition
// that cannot be read ($nor, $expr, ...) goes to every shard unless the
// other fields target it.
func (k Key) Filter(filter bson.D) Route { return k.filter(filter, nil) }

// FilterCollated is [Key.Filter] for a command with the given collation:
// a collation other than the simple one ({locale: "simple"}, or none)
// makes an equality on a string, a document or an array useless for
// targeting on any key field: a ranged field's chunks are bounded by the
// simple order of the values, and mongos assumes a hashed field's hash
// may come from a collatable value (the collection has no default
// collation; the package's repositories create none). Only findAndModify
// is exempt on a hashed field (Cluster.Route).
func (k Key) FilterCollated(filter, collation bson.D) Route { return k.filter(filter, collation) }

func (k Key) filter(filter, collation bson.D) Route { return k.route(filter, collation, false) }

// route is filter for a command that may target a hashed field by a
// collatable value under a collation (hashedTargetable: findAndModify, see
// matchIn).
func (k Key) route(filter, collation bson.D, hashedTargetable bool) Route {
	m := k.matchIn(filter, collation, hashedTargetable)
	if r, ok := k.or(filter, collation, hashedTargetable, m); ok {
		return r
	}
	first := k[0]
	eq := m.bound(first.Path)
	rng := k.rangedOn(m, first.Path)
	switch {
	case eq == nil && !rng:
		return Route{EveryShard, 0, fmt.Sprintf("the filter does not bound %s, the shard key's first field (no equality or range on it%s)", first.Path, m.why(first.Path))}
	case eq == nil && first.Hashed:
		return Route{EveryShard, 0, fmt.Sprintf("a range on the hashed field %s is sent to every shard", first.Path)}
	case eq == nil:
		return Route{SomeShards, 0, fmt.Sprintf("the range on %s goes to the shards owning chunks in it", first.Path)}
	}
	for i, f := range k {
		e := m.bound(f.Path)
		if e == nil {
			return Route{SomeShards, 0, fmt.Sprintf("equality on a prefix of the key (%s); the chunks of that prefix may span shards", strings.Join(k.paths(i), ", "))}
		}
		if e.several {
			return Route{SomeShards, 0, fmt.Sprintf("$in on %s: one shard per value at most", f.Path)}
		}
	}
	return Route{OneShard, 0, "equality on every key field"}
}

// or routes a filter whose top-level fields do not target it but whose
// $or does, as mongos does, by the union of its branches (each read with
// the filter's other fields): one shard when every branch holds the same
// full shard key, the worst branch's route otherwise.
func (k Key) or(filter, collation bson.D, hashedTargetable bool, m match) (Route, bool) {
	branches, _ := field(filter, "$or").(bson.A)
	if len(branches) == 0 || k.full(m) {
		return Route{}, false
	}
	rest := slices.DeleteFunc(slices.Clone(filter), func(e bson.E) bool { return e.Key == "$or" })
	out := Route{OneShard, 0, "every branch of the $or holds one full shard key"}
	var value string
	for i, b := range branches {
		bd, _ := b.(bson.D)
		combined := append(slices.Clone(rest), bd...)
		r := k.route(combined, collation, hashedTargetable)
		if r.Target != OneShard {
			r.Why = fmt.Sprintf("$or branch %d: %s", i, r.Why)
			out = worse(out, r)
			continue
		}
		v := k.values(k.matchIn(combined, collation, hashedTargetable))
		if i == 0 {
			value = v
		} else if v != value && out.Target == OneShard {
			out = Route{SomeShards, 0, "the branches of the $or hold different shard keys"}
		}
	}
	return out, true
}

// values returns the key's values in a filter that holds the full key.
func (k Key) values(m match) string {
	var b strings.Builder
	for _, f := range k {
		b.WriteString(m.eq[f.Path].value)
		b.WriteByte(0)
	}
	return b.String()
}

// full reports whether mongos extracts the exact shard key from the
// filter (extractShardKeyFromQuery): one equality on every key field, none
// of them inexact.
func (k Key) full(m match) bool {
	for _, f := range k {
		if e := m.eq[f.Path]; e == nil || e.several || e.inexact {
			return false
		}
	}
	return true
}

// hashed reports whether a field of the key is hashed: mongos then plans
// the filter against a hashed index, which bounds no negation.
func (k Key) hashed() bool {
	return slices.ContainsFunc(k, func(f Field) bool { return f.Hashed })
}

// rangedOn reports whether the filter bounds the key field path to part
// of the key range without an equality: a range, or (on a key without a
// hashed field) the negation of one.
func (k Key) rangedOn(m match, path string) bool {
	return m.ranged[path] || (m.notRanged[path] && !k.hashed())
}

func (k Key) paths(n int) []string {
	out := make([]string, n)
	for i := range n {
		out[i] = k[i].Path
	}
	return out
}

// equality is a field matched by equality: one value, or an $in of several.
type equality struct {
	several bool
	value   string // the value's BSON, for one value
	// collatable: a value is a string, a document or an array, which a
	// collation compares otherwise than the simple order.
	collatable bool
	// inexact: the field's values are bounded to one value (or none), but
	// mongos extracts no exact shard key from it: the path is matched by
	// equality twice (twice), the value is a document holding a
	// $-prefixed field (ShardKeyPattern::isValidShardKeyElementForStorage),
	// or the condition is no equality but bounds the field to the null
	// point (null). A find still goes to one shard, by the bounds; an
	// upsert, which needs the exact key, is refused before 7.1.
	inexact bool
	// twice: the path is matched by equality twice (mongodb/mongo
	// path_support.cpp checkEqualityConflicts, "path 'a' is matched
	// twice", whatever the values; "both paths 'a.b' and 'a' are
	// matched"): an upsert cannot build the document it inserts from such
	// a filter (54 NotSingleValueField).
	twice bool
	// null: no equality, but a condition the planner bounds by the one
	// point null, as {f: null}: {$exists: false} and {$not: {$exists:
	// true}} (index_bounds_builder.cpp, NOT of EXISTS: the null point),
	// {$gte: null} and {$lte: null} (type bracketing: equal to {$eq:
	// null}). Only on a key without a hashed field (matchIn).
	null bool
	// parent: the equality is on a parent document of the path ({a: {b:
	// 1}} for a.b). mongos extracts the exact key from it, but the
	// planner draws no bounds on the path from it: with inexact, it
	// bounds nothing.
	parent bool
}

// bound returns the equality that bounds path for routing by the key's
// bounds (nil when none): an inexact equality on a parent document bounds
// nothing.
func (m match) bound(path string) *equality {
	e := m.eq[path]
	if e != nil && e.inexact && e.parent {
		return nil
	}
	return e
}

// match is what a filter says of its top-level fields.
type match struct {
	eq     map[string]*equality
	ranged map[string]bool
	// unbounded names the fields whose only conditions bound nothing
	// ($ne, $nin, $not, $exists: true...), and collated those whose
	// equality a collation made useless, for Route.Why.
	unbounded, collated map[string]bool
	// notRanged names the fields whose condition is the negation of a
	// range ({$not: {$gt: 5}}): bounded by its complement on a key without
	// a hashed field.
	notRanged map[string]bool
	// idCollated: the equality on _id is on a collatable value under a
	// non-simple collation, so it is no exact _id.
	idCollated bool
	// nullPoint names the fields whose condition bounds them to the null
	// point without an equality (see equality.null).
	nullPoint map[string]bool
}

// add records an equality on path; a second one on the same path leaves
// no exact key (checkEqualityConflicts, whatever the values), but a
// direct equality still bounds the path. A null point beside an equality
// only narrows it: the equality stands, exact or not.
func (m match) add(path string, c *equality) {
	switch old := m.eq[path]; {
	case old == nil || (old.several && !c.several) || (old.null && !c.null):
		m.eq[path] = c
	case c.null:
	case !old.several && !c.several:
		old.inexact, old.twice = true, true
		old.parent = old.parent && c.parent
	}
}

// twice returns a path of paths (every path when nil) that the filter
// matches by equality twice ("" when none).
func (m match) twice(paths []string) string {
	for _, p := range slices.Sorted(maps.Keys(m.eq)) {
		if m.eq[p].twice && (paths == nil || slices.Contains(paths, p)) {
			return p
		}
	}
	return ""
}

// why says why a field of the key is not bounded.
func (m match) why(path string) string {
	switch {
	case m.collated[path]:
		return "; the command's collation makes its equality on a string, a document or an array unusable"
	case m.unbounded[path]:
		return "; $ne, $nin, $not (but of a range on a key without a hashed field) and $exists: true bound nothing: their bounds cover the whole key range"
	}
	return ""
}

// matchIn is matchOf for a command on a collection sharded on k, with
// the given collation: under a collation other than the simple one, an
// equality on a collatable value bounds nothing on a key field and makes
// no exact _id. hashedTargetable keeps such an equality on the hashed
// field, as mongos does for findAndModify alone (mongodb/mongo
// chunk_manager.cpp findIntersectingChunk, bypassIsFieldHashedCheck;
// cluster_find_and_modify_cmd.cpp).
func (k Key) matchIn(filter, collation bson.D, hashedTargetable bool) match {
	m := matchOf(filter)
	if !k.hashed() {
		for _, f := range k {
			if m.nullPoint[f.Path] {
				m.add(f.Path, &equality{value: valueOf(nil), inexact: true, null: true})
			}
		}
	}
	if simple(collation) {
		return m
	}
	for path, e := range m.eq {
		if !e.collatable {
			continue
		}
		if path == "_id" {
			m.idCollated = true
		}
		if i := slices.IndexFunc(k, func(f Field) bool { return f.Path == path }); i >= 0 && !(hashedTargetable && k[i].Hashed) {
			delete(m.eq, path)
			m.collated[path] = true
		}
	}
	return m
}

// simple reports whether a collation is the simple one: none, or
// {locale: "simple"}.
func simple(collation bson.D) bool {
	if len(collation) == 0 {
		return true
	}
	locale, _ := field(collation, "locale").(string)
	return locale == "simple"
}

// matchOf reads a filter's fields as mongos does (its exact shard key
// from extractShardKeyFromQuery, its bounds from the query planner):
// {f: v} (v neither an operator document, a regular expression nor an
// array), {f: {$eq: v}}, {f: {$in: [v]}} and {f: {$all: [v]}} are
// equalities; an $in of several values is an equality on several values;
// a path matched by equality twice ($and, or $all of several values) is an
// inexact equality (see equality); an equality on a document is also one
// on each of its fields, by their dotted paths (a key field m.a is reached
// by {m: {a: 1}}), but not on a field whose value is itself a document of
// operators ({m: {a: {$eq: 1}}} is a document, no equality on m.a); a
// condition that bounds the field's values ($gt, $lt, $type, an anchored
// regular expression...) is a range, and so is the negation of a range
// on a key without a hashed field; $ne, $nin, the other $not and
// $exists: true bound nothing, and are as no condition at all; a
// condition that bounds the field to the null point is noted (nullPoint),
// for matchIn. $and, and an $or of one branch, are read into; the other
// $or, $nor, $expr and the like target nothing.
func matchOf(filter bson.D) match {
	m := match{eq: map[string]*equality{}, ranged: map[string]bool{}, unbounded: map[string]bool{}, collated: map[string]bool{}, notRanged: map[string]bool{}, nullPoint: map[string]bool{}}
	var equal func(path string, v any, c *equality)
	equal = func(path string, v any, c *equality) {
		lit, one := literal(v)
		if one {
			c.value = valueOf(lit)
			c.inexact = c.inexact || dollar(lit)
		}
		m.add(path, c)
		if d, ok := lit.(bson.D); one && ok {
			for _, sub := range d {
				switch sub.Value.(type) {
				case bson.A, bson.Regex:
					continue // no key value: an array, or no value for storage
				}
				equal(path+"."+sub.Key, sub.Value, &equality{parent: true, collatable: collatable(sub.Value), inexact: dollar(sub.Value)})
			}
		}
	}
	var walk func(d bson.D)
	walk = func(d bson.D) {
		for _, e := range d {
			// An $or of one branch is that branch: the canonical query
			// collapses it (ListOfMatchExpression's optimizer), mongos and
			// the upsert's document read that.
			if arr, _ := e.Value.(bson.A); e.Key == "$and" || e.Key == "$or" && len(arr) == 1 {
				for _, sub := range arr {
					if sd, ok := sub.(bson.D); ok {
						walk(sd)
					}
				}
				continue
			}
			if strings.HasPrefix(e.Key, "$") {
				continue
			}
			if _, isArray := e.Value.(bson.A); isArray {
				continue // matches the array or an element: no key value
			}
			if nullPoint(e.Value) {
				m.nullPoint[e.Key] = true
			}
			switch c := condition(e.Value); {
			case c != nil:
				equal(e.Key, e.Value, c)
			case bounds(e.Value):
				m.ranged[e.Key] = true
			case notRange(e.Value):
				m.notRanged[e.Key] = true
			default:
				m.unbounded[e.Key] = true
			}
		}
	}
	walk(filter)
	return m
}

// literal returns the one value an equality condition names (v itself, or
// the value of its $eq, its $in or $all of one value), and whether it
// names one.
func literal(v any) (any, bool) {
	d, ok := v.(bson.D)
	if !ok || len(d) == 0 || !strings.HasPrefix(d[0].Key, "$") {
		return v, true
	}
	for _, op := range d {
		switch op.Key {
		case "$eq":
			return op.Value, true
		case "$in", "$all":
			if arr, _ := op.Value.(bson.A); len(arr) > 0 && (op.Key == "$all" || len(arr) == 1) {
				return arr[0], true
			}
		}
	}
	return nil, false
}

// dollar reports whether a value is, or holds at any depth, a document
// with a $-prefixed field other than a DBRef's: no shard-key value
// (ShardKeyPattern::isValidShardKeyElementForStorage, storageValidEmbedded).
func dollar(v any) bool {
	switch c := v.(type) {
	case bson.D:
		for _, e := range c {
			if strings.HasPrefix(e.Key, "$") && e.Key != "$ref" && e.Key != "$id" && e.Key != "$db" {
				return true
			}
			if dollar(e.Value) {
				return true
			}
		}
	case bson.A:
		return slices.ContainsFunc(c, dollar)
	}
	return false
}

// notRange reports whether a condition negates one range ({$not: {$gt:
// 5}}, {$not: {$exists: true}}): the planner bounds it by the complement
// of the range on a btree index (mongodb/mongo index_bounds_builder.cpp
// translate, NOT: the child's bounds complemented; planner_ixselect.cpp:
// not on a hashed index, nor a negation of $regex, $mod, $type,
// $elemMatch or of a comparison with an array).
func notRange(v any) bool {
	d, _ := v.(bson.D)
	for _, op := range d {
		child, _ := op.Value.(bson.D)
		if op.Key != "$not" || len(child) != 1 {
			continue
		}
		switch c := child[0]; c.Key {
		case "$gt", "$gte", "$lt", "$lte":
			if _, isArray := c.Value.(bson.A); !isArray {
				return true
			}
		case "$exists":
			if truthy(c.Value) {
				return true
			}
		}
	}
	return false
}

// bounds reports whether a condition that is no equality bounds the
// field's values to part of the key range, so that mongos can target the
// chunks of that part: a comparison ($gt, $gte, $lt, $lte), $type, $mod,
// $exists: false (null), $elemMatch and $all (on their values), or a
// regular expression anchored at the start without the i or x options.
// $ne, $nin, $not, $exists: true and an unanchored expression cover the
// whole range.
func bounds(v any) bool {
	switch c := v.(type) {
	case bson.Regex:
		return anchored(c.Pattern, c.Options)
	case bson.D:
		for _, op := range c {
			switch op.Key {
			case "$gt", "$gte", "$lt", "$lte", "$type", "$mod", "$elemMatch", "$all":
				return true
			case "$exists":
				if !truthy(op.Value) {
					return true
				}
			case "$regex":
				p, _ := op.Value.(string)
				if r, ok := op.Value.(bson.Regex); ok {
					p = r.Pattern
				}
				o, _ := field(c, "$options").(string)
				if anchored(p, o) {
					return true
				}
			}
		}
	}
	return false
}

// anchored reports whether a regular expression matches only strings
// with a fixed prefix, a range of the simple order.
func anchored(pattern, options string) bool {
	return (strings.HasPrefix(pattern, "^") || strings.HasPrefix(pattern, `\A`)) && !strings.ContainsAny(options, "imx")
}

// valueOf returns the BSON of a value.
func valueOf(v any) string {
	_, b, err := bson.MarshalValue(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// collatable reports whether a collation compares a value otherwise than
// the simple order: a string, a symbol, a document or an array.
func collatable(v any) bool {
	switch c := v.(type) {
	case string, bson.Symbol, bson.D, bson.M, bson.Raw, bson.A:
		return true
	case bson.RawValue:
		switch c.Type {
		case bson.TypeString, bson.TypeEmbeddedDocument, bson.TypeSymbol, bson.TypeArray:
			return true
		}
	}
	return false
}

// condition classifies a field's condition: an equality (nil when not).
// Two equalities in one condition ({$eq: 1, $all: [1]}, or $all of
// several values) make an inexact one.
func condition(v any) *equality {
	switch c := v.(type) {
	case bson.Regex, bson.A:
		return nil
	case bson.RawValue:
		if c.Type == bson.TypeArray || c.Type == bson.TypeRegex {
			return nil
		}
	case bson.D:
		if len(c) > 0 && strings.HasPrefix(c[0].Key, "$") {
			return operators(c)
		}
	}
	return &equality{collatable: collatable(v)}
}

// operators classifies a document of operators: an equality ($eq, $in,
// $all of values), nil when none.
func operators(c bson.D) *equality {
	var out *equality
	for _, op := range c {
		var e *equality
		switch op.Key {
		case "$eq":
			if x := condition(op.Value); x != nil {
				e = &equality{collatable: x.collatable}
			}
		case "$in", "$all":
			arr, _ := op.Value.(bson.A)
			if len(arr) > 0 && !slices.ContainsFunc(arr, func(x any) bool { return condition(x) == nil }) {
				e = &equality{
					several:    op.Key == "$in" && len(arr) > 1,
					inexact:    op.Key == "$all" && len(arr) > 1,
					twice:      op.Key == "$all" && len(arr) > 1,
					collatable: slices.ContainsFunc(arr, func(x any) bool { return condition(x).collatable }),
				}
			}
		}
		switch {
		case e == nil:
		case out == nil || (out.several && !e.several):
			out = e
		case !out.several && !e.several:
			out.inexact, out.twice = true, true
		}
	}
	return out
}

// nullPoint reports whether a condition that is no equality bounds the
// field to the null point (see equality.null): $exists: false, $not of
// $exists: true, $gte: null or $lte: null, alone or with other operators
// (which can only narrow the point to nothing).
func nullPoint(v any) bool {
	d, _ := v.(bson.D)
	for _, op := range d {
		switch op.Key {
		case "$exists":
			if !truthy(op.Value) {
				return true
			}
		case "$gte", "$lte":
			if op.Value == nil {
				return true
			}
		case "$not":
			if child, _ := op.Value.(bson.D); len(child) == 1 && child[0].Key == "$exists" && truthy(child[0].Value) {
				return true
			}
		}
	}
	return false
}

// exactID reports whether the filter matches _id by one equality, which
// a non-simple collation does not make inexact.
func exactID(m match) bool {
	e := m.eq["_id"]
	return e != nil && !e.several && !m.idCollated
}

// Cluster is a sharded cluster as the routing rules see it.
type Cluster struct {
	// Version is mongos's version: the rules changed in 5.1 and 7.1.
	Version patterns.Version
	// FCV is the cluster's featureCompatibilityVersion; the zero value
	// means Version's (an upgrade finished). The writes without the shard
	// key of 7.1 need both the binaries and the FCV at 7.1 or later: a
	// cluster upgraded to 7.1 or 8.0 whose FCV is still 7.0 routes as 7.0.
	FCV patterns.Version
	// Keys maps a collection's name to its shard key; a collection not in
	// the map is unsharded, and every command on it goes to one shard (its
	// primary shard).
	Keys map[string]Key
}

// Clusters returns the clusters whose rules differ, each with the shard
// keys keys: MongoDB 6.0, 7.0, 7.1 with its FCV at 7.0 and at 7.1, and
// 8.0 with its FCV at 7.0 and at 8.0. A test that routes what a
// repository sent routes it on each.
func Clusters(keys map[string]Key) []Cluster {
	v := func(major, minor int) patterns.Version { return patterns.Version{Major: major, Minor: minor} }
	return []Cluster{
		{Version: v(6, 0), Keys: keys},
		{Version: v(7, 0), Keys: keys},
		{Version: v(7, 1), FCV: v(7, 0), Keys: keys},
		{Version: v(7, 1), Keys: keys},
		{Version: v(8, 0), FCV: v(7, 0), Keys: keys},
		{Version: v(8, 0), Keys: keys},
	}
}

// fcv is the featureCompatibilityVersion the rules read.
func (c Cluster) fcv() patterns.Version {
	if c.FCV == (patterns.Version{}) {
		return c.Version
	}
	return c.FCV
}

// String names the version, the FCV when it is not the version's, and
// the shard keys, collections in order: MongoDB 6.0 with items sharded
// on {"parent": 1}; MongoDB 8.0 (FCV 7.0) with ....
func (c Cluster) String() string {
	names := slices.Sorted(maps.Keys(c.Keys))
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + " sharded on " + c.Keys[n].String()
	}
	fcv := ""
	if f := c.fcv(); f.Major != c.Version.Major || f.Minor != c.Version.Minor {
		fcv = fmt.Sprintf(" (FCV %d.%d)", f.Major, f.Minor)
	}
	return fmt.Sprintf("MongoDB %d.%d%s with %s", c.Version.Major, c.Version.Minor, fcv, strings.Join(parts, ", "))
}

// WritesWithoutShardKey reports whether single writes and findAndModify
// without the shard key are accepted, by a two-phase write: mongos 7.1+
// with the FCV at 7.1+ (the FCV enables the protocol's feature flag).
func (c Cluster) WritesWithoutShardKey() bool {
	return c.Version.AtLeast(7, 1) && c.fcv().AtLeast(7, 1)
}

// Route says where cmd goes on c. cmd is a command as the driver encodes
// it: its first field names the command and the collection. Commands that
// do not read or write documents of a collection (hello, getMore,
// listIndexes, drop...) go to one shard: a cursor's getMore follows its
// find. For commands of several statements (update, delete, insert), the
// worst statement's route is returned, its Why naming the statement.
func (c Cluster) Route(cmd bson.Raw) (Route, error) {
	var d bson.D
	if err := bson.Unmarshal(cmd, &d); err != nil {
		return Route{}, errs.Invalid("command: %v", err)
	}
	if len(d) == 0 {
		return Route{}, errs.Invalid("empty command")
	}
	name := d[0].Key
	coll, _ := d[0].Value.(string)
	key := c.Keys[coll]
	get := func(name string) any { return field(d, name) }
	switch name {
	case "find", "count", "distinct":
		if key == nil {
			return Route{OneShard, 0, "the collection is not sharded"}, nil
		}
		f := "filter"
		if name != "find" {
			f = "query"
		}
		filter, _ := get(f).(bson.D)
		return key.filter(filter, collationOf(d)), nil
	case "aggregate":
		pipeline, _ := get("pipeline").(bson.A)
		return c.aggregate(key, pipeline, collationOf(d)), nil
	case "insert":
		docs, _ := get("documents").(bson.A)
		if key != nil {
			for i, doc := range docs {
				d, _ := doc.(bson.D)
				if path := key.array(d); path != "" {
					return Route{Refused, 61, fmt.Sprintf("document %d holds an array at the shard-key field %s (Shard key cannot contain array values or array descendants)", i, path)}, nil
				}
			}
		}
		if key == nil || len(docs) <= 1 {
			return Route{OneShard, 0, "an insert goes to the shard of its document's key"}, nil
		}
		if key.same(docs) {
			return Route{OneShard, 0, fmt.Sprintf("%d documents with one shard-key value go to its shard", len(docs))}, nil
		}
		return Route{SomeShards, 0, fmt.Sprintf("%d documents go each to the shard of its key", len(docs))}, nil
	case "update":
		stmts, _ := get("updates").(bson.A)
		return each(stmts, func(s bson.D) Route { return c.update(key, s) }), nil
	case "delete":
		stmts, _ := get("deletes").(bson.A)
		return each(stmts, func(s bson.D) Route { return c.delete(key, s) }), nil
	case "findAndModify", "findandmodify":
		return c.findAndModify(key, d), nil
	case "createIndexes":
		idx, _ := get("indexes").(bson.A)
		return each(idx, func(s bson.D) Route { return createIndex(key, s) }), nil
	}
	return Route{OneShard, 0, fmt.Sprintf("%s reads or writes no documents", name)}, nil
}

// same reports whether every document holds the same values of the key's
// fields (a missing field is null, as mongos reads it).
func (k Key) same(docs bson.A) bool {
	var first []byte
	for i, doc := range docs {
		d, _ := doc.(bson.D)
		values := make(bson.D, len(k))
		for j, f := range k {
			values[j] = bson.E{Key: f.Path, Value: lookup(d, f.Path)}
		}
		b, err := bson.Marshal(values)
		if err != nil {
			return false
		}
		if i == 0 {
			first = b
		} else if !bytes.Equal(first, b) {
			return false
		}
	}
	return true
}

// array returns the first key field of d that is an array or lies
// inside one ("" when none): mongos cannot extract the key of such a
// document.
func (k Key) array(d bson.D) string {
	for _, f := range k {
		cur := d
		for part := range strings.SplitSeq(f.Path, ".") {
			v := field(cur, part)
			if _, ok := v.(bson.A); ok {
				return f.Path
			}
			if cur, _ = v.(bson.D); cur == nil {
				break
			}
		}
	}
	return ""
}

// lookup returns the value at a dotted path of d, nil when absent.
func lookup(d bson.D, path string) any {
	v, _ := lookupOK(d, path)
	return v
}

// lookupOK returns the value at a dotted path of d, and whether d has it.
func lookupOK(d bson.D, path string) (any, bool) {
	head, rest, dotted := strings.Cut(path, ".")
	i := slices.IndexFunc(d, func(e bson.E) bool { return e.Key == head })
	if i < 0 {
		return nil, false
	}
	if !dotted {
		return d[i].Value, true
	}
	sub, ok := d[i].Value.(bson.D)
	if !ok {
		return nil, false
	}
	return lookupOK(sub, rest)
}

// each routes every statement and returns the worst route.
func each(stmts bson.A, route func(bson.D) Route) Route {
	out := Route{OneShard, 0, "no statement"}
	for i, s := range stmts {
		sd, _ := s.(bson.D)
		r := route(sd)
		if len(stmts) > 1 {
			r.Why = fmt.Sprintf("statement %d: %s", i, r.Why)
		}
		if i == 0 {
			out = r
		}
		out = worse(out, r)
	}
	return out
}

// collationOf returns the collation of a command or a statement (nil: the
// simple one).
func collationOf(d bson.D) bson.D {
	c, _ := field(d, "collation").(bson.D)
	return c
}

func field(d bson.D, name string) any {
	for _, e := range d {
		if e.Key == name {
			return e.Value
		}
	}
	return nil
}

func truthy(v any) bool {
	switch b := v.(type) {
	case bool:
		return b
	default:
		n, ok := number(v)
		return ok && n != 0
	}
}

// update routes one statement of an update command.
func (c Cluster) update(key Key, s bson.D) Route {
	if key == nil {
		return Route{OneShard, 0, "the collection is not sharded"}
	}
	q, _ := field(s, "q").(bson.D)
	coll := collationOf(s)
	u := field(s, "u")
	multi := truthy(field(s, "multi"))
	upsert := truthy(field(s, "upsert"))
	m := key.matchIn(q, coll, false)
	full := key.full(m)
	if changes, path := changesKey(key, u, m); changes {
		switch {
		case multi:
			return Route{Refused, 72, fmt.Sprintf("a multi-update cannot change the shard-key field %s", path)}
		case !full:
			return Route{Refused, 31025, fmt.Sprintf("an update of the shard-key field %s needs the full shard key in its filter", path)}
		}
	}
	if upsert && !full && (multi || !c.WritesWithoutShardKey()) {
		return Route{Refused, 61, "an upsert needs the exact shard key in its filter, one equality on every shard-key field (Failed to target upsert by query :: could not extract exact shard key)"}
	}
	if r, ok := upsertTwice(key, m, upsert, u); ok {
		return r
	}
	if multi {
		return key.filter(q, coll)
	}
	if r, ok := oneShard(key, q, coll, full); ok {
		return r
	}
	if upsert {
		return twoPhase(key, q, coll, false, "an upsert without the full shard key")
	}
	if repl, ok := u.(bson.D); ok && (len(repl) == 0 || !strings.HasPrefix(repl[0].Key, "$")) && (exactID(m) || !c.WritesWithoutShardKey()) {
		return replacement(key, repl, m)
	}
	return c.single(key, q, coll, m, 72, "a single update")
}

// upsertTwice refuses an upsert whose filter matches a path by equality
// twice: when nothing matches, the shard (or, in a two-phase write, mongos:
// write_without_shard_key_util.cpp generateUpsertDocument) builds the
// document to insert from the filter's equalities and fails (54
// NotSingleValueField, "cannot infer query fields to set, path 'a' is
// matched twice"; update_driver.cpp populateDocumentWithQueryFields,
// path_support.cpp checkEqualityConflicts). A replacement takes only _id
// and the shard key's fields from the filter (its immutable paths).
func upsertTwice(key Key, m match, upsert bool, u any) (Route, bool) {
	if !upsert {
		return Route{}, false
	}
	var paths []string // every path, for an update by operators
	if repl, ok := u.(bson.D); ok && (len(repl) == 0 || !strings.HasPrefix(repl[0].Key, "$")) {
		paths = append(key.paths(len(key)), "_id")
	}
	if p := m.twice(paths); p != "" {
		return Route{Refused, 54, fmt.Sprintf("an upsert whose filter matches %s by equality twice cannot build the document it inserts (cannot infer query fields to set, path '%s' is matched twice): refused whenever nothing matches", p, p)}, true
	}
	return Route{}, false
}

// twoPhase routes a write by the two-phase protocol of 7.1 (mongodb/mongo
// write_without_shard_key_util.h runTwoPhaseWriteProtocol): its read phase
// sends the filter to the shards it reaches (a subset of shards for a
// partial shard key), its write phase to the one shard that holds the
// matched document, both in an internal transaction.
func twoPhase(key Key, q, collation bson.D, hashedTargetable bool, what string) Route {
	r := key.route(q, collation, hashedTargetable)
	return Route{r.Target, 0, what + " is routed by a two-phase write (7.1+), whose read phase goes where its filter goes: " + r.Why}
}

// replacement routes a replacement whose filter does not hold the full
// shard key, where mongos targets it by the shard key of the replacement
// document (up to an FCV of 7.0; from 7.1 still when the filter holds an
// exact _id): each key field missing from the replacement is taken as
// null, and a missing _id as the filter's exact _id. A replacement that
// lacks a key field other than that _id is sent to the shard of the null
// value: it matches nothing there, or, on the shard that holds the
// document, would change its key (31025, "Shard key update is not allowed
// without specifying the full shard key in the query"); only a stored
// document that lacks the field too is replaced. The route says it is
// refused. A missing _id is the exception: the replacement keeps the
// document's _id, so it changes no key; it goes to the one shard of the
// null _id (hash(null) under a hashed _id) and matches nothing on the
// others.
func replacement(key Key, repl bson.D, m match) Route {
	why := "the replacement document holds the shard key (mongos targets a replacement by it)"
	for _, f := range key {
		if f.Path == "_id" && exactID(m) {
			continue // taken from the filter
		}
		_, ok := lookupOK(repl, f.Path)
		if !ok && f.Path == "_id" {
			why = "the replacement lacks _id, which mongos targets as null: the shard of the null _id, where the replacement keeps the matched document's _id (it matches nothing on the other shards)"
			continue
		}
		if !ok {
			return Route{Refused, 31025, fmt.Sprintf("the replacement lacks the shard-key field %s, and mongos targets a replacement by the key it holds (a missing field as null): it matches nothing on that shard, or would change the key of the document it matches (Shard key update is not allowed without specifying the full shard key in the query)", f.Path)}
		}
	}
	return Route{OneShard, 0, why}
}

// oneShard routes a single write (update or delete, not findAndModify)
// whose filter reaches one shard: mongos sends it there whatever the
// version, before any other rule (collection_routing_info_targeter.cpp
// targetUpdate, targetDelete: "return immediately if we are able to
// target a single shard"), also when it extracts no exact key from the
// filter (an $or of one key, an equality given twice). full: the filter
// holds the exact key.
func oneShard(key Key, q, collation bson.D, full bool) (Route, bool) {
	if full {
		return Route{OneShard, 0, "equality on every shard-key field"}, true
	}
	if r := key.filter(q, collation); r.Target == OneShard {
		return Route{OneShard, 0, "the filter's bounds reach one shard (" + r.Why + ")"}, true
	}
	return Route{}, false
}

// single routes a single update or delete whose filter lacks the full
// shard key and reaches several shards.
func (c Cluster) single(key Key, q, collation bson.D, m match, code int32, what string) Route {
	switch {
	case c.WritesWithoutShardKey() && !exactID(m):
		return twoPhase(key, q, collation, false, what+" without the full shard key")
	case exactID(m):
		r := key.filter(q, collation)
		return Route{r.Target, 0, what + " by exact _id without the shard key is sent to the shards its filter reaches (targetUpdate, targetDelete): " + r.Why}
	case m.eq[key[0].Path] != nil || m.ranged[key[0].Path]:
		return Route{Refused, code, what + " by part of the shard key (before 7.1, or an FCV below 7.1) is accepted only while the chunks it may reach sit on one shard, and refused once the balancer spreads them: refused, as it is in production"}
	}
	return Route{Refused, code, what + " on a sharded collection must contain the shard key or an exact match on _id (before 7.1, or an FCV below 7.1)" + m.why("_id")}
}

// changesKey reports whether an update document (operators, replacement
// or pipeline) may change a shard-key field: an operator that names a key
// field, a path inside one or a parent of one; a replacement that lacks a
// key field its filter matches (one that holds it is taken to keep it:
// the values are the caller's, a change of value is not seen here).
func changesKey(key Key, u any, m match) (bool, string) {
	touches := func(p string) (bool, string) {
		for _, f := range key {
			if p == f.Path || strings.HasPrefix(f.Path, p+".") || strings.HasPrefix(p, f.Path+".") {
				return true, f.Path
			}
		}
		return false, ""
	}
	switch doc := u.(type) {
	case bson.D:
		if len(doc) > 0 && strings.HasPrefix(doc[0].Key, "$") {
			for _, op := range doc {
				if op.Key == "$setOnInsert" {
					continue
				}
				fields, _ := op.Value.(bson.D)
				for _, f := range fields {
					if ok, p := touches(f.Key); ok {
						return true, p
					}
					if op.Key == "$rename" {
						if to, _ := f.Value.(string); to != "" {
							if ok, p := touches(to); ok {
								return true, p
							}
						}
					}
				}
			}
			return false, ""
		}
		// A replacement whose filter holds the key keeps it only where it
		// holds every key field; without the key in the filter, mongos
		// targets the replacement by the key it holds.
		// A replacement without _id keeps the document's; one by the
		// null point of a field it lacks keeps the field missing.
		for _, f := range key {
			if _, ok := lookupOK(doc, f.Path); !ok && m.eq[f.Path] != nil && !m.eq[f.Path].null && f.Path != "_id" {
				return true, f.Path
			}
		}
		return false, ""
	case bson.A:
		for _, stage := range doc {
			sd, _ := stage.(bson.D)
			for _, st := range sd {
				switch st.Key {
				case "$set", "$addFields", "$replaceWith", "$replaceRoot", "$unset", "$project":
					fields, _ := st.Value.(bson.D)
					if st.Key == "$replaceWith" || st.Key == "$replaceRoot" {
						return true, key[0].Path
					}
					for _, f := range fields {
						if ok, p := touches(f.Key); ok {
							return true, p
						}
					}
					if names, ok := st.Value.(bson.A); ok {
						for _, n := range names {
							if s, _ := n.(string); s != "" {
								if ok, p := touches(s); ok {
									return true, p
								}
							}
						}
					}
					if s, ok := st.Value.(string); ok {
						if ok, p := touches(s); ok {
							return true, p
						}
					}
				}
			}
		}
	}
	return false, ""
}

// delete routes one statement of a delete command.
func (c Cluster) delete(key Key, s bson.D) Route {
	if key == nil {
		return Route{OneShard, 0, "the collection is not sharded"}
	}
	q, _ := field(s, "q").(bson.D)
	coll := collationOf(s)
	if n, _ := number(field(s, "limit")); n == 0 {
		return key.filter(q, coll)
	}
	m := key.matchIn(q, coll, false)
	if r, ok := oneShard(key, q, coll, key.full(m)); ok {
		return r
	}
	return c.single(key, q, coll, m, 61, "a single delete")
}

// findAndModify routes a findAndModify command.
func (c Cluster) findAndModify(key Key, d bson.D) Route {
	if key == nil {
		return Route{OneShard, 0, "the collection is not sharded"}
	}
	q, _ := field(d, "query").(bson.D)
	coll := collationOf(d)
	m := key.matchIn(q, coll, true)
	full := key.full(m)
	if changes, path := changesKey(key, field(d, "update"), m); changes && field(d, "update") != nil && !full {
		return Route{Refused, 31025, fmt.Sprintf("an update of the shard-key field %s needs the full shard key in its filter", path)}
	}
	if r, ok := upsertTwice(key, m, truthy(field(d, "upsert")), field(d, "update")); ok {
		return r
	}
	switch {
	case full:
		return Route{OneShard, 0, "equality on every shard-key field"}
	case c.WritesWithoutShardKey():
		return twoPhase(key, q, coll, true, "findAndModify without the exact shard key")
	}
	r := key.route(q, coll, true)
	if r.Target == OneShard {
		return Route{OneShard, 0, "the filter's bounds reach one shard (cluster_find_and_modify_cmd.cpp targetSingleShard; SERVER-44422, in 6.0 and 7.0 patch releases since 2023): " + r.Why}
	}
	return Route{Refused, 61, "findAndModify on a sharded collection must reach one shard by its filter (before 7.1; an _id alone is not enough; a part of the key is accepted only while its chunks sit on one shard, refused once the balancer spreads them): " + r.Why}
}

// createIndex routes one index of createIndexes: a unique index must be
// prefixed by the shard key.
func createIndex(key Key, s bson.D) Route {
	if key == nil || !truthy(field(s, "unique")) {
		return Route{OneShard, 0, "an index is built on every shard that owns chunks"}
	}
	k, _ := field(s, "key").(bson.D)
	if len(k) > 0 && k[0].Key == "_id" {
		return Route{OneShard, 0, "a unique index that starts with _id, unique itself, suits every shard key"}
	}
	for i, f := range key {
		if i >= len(k) || k[i].Key != f.Path {
			return Route{Refused, 67, fmt.Sprintf("a unique index must be prefixed by the shard key %s", key)}
		}
	}
	return Route{OneShard, 0, "the unique index is prefixed by the shard key"}
}

// aggregate routes a pipeline on a collection sharded on key (nil:
// unsharded).
func (c Cluster) aggregate(key Key, pipeline bson.A, collation bson.D) Route {
	out := Route{OneShard, 0, "the collection is not sharded"}
	if key != nil {
		out = Route{EveryShard, 0, "the pipeline does not start with a $match"}
	}
	for i, stage := range pipeline {
		sd, _ := stage.(bson.D)
		if len(sd) == 0 {
			continue
		}
		st := sd[0]
		arg, _ := st.Value.(bson.D)
		switch st.Key {
		case "$match":
			if i == 0 && key != nil {
				out = key.filter(arg, collation)
			}
		case "$lookup", "$graphLookup":
			from, _ := field(arg, "from").(string)
			if c.Keys[from] != nil && !c.Version.AtLeast(5, 1) {
				return Route{Refused, 28769, fmt.Sprintf("%s from the sharded collection %s needs 5.1", st.Key, from)}
			}
		case "$out":
			to, _ := st.Value.(string)
			if to == "" {
				to, _ = field(arg, "coll").(string)
			}
			if c.Keys[to] != nil {
				return Route{Refused, 28769, fmt.Sprintf("$out cannot write to the sharded collection %s", to)}
			}
		case "$merge":
			into, _ := st.Value.(string)
			if into == "" {
				into, _ = field(arg, "into").(string)
			}
			k := c.Keys[into]
			if k == nil {
				continue
			}
			// Without "on", $merge into a sharded collection matches on
			// the shard key and _id.
			on := append(k.paths(len(k)), "_id")
			switch v := field(arg, "on").(type) {
			case string:
				on = []string{v}
			case bson.A:
				on = nil
				for _, x := range v {
					s, _ := x.(string)
					on = append(on, s)
				}
			}
			for _, f := range k {
				if !slices.Contains(on, f.Path) {
					return Route{Refused, 51190, fmt.Sprintf("$merge into the sharded collection %s needs \"on\" to hold the shard-key field %s", into, f.Path)}
				}
			}
		}
	}
	return out
}
