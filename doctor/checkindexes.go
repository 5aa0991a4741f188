package doctor

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/patterns"
)

// CheckIndexes reports each index a repository declares (the output of
// its Indexes method) that the server does not have, as a missing-index
// finding: one listIndexes command per distinct collection, reading only.
//
// An existing index matches a declared one when their keys are the same
// fields in the same order with the same directions, compared by value (1,
// 1.0 and int64(1) are one direction; a number other than 1 and -1, such
// as 2, differs from them, as the server tells those keys apart, though
// two such numbers are taken as one; "hashed", "2dsphere" and text
// fields by name), and their options agree: unique, sparse,
// expireAfterSeconds (TTL), partialFilterExpression (compared by value)
// and the collation's locale and strength; a hidden index does not match,
// since queries cannot use it. Names are not compared. An index with the
// declared key but other options is reported as differing, with the
// options that differ. A missing unique index is critical (nothing
// prevents duplicates); any other missing index is a warning.
//
// A declared index without a collection or keys, or whose keys are an
// unordered map of several fields, is an error wrapping
// [patterns.ErrInvalid].
func CheckIndexes(ctx context.Context, idx ...patterns.Index) (Report, error) {
	s, err := Options{}.validate("CheckIndexes")
	if err != nil {
		return Report{}, err
	}
	c := newChecker(nil, s)
	if err := c.missingIndexes(ctx, idx); err != nil {
		return Report{}, fmt.Errorf("doctor: CheckIndexes: %w", err)
	}
	return c.report(), nil
}

// wantIndex is a declared index, read from its mongo.IndexModel.
type wantIndex struct {
	key  []keyField
	opts options.IndexOptions
}

// wantOf reads a declared index.
func wantOf(m mongo.IndexModel) (wantIndex, error) {
	if m.Keys == nil {
		return wantIndex{}, fmt.Errorf("no keys: %w", patterns.ErrInvalid)
	}
	if rv := reflect.ValueOf(m.Keys); rv.Kind() == reflect.Map && rv.Len() > 1 {
		return wantIndex{}, fmt.Errorf("keys %v are a map of %d fields, whose order is undefined: %w", m.Keys, rv.Len(), patterns.ErrInvalid)
	}
	raw, err := bson.Marshal(m.Keys)
	if err != nil {
		return wantIndex{}, fmt.Errorf("keys %v: %v: %w", m.Keys, err, patterns.ErrInvalid)
	}
	key, err := parseKey(raw)
	if err != nil || len(key) == 0 {
		return wantIndex{}, fmt.Errorf("keys %v: %v: %w", m.Keys, err, patterns.ErrInvalid)
	}
	w := wantIndex{key: key}
	if m.Options != nil {
		for _, set := range m.Options.List() {
			if err := set(&w.opts); err != nil {
				return wantIndex{}, fmt.Errorf("options: %v: %w", err, patterns.ErrInvalid)
			}
		}
	}
	return w, nil
}

// serverKey is the key as the server lists it: MongoDB stores the text
// fields of a text index as {_fts: "text", _ftsx: 1}, in place of the
// first text field, and their names in weights.
func (w wantIndex) serverKey() (key []keyField, textFields []string) {
	for _, k := range w.key {
		if k.Kind != "text" {
			key = append(key, k)
			continue
		}
		if textFields == nil {
			key = append(key, keyField{Path: "_fts", Kind: "text"}, keyField{Path: "_ftsx", Dir: 1})
		}
		textFields = append(textFields, k.Path)
	}
	return key, textFields
}

// name is the declared name, or the one MongoDB would generate.
func (w wantIndex) name() string {
	if w.opts.Name != nil {
		return *w.opts.Name
	}
	parts := make([]string, len(w.key))
	for i, k := range w.key {
		v := fmt.Sprint(k.Dir)
		if k.Kind != "" {
			v = k.Kind
		}
		parts[i] = k.Path + "_" + v
	}
	return strings.Join(parts, "_")
}

// differences lists the options in which an existing index with the
// declared key differs from the declaration; empty means it matches.
func (w wantIndex) differences(have indexSpec, textFields []string) []string {
	var d []string
	o := w.opts
	if deref(o.Unique) != have.Unique {
		d = append(d, fmt.Sprintf("unique: declared %t, found %t", deref(o.Unique), have.Unique))
	}
	if deref(o.Sparse) != have.Sparse {
		d = append(d, fmt.Sprintf("sparse: declared %t, found %t", deref(o.Sparse), have.Sparse))
	}
	switch {
	case o.ExpireAfterSeconds == nil && have.TTL != nil:
		d = append(d, fmt.Sprintf("expireAfterSeconds: declared none, found %d", *have.TTL))
	case o.ExpireAfterSeconds != nil && (have.TTL == nil || *have.TTL != int64(*o.ExpireAfterSeconds)):
		d = append(d, fmt.Sprintf("expireAfterSeconds: declared %d, found %s", *o.ExpireAfterSeconds, optInt(have.TTL)))
	}
	if diff := partialDifference(o.PartialFilterExpression, have.Partial); diff != "" {
		d = append(d, diff)
	}
	if diff := collationDifference(o.Collation, have.Collation); diff != "" {
		d = append(d, diff)
	}
	if have.Hidden {
		d = append(d, "hidden: found hidden, so queries cannot use it")
	}
	if textFields != nil {
		var weights []string
		if elems, err := have.Weights.Elements(); err == nil {
			for _, e := range elems {
				weights = append(weights, e.Key())
			}
		}
		slices.Sort(weights)
		want := slices.Sorted(slices.Values(textFields))
		if !slices.Equal(weights, want) {
			d = append(d, fmt.Sprintf("text fields: declared %s, found %s", strings.Join(want, ", "), strings.Join(weights, ", ")))
		}
	}
	return d
}

func deref(b *bool) bool { return b != nil && *b }

func optInt(p *int64) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprint(*p)
}

// partialDifference compares a declared partialFilterExpression with the
// one found, by value.
func partialDifference(want any, have bson.Raw) string {
	if want == nil {
		if have != nil {
			return fmt.Sprintf("partialFilterExpression: declared none, found %s", have)
		}
		return ""
	}
	raw, err := bson.Marshal(want)
	if err != nil {
		return fmt.Sprintf("partialFilterExpression: declared %v cannot be encoded: %v", want, err)
	}
	if have == nil || !equalValues(docValue(raw), docValue(have)) {
		return fmt.Sprintf("partialFilterExpression: declared %s, found %s", bson.Raw(raw), rawOrNone(have))
	}
	return ""
}

func rawOrNone(r bson.Raw) string {
	if r == nil {
		return "none"
	}
	return r.String()
}

// collationDifference compares the declared collation's locale and
// strength (3 when not set, as the server defaults) with the one found.
func collationDifference(want *options.Collation, have bson.Raw) string {
	haveLocale, _ := have.Lookup("locale").StringValueOK()
	if want == nil || want.Locale == "" || want.Locale == "simple" {
		if have != nil && haveLocale != "simple" {
			return fmt.Sprintf("collation: declared none, found %s", have)
		}
		return ""
	}
	wantStrength := want.Strength
	if wantStrength == 0 {
		wantStrength = 3
	}
	haveStrength := int(number(have.Lookup("strength")))
	if have == nil || haveLocale != want.Locale || haveStrength != wantStrength {
		return fmt.Sprintf("collation: declared locale %s strength %d, found %s", want.Locale, wantStrength, rawOrNone(have))
	}
	return ""
}

func docValue(r bson.Raw) bson.RawValue {
	return bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: r}
}

// equalValues compares two BSON values by value: numbers of any type by
// their value, documents field by field in order, arrays element by
// element, anything else byte for byte.
func equalValues(a, b bson.RawValue) bool {
	switch {
	case a.IsNumber() && b.IsNumber():
		return numberOf(a) == numberOf(b)
	case a.Type != b.Type:
		return false
	case a.Type == bson.TypeEmbeddedDocument || a.Type == bson.TypeArray:
		ae, errA := bson.Raw(a.Value).Elements()
		be, errB := bson.Raw(b.Value).Elements()
		if errA != nil || errB != nil || len(ae) != len(be) {
			return false
		}
		for i := range ae {
			if a.Type == bson.TypeEmbeddedDocument && ae[i].Key() != be[i].Key() {
				return false
			}
			if !equalValues(ae[i].Value(), be[i].Value()) {
				return false
			}
		}
		return true
	default:
		return string(a.Value) == string(b.Value)
	}
}

// missingIndexes applies the missing-index rule to declared indexes.
func (c *checker) missingIndexes(ctx context.Context, idx []patterns.Index) error {
	for i, ix := range idx {
		if ix.Collection == nil {
			return fmt.Errorf("index %d has no collection: %w", i, patterns.ErrInvalid)
		}
		w, err := wantOf(ix.Model)
		if err != nil {
			return fmt.Errorf("index %d on %s: %w", i, ix.Collection.Name(), err)
		}
		specs, exists, err := c.indexes(ctx, ix.Collection)
		if err != nil {
			return err
		}
		key, text := w.serverKey()
		var diffs []string
		found := false
		for _, have := range specs {
			if !slices.Equal(have.Key, key) {
				continue
			}
			d := w.differences(have, text)
			if len(d) == 0 {
				found, diffs = true, nil
				break
			}
			if diffs == nil {
				diffs = d
			}
		}
		if found {
			continue
		}
		sev := Warning
		if deref(w.opts.Unique) {
			sev = Critical
		}
		state, msg, remedy := "absent", fmt.Sprintf("declared index %s %s does not exist", w.name(), keyString(w.key)),
			"create it before the first write: patterns.EnsureIndexes(ctx, repo.Indexes()...)"
		switch {
		case !exists:
			state, msg = "collection absent", fmt.Sprintf("declared index %s %s does not exist: nor does the collection", w.name(), keyString(w.key))
		case diffs != nil:
			state = "differs: " + strings.Join(diffs, "; ")
			msg = fmt.Sprintf("index %s exists with other options: %s", keyString(w.key), strings.Join(diffs, "; "))
			remedy = "drop the existing index and create the declared one: patterns.EnsureIndexes(ctx, repo.Indexes()...)"
		}
		c.add(Finding{Rule: RuleMissingIndex, Severity: sev, Collection: ix.Collection.Name(), Index: w.name(),
			Message: msg,
			Evidence: Evidence{{"database", ix.Collection.Database().Name()}, {"key", keyString(w.key)},
				{"unique", deref(w.opts.Unique)}, {"found", state}},
			Remedy: remedy})
	}
	return nil
}
