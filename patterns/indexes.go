package patterns

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
)

// MaxDocumentSize is the largest BSON document MongoDB stores: 16 MiB.
const MaxDocumentSize = 16 * 1024 * 1024

// Index is one index that a repository's queries need, on the collection
// that holds it. Repositories report theirs from an Indexes method (a
// repository may span several collections, so a bare [mongo.IndexModel]
// would not say where it goes); [EnsureIndexes] creates them.
type Index struct {
	Collection *mongo.Collection
	Model      mongo.IndexModel
	// EveryShard, when not empty, says why the queries this index serves
	// read the whole collection by design (bucket's DeleteBefore, which
	// names no series; versioning's MigrateAll, which scans by version): on
	// a sharded cluster they go to every shard under any good shard key,
	// and the doctor does not report them
	// (doctor.RuleShardKeyDeclaredQueries).
	EveryShard string
}

// EnsureIndexes creates the given indexes, idempotently: an index that
// already exists with the same key and options is left as it is, whatever
// its name (an index created by hand under another name is the index).
// Per distinct collection, in the order the collections first appear, it
// sends one listIndexes, then one createIndexes of the indexes that do not
// exist yet (none when all do), or one per index on a server without
// [FeatureCreateManyIndexes] (FerretDB 1.x); before the first, it asks
// [Capabilities] (cached per client).
//
// Keys compare field by field in order, numbers by value (1, 1.0 and
// NumberLong(1) are one direction); options compare on what makes an
// index serve other queries or refuse other writes: unique, sparse,
// expireAfterSeconds, partialFilterExpression, and the collation fields
// given. An existing index with the same key and other options is an
// error wrapping [ErrInvalid] that names the index and each option that
// differs: drop it, or change the declared index, and run again; nothing
// is created for that collection or the ones after it. An index of
// another key under the same name is the server's error
// (IndexKeySpecsConflict), returned as is, naming the collection.
func EnsureIndexes(ctx context.Context, indexes ...Index) error {
	type group struct {
		coll   *mongo.Collection
		models []mongo.IndexModel
	}
	var groups []*group
	for i, ix := range indexes {
		if ix.Collection == nil {
			return fmt.Errorf("patterns: EnsureIndexes: index %d has no collection: %w", i, ErrInvalid)
		}
		if ix.Model.Keys == nil {
			return fmt.Errorf("patterns: EnsureIndexes: index %d on %s has no keys: %w", i, ix.Collection.Name(), ErrInvalid)
		}
		at := slices.IndexFunc(groups, func(g *group) bool {
			return g.coll.Name() == ix.Collection.Name() && g.coll.Database().Name() == ix.Collection.Database().Name()
		})
		if at < 0 {
			groups = append(groups, &group{coll: ix.Collection})
			at = len(groups) - 1
		}
		groups[at].models = append(groups[at].models, ix.Model)
	}
	if len(groups) == 0 {
		return nil
	}
	srv, err := Capabilities(ctx, groups[0].coll.Database().Client())
	if err != nil {
		return fmt.Errorf("patterns: EnsureIndexes: %w", err)
	}
	for _, g := range groups {
		missing, err := missingIndexes(ctx, g.coll, g.models)
		if err != nil {
			return fmt.Errorf("patterns: EnsureIndexes: %s.%s: %w", g.coll.Database().Name(), g.coll.Name(), err)
		}
		if len(missing) == 0 {
			continue
		}
		batches := [][]mongo.IndexModel{missing}
		if !srv.Has(FeatureCreateManyIndexes) {
			batches = batches[:0]
			for _, m := range missing {
				batches = append(batches, []mongo.IndexModel{m})
			}
		}
		for _, b := range batches {
			if _, err := g.coll.Indexes().CreateMany(ctx, b); err != nil {
				return fmt.Errorf("patterns: EnsureIndexes: %s.%s: %w", g.coll.Database().Name(), g.coll.Name(), err)
			}
		}
	}
	return nil
}

// missingIndexes returns the models of coll's wanted indexes that coll
// does not have yet (one listIndexes; a collection that does not exist
// has none), or an error wrapping ErrInvalid when an index of the same
// key exists with other options.
func missingIndexes(ctx context.Context, coll *mongo.Collection, models []mongo.IndexModel) ([]mongo.IndexModel, error) {
	cur, err := coll.Indexes().List(ctx)
	if err != nil {
		return nil, err
	}
	var have []bson.Raw
	if err := cur.All(ctx, &have); err != nil {
		return nil, err
	}
	var missing []mongo.IndexModel
	for _, m := range models {
		key, err := bson.Marshal(m.Keys)
		if err != nil {
			return nil, fmt.Errorf("index keys %v: %w: %w", m.Keys, err, ErrInvalid)
		}
		key = listedKey(key)
		want, err := indexOptionsOf(m)
		if err != nil {
			return nil, err
		}
		// Every index of the key: MongoDB keeps several on one key when
		// their partial filters or collations differ.
		var conflict bson.Raw
		var diff []string
		found := false
		for _, ix := range have {
			if !sameIndexKey(bson.Raw(key), ix.Lookup("key")) {
				continue
			}
			d := indexOptionsDiff(want, ix)
			if len(d) == 0 {
				found = true
				break
			}
			if conflict == nil && !onlyFilterOrCollation(d) {
				conflict, diff = ix, d
			}
		}
		switch {
		case found:
		case conflict != nil:
			return nil, fmt.Errorf("index %s exists as %q with other options (%s): drop it, or declare the index with its options, then run again: %w",
				bsonid.Text(bson.Raw(key)), conflict.Lookup("name").StringValue(), strings.Join(diff, "; "), ErrInvalid)
		default:
			missing = append(missing, m)
			// A later declaration of the same index (two repositories on
			// one collection) finds this one, as if it existed.
			listed, err := listedIndex(key, want)
			if err != nil {
				return nil, err
			}
			have = append(have, listed)
		}
	}
	return missing, nil
}

// listedKey returns a declared key as listIndexes lists it: a text index's
// fields of value "text" become {_fts: "text", _ftsx: 1}, after the
// fields before them, before the others.
func listedKey(key bson.Raw) bson.Raw {
	elems, err := key.Elements()
	if err != nil {
		return key
	}
	text := slices.IndexFunc(elems, func(e bson.RawElement) bool {
		s, ok := e.Value().StringValueOK()
		return ok && s == "text"
	})
	if text < 0 {
		return key
	}
	out := bson.D{}
	for _, e := range elems[:text] {
		out = append(out, bson.E{Key: e.Key(), Value: e.Value()})
	}
	out = append(out, bson.E{Key: "_fts", Value: "text"}, bson.E{Key: "_ftsx", Value: int32(1)})
	for _, e := range elems[text:] {
		if s, ok := e.Value().StringValueOK(); !ok || s != "text" {
			out = append(out, bson.E{Key: e.Key(), Value: e.Value()})
		}
	}
	b, err := bson.Marshal(out)
	if err != nil {
		return key
	}
	return b
}

// listedIndex is a declared index as listIndexes would list it, for the
// options indexOptionsDiff compares.
func listedIndex(key bson.Raw, o options.IndexOptions) (bson.Raw, error) {
	d := bson.D{{Key: "key", Value: key}, {Key: "name", Value: "(declared)"}}
	if o.Unique != nil && *o.Unique {
		d = append(d, bson.E{Key: "unique", Value: true})
	}
	if o.Sparse != nil && *o.Sparse {
		d = append(d, bson.E{Key: "sparse", Value: true})
	}
	if o.ExpireAfterSeconds != nil {
		d = append(d, bson.E{Key: "expireAfterSeconds", Value: *o.ExpireAfterSeconds})
	}
	if o.PartialFilterExpression != nil {
		d = append(d, bson.E{Key: "partialFilterExpression", Value: o.PartialFilterExpression})
	}
	if o.Collation != nil {
		d = append(d, bson.E{Key: "collation", Value: o.Collation})
	}
	b, err := bson.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("index options: %w: %w", err, ErrInvalid)
	}
	return b, nil
}

// onlyFilterOrCollation reports whether every difference is in the
// partial filter or the collation: another index of the same key, which
// MongoDB keeps beside the first.
func onlyFilterOrCollation(diff []string) bool {
	for _, d := range diff {
		if !strings.HasPrefix(d, "partialFilterExpression:") && !strings.HasPrefix(d, "collation") {
			return false
		}
	}
	return true
}

// indexOptionsOf applies the model's options.
func indexOptionsOf(m mongo.IndexModel) (options.IndexOptions, error) {
	var o options.IndexOptions
	if m.Options == nil {
		return o, nil
	}
	for _, set := range m.Options.List() {
		if err := set(&o); err != nil {
			return o, fmt.Errorf("index options: %w: %w", err, ErrInvalid)
		}
	}
	return o, nil
}

// sameIndexKey reports whether two key documents name the same fields in
// the same order with equal values (numbers by value, as the server
// compares index keys).
func sameIndexKey(want bson.Raw, have bson.RawValue) bool {
	got, ok := have.DocumentOK()
	if !ok {
		return false
	}
	a, errA := want.Elements()
	b, errB := got.Elements()
	if errA != nil || errB != nil || len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key() != b[i].Key() || !bsonid.Equal(a[i].Value(), b[i].Value()) {
			return false
		}
	}
	return true
}

// indexOptionsDiff lists the options in which the existing index ix
// differs from want, each as "name: has X, declared Y".
func indexOptionsDiff(want options.IndexOptions, ix bson.Raw) []string {
	var diff []string
	flag := func(name string, p *bool) {
		w := p != nil && *p
		h := false
		if v, err := ix.LookupErr(name); err == nil {
			h, _ = v.BooleanOK()
		}
		if w != h {
			diff = append(diff, fmt.Sprintf("%s: has %t, declared %t", name, h, w))
		}
	}
	flag("unique", want.Unique)
	flag("sparse", want.Sparse)
	var ttl any
	if want.ExpireAfterSeconds != nil {
		ttl = *want.ExpireAfterSeconds
	}
	diff = appendValueDiff(diff, "expireAfterSeconds", ttl, ix)
	diff = appendValueDiff(diff, "partialFilterExpression", want.PartialFilterExpression, ix)
	if want.Collation != nil {
		c, err := bson.Marshal(want.Collation)
		if err != nil {
			return append(diff, fmt.Sprintf("collation: %v", err))
		}
		elems, _ := bson.Raw(c).Elements()
		for _, e := range elems {
			h, err := ix.LookupErr("collation", e.Key())
			if err != nil || !bsonid.Equal(h, e.Value()) {
				diff = append(diff, fmt.Sprintf("collation.%s: has %s, declared %s", e.Key(), describeOption(h, err), bsonid.Text(e.Value())))
			}
		}
	} else if h, err := ix.LookupErr("collation", "locale"); err == nil && h.StringValue() != "simple" {
		diff = append(diff, fmt.Sprintf("collation: has locale %s, declared none", bsonid.Text(h)))
	}
	return diff
}

// appendValueDiff compares an option given as a Go value (nil: absent)
// with the existing index's field of that name.
func appendValueDiff(diff []string, name string, want any, ix bson.Raw) []string {
	h, err := ix.LookupErr(name)
	if want == nil {
		if err == nil {
			diff = append(diff, fmt.Sprintf("%s: has %s, declared none", name, bsonid.Text(h)))
		}
		return diff
	}
	t, data, merr := bson.MarshalValue(want)
	if merr != nil {
		return append(diff, fmt.Sprintf("%s: %v", name, merr))
	}
	if w := (bson.RawValue{Type: t, Value: data}); err != nil || !bsonid.Equal(h, w) {
		diff = append(diff, fmt.Sprintf("%s: has %s, declared %s", name, describeOption(h, err), bsonid.Text(w)))
	}
	return diff
}

// describeOption writes an existing index's option, "none" when absent.
func describeOption(v bson.RawValue, err error) string {
	if err != nil {
		return "none"
	}
	return bsonid.Text(v)
}
