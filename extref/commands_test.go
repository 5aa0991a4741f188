package extref

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"

	"github.com/mongopatterns/mongopatterns/internal/listers"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// requireBSON compares two values by their BSON encoding, shown as
// extended JSON on failure.
func requireBSON(t *testing.T, want, got any) {
	t.Helper()
	enc := func(v any) string {
		b, err := bson.Marshal(bson.D{{Key: "v", Value: v}})
		require.NoError(t, err)
		return bson.Raw(b).String()
	}
	require.Equal(t, enc(want), enc(got))
}

func copyValueOf(t *testing.T, s any, idField string) copyValue {
	t.Helper()
	raw, err := bson.Marshal(s)
	require.NoError(t, err)
	return copyValue{raw: raw, id: bson.Raw(raw).Lookup(idField)}
}

var oid = bson.ObjectID{0xc1}

func ann(t *testing.T) (copyType, copyValue) {
	ct, err := describe[customerRef]("id")
	require.NoError(t, err)
	return ct, copyValueOf(t, customerRef{ID: oid, Name: "Ann", Email: "ann@example.com"}, "id")
}

func mustParse(t *testing.T, s string) copyPath {
	t.Helper()
	p, err := parsePath(s)
	require.NoError(t, err)
	return p
}

// TestSyncMany pins the exact updateMany that syncs a target where the
// plan has arrayFilters (and every single-document target), which the
// server here may not run: it must stay what MongoDB is known to do right.
func TestSyncMany(t *testing.T) {
	ct, c := ann(t)
	// differs: a value at path that is not v as a whole.
	differs := func(path string, v any) []any {
		return []any{
			bson.D{{Key: path, Value: bson.D{{Key: "$ne", Value: v}}}},
			bson.D{{Key: path, Value: bson.D{{Key: "$type", Value: "array"}}}},
		}
	}
	tests := []struct {
		path string
		want syncMany
	}{
		{"customer", syncMany{
			filter: bson.D{{Key: "customer.id", Value: oid}, {Key: "$or", Value: append(differs("customer.name", "Ann"), differs("customer.email", "ann@example.com")...)}},
			update: bson.D{{Key: "$set", Value: bson.D{{Key: "customer.name", Value: "Ann"}, {Key: "customer.email", Value: "ann@example.com"}}}},
		}},
		{"items[].product", syncMany{
			filter: bson.D{{Key: "items", Value: bson.D{{Key: "$elemMatch", Value: bson.D{
				{Key: "product.id", Value: oid}, {Key: "$or", Value: append(differs("product.name", "Ann"), differs("product.email", "ann@example.com")...)},
			}}}}},
			update:       bson.D{{Key: "$set", Value: bson.D{{Key: "items.$[e].product.name", Value: "Ann"}, {Key: "items.$[e].product.email", Value: "ann@example.com"}}}},
			arrayFilters: []any{bson.D{{Key: "e.product.id", Value: oid}}},
		}},
		{"authors[]", syncMany{
			filter: bson.D{{Key: "authors", Value: bson.D{{Key: "$elemMatch", Value: bson.D{
				{Key: "id", Value: oid}, {Key: "$or", Value: append(differs("name", "Ann"), differs("email", "ann@example.com")...)},
			}}}}},
			update:       bson.D{{Key: "$set", Value: bson.D{{Key: "authors.$[e].name", Value: "Ann"}, {Key: "authors.$[e].email", Value: "ann@example.com"}}}},
			arrayFilters: []any{bson.D{{Key: "e.id", Value: oid}}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			got := pathsOf(mustParse(t, tc.path), ct).syncMany(ct, c)
			requireBSON(t, tc.want.filter, got.filter)
			requireBSON(t, tc.want.update, got.update)
			requireBSON(t, tc.want.arrayFilters, got.arrayFilters)
		})
	}
}

// TestArrayFiltersHoldNoOperator: on every known server whose plan syncs
// array targets with arrayFilters, each array filter's top-level fields
// are fields of the identifier, never an operator: FerretDB 2.x answers
// "The top level field name must be alphanumeric string. Found '$or'".
func TestArrayFiltersHoldNoOperator(t *testing.T) {
	ct, c := ann(t)
	for name, srv := range mongotest.KnownServers() {
		p := planFor(srv)
		for _, path := range []string{"items[].product", "authors[]", "order.lines[].customer"} {
			cp := mustParse(t, path)
			if p.portable(cp) {
				continue
			}
			u := pathsOf(cp, ct).syncMany(ct, c)
			require.Len(t, u.arrayFilters, 1, "%s %s", name, path)
			for _, e := range u.arrayFilters[0].(bson.D) {
				require.True(t, strings.HasPrefix(e.Key, elem+"."), "%s %s: array filter field %q", name, path, e.Key)
			}
		}
	}
}

// TestSyncManyOmittedField: an omitempty field at its zero value is
// absent from the copy, so the stale copies are those that have it and the
// update removes it.
func TestSyncManyOmittedField(t *testing.T) {
	ct, _ := ann(t)
	c := copyValueOf(t, customerRef{ID: oid, Name: "Ann"}, "id")
	got := pathsOf(mustParse(t, "customer"), ct).syncMany(ct, c)
	requireBSON(t, bson.D{{Key: "customer.id", Value: oid}, {Key: "$or", Value: bson.A{
		bson.D{{Key: "customer.name", Value: bson.D{{Key: "$ne", Value: "Ann"}}}},
		bson.D{{Key: "customer.name", Value: bson.D{{Key: "$type", Value: "array"}}}},
		bson.D{{Key: "customer.email", Value: bson.D{{Key: "$exists", Value: true}}}},
	}}}, got.filter)
	requireBSON(t, bson.D{
		{Key: "$set", Value: bson.D{{Key: "customer.name", Value: "Ann"}}},
		{Key: "$unset", Value: bson.D{{Key: "customer.email", Value: ""}}},
	}, got.update)
}

// TestRewrite pins the portable path's update of one document: only the
// stale copies of the source, by index, each guarded by its whole value as
// read (so that a copy that moved, even a copy of the same source, fails
// the guard).
func TestRewrite(t *testing.T) {
	ct, c := ann(t)
	other := bson.ObjectID{0xc2}
	item := func(id bson.ObjectID, name, email string) bson.D {
		p := bson.D{{Key: "id", Value: id}, {Key: "name", Value: name}}
		if email != "" {
			p = append(p, bson.E{Key: "email", Value: email})
		}
		return bson.D{{Key: "qty", Value: 1}, {Key: "product", Value: p}}
	}
	arr := func(items ...any) bson.RawArray {
		_, data, err := bson.MarshalValue(bson.A(items))
		require.NoError(t, err)
		return data
	}
	docID := val(t, 42)
	p := mustParse(t, "items[].product")

	filter, update, ok := p.rewrite(docID, arr(
		item(oid, "Old", "ann@example.com"), // stale name
		"not a document",
		item(other, "Old", "x@example.com"),  // another source
		item(oid, "Ann", "ann@example.com"),  // fresh
		item(oid, "Ann", "old@example.com"),  // stale email
		bson.D{{Key: "product", Value: "x"}}, // no copy
	), ct, c)
	require.True(t, ok)
	requireBSON(t, bson.D{
		{Key: "_id", Value: 42},
		{Key: "items.0.product", Value: item(oid, "Old", "ann@example.com")[1].Value},
		{Key: "items.4.product", Value: item(oid, "Ann", "old@example.com")[1].Value},
	}, filter)
	requireBSON(t, bson.D{{Key: "$set", Value: bson.D{
		{Key: "items.0.product.name", Value: "Ann"},
		{Key: "items.4.product.email", Value: "ann@example.com"},
	}}}, update)

	_, _, ok = p.rewrite(docID, arr(item(oid, "Ann", "ann@example.com"), item(other, "Old", "")), ct, c)
	require.False(t, ok, "nothing stale, nothing to write")

	noEmail := copyValueOf(t, customerRef{ID: oid, Name: "Ann"}, "id")
	_, update, ok = p.rewrite(docID, arr(item(oid, "Ann", "ann@example.com")), ct, noEmail)
	require.True(t, ok)
	requireBSON(t, bson.D{{Key: "$unset", Value: bson.D{{Key: "items.0.product.email", Value: ""}}}}, update)

	filter, update, ok = mustParse(t, "authors[]").rewrite(docID, arr(bson.D{{Key: "id", Value: oid}, {Key: "name", Value: "Old"}}), ct, c)
	require.True(t, ok)
	requireBSON(t, bson.D{{Key: "_id", Value: 42}, {Key: "authors.0", Value: bson.D{{Key: "id", Value: oid}, {Key: "name", Value: "Old"}}}}, filter)
	requireBSON(t, bson.D{{Key: "$set", Value: bson.D{{Key: "authors.0.name", Value: "Ann"}, {Key: "authors.0.email", Value: "ann@example.com"}}}}, update)
}

func TestCopies(t *testing.T) {
	doc, err := bson.Marshal(bson.D{
		{Key: "customer", Value: bson.D{{Key: "id", Value: 1}}},
		{Key: "items", Value: bson.A{bson.D{{Key: "product", Value: bson.D{{Key: "id", Value: 2}}}}, 5, bson.D{{Key: "product", Value: bson.D{{Key: "id", Value: 3}}}}, bson.D{}}},
	})
	require.NoError(t, err)
	ids := func(p string) []int32 {
		var out []int32
		for cp := range mustParse(t, p).copies(doc) {
			out = append(out, cp.Lookup("id").Int32())
		}
		return out
	}
	require.Equal(t, []int32{1}, ids("customer"))
	require.Equal(t, []int32{2, 3}, ids("items[].product"))
	require.Empty(t, ids("billing"))
	require.Empty(t, ids("customer[].x"), "not an array")
}

// TestSourceUpdate pins the options Update adds to the caller's, on every
// known server: the document after the update, projected on the copied
// fields only where findAndModify's projection is known to work, and never
// with the caller's projection, which could hide a copied field.
func TestSourceUpdate(t *testing.T) {
	ct, _ := ann(t)
	proj := fieldsOnly(ct.fields)
	requireBSON(t, bson.D{{Key: "name", Value: 1}, {Key: "email", Value: 1}}, proj)
	servers := mongotest.KnownServers()
	servers["portable"] = mongotest.Portable()
	for name, srv := range servers {
		p := planFor(srv)
		callers := options.FindOneAndUpdate().SetProjection(bson.D{{Key: "notes", Value: 1}}).SetReturnDocument(options.Before).SetUpsert(true)
		o, err := listers.Merged([]options.Lister[options.FindOneAndUpdateOptions]{callers, sourceUpdate(p, proj)})
		require.NoError(t, err)
		require.Equal(t, options.After, *o.ReturnDocument, name)
		require.True(t, *o.Upsert, "%s: the caller's other options pass", name)
		if srv.Has(patterns.FeatureFindAndModifyProjection) {
			require.Equal(t, proj, o.Projection, name)
		} else {
			require.Nil(t, o.Projection, name)
		}
	}
}

// TestBuilders pins the other commands the package sends.
func TestBuilders(t *testing.T) {
	ct, c := ann(t)
	requireBSON(t, bson.D{{Key: "_id", Value: 7}}, byID(7))
	requireBSON(t, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{1, "x"}}}}}, sourcesByID(bson.A{1, "x"}))
	requireBSON(t, bson.D{{Key: "region", Value: 1}, {Key: "geo.zone", Value: 1}}, fieldsOnly([]string{"region", "geo.zone"}))
	source := bson.Raw(bsonDoc(t, bson.D{{Key: "_id", Value: 7}, {Key: "region", Value: "eu"}, {Key: "geo", Value: bson.D{{Key: "zone", Value: 3}}}}))
	requireBSON(t, bson.D{{Key: "_id", Value: 7}, {Key: "region", Value: bson.D{{Key: "$eq", Value: "eu"}}}, {Key: "geo.zone", Value: bson.D{{Key: "$eq", Value: 3}}}, {Key: "tier", Value: bson.D{{Key: "$eq", Value: nil}}}},
		keyed(7, source, []string{"region", "geo.zone", "tier"}))

	items := mustParse(t, "items[].product")
	requireBSON(t, bson.D{{Key: "items.product.id", Value: 1}}, indexKeys(items, ct))
	requireBSON(t, bson.D{{Key: "items.product.id", Value: oid}}, pathsOf(items, ct).holders(c))
	requireBSON(t, bson.D{{Key: "items", Value: 1}}, items.arrayOnly())
	requireBSON(t, bson.D{{Key: "items.product", Value: bson.D{{Key: "$exists", Value: true}}}}, items.withCopies())
	requireBSON(t, bson.D{{Key: "items.product", Value: 1}}, items.copiesOnly())
	authors := mustParse(t, "authors[]")
	requireBSON(t, bson.D{{Key: "authors.id", Value: oid}}, pathsOf(authors, ct).holders(c))
	requireBSON(t, bson.D{{Key: "authors", Value: bson.D{{Key: "$exists", Value: true}}}}, authors.withCopies())

	requireBSON(t, bson.A{
		bson.D{{Key: "$match", Value: bson.D{{Key: "operationType", Value: bson.D{{Key: "$in", Value: bson.A{"insert", "update", "replace", "invalidate"}}}}}}},
		bson.D{{Key: "$project", Value: bson.D{
			{Key: "operationType", Value: 1},
			{Key: "documentKey", Value: 1},
			{Key: "updatedFields", Value: bson.D{{Key: "$map", Value: bson.D{{Key: "input", Value: bson.D{{Key: "$objectToArray", Value: "$updateDescription.updatedFields"}}}, {Key: "in", Value: "$$this.k"}}}}},
			{Key: "updateDescription.removedFields", Value: 1},
			{Key: "updateDescription.truncatedArrays", Value: 1},
		}}},
	}, changes())
	token := bson.Raw(bsonDoc(t, bson.D{{Key: "_data", Value: "82"}}))
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	requireBSON(t, bson.D{{Key: "$set", Value: bson.D{{Key: "token", Value: token}, {Key: "savedAt", Value: now}}}}, saveToken(token, now))
}

// TestSourceReadsThePrimary (issue 21 item 5): the source's collection
// is opened with the primary read preference, whatever the database's, so
// that Sync, Update and Watch never read a value older than the change
// they follow.
func TestSourceReadsThePrimary(t *testing.T) {
	o, err := listers.Merged([]options.Lister[options.CollectionOptions]{sourceOptions})
	require.NoError(t, err)
	require.Equal(t, readpref.PrimaryMode, o.ReadPreference.Mode())
}

// TestTransactionOptions (issue 21 item 4): Update's transaction commits
// with write concern majority, whatever the client's.
func TestTransactionOptions(t *testing.T) {
	o, err := listers.Merged([]options.Lister[options.TransactionOptions]{transactionOptions()})
	require.NoError(t, err)
	require.Equal(t, "majority", o.WriteConcern.W)
}

// TestApplyStopsPastTheTransactionLimit (issue 21 item 3): with a bound,
// apply stops after the first target whose updates bring the documents
// matched past it, before the next target, as Update's transaction needs
// to leave for the non-transactional path; without one it writes every
// target.
func TestApplyStopsPastTheTransactionLimit(t *testing.T) {
	db := mongotest.DB(t)
	id := bson.NewObjectID()
	_, err := db.Collection("customers").InsertOne(t.Context(), bson.D{{Key: "_id", Value: id}, {Key: "name", Value: "Ann"}})
	require.NoError(t, err)
	for _, coll := range []string{"orders", "invoices"} {
		_, err = db.Collection(coll).InsertMany(t.Context(), []any{
			bson.D{{Key: "_id", Value: 1}, {Key: "customer", Value: customerRef{ID: id, Name: "Old"}}},
			bson.D{{Key: "_id", Value: 2}, {Key: "customer", Value: customerRef{ID: id, Name: "Old"}}},
		})
		require.NoError(t, err)
	}
	r, err := New[customerRef](db, Config{Source: "customers", Targets: []Target{{Collection: "orders", Path: "customer"}, {Collection: "invoices", Path: "customer"}}, TransactionLimit: 1})
	require.NoError(t, err)
	require.EqualValues(t, 1, r.txLimit)
	d, err := r.decide(t.Context())
	require.NoError(t, err)
	_, c, err := r.load(t.Context(), id)
	require.NoError(t, err)

	counts := r.counts()
	require.ErrorIs(t, r.apply(t.Context(), d.plan, c, counts, r.txLimit), errTooManyCopies)
	require.Equal(t, [2]int64{2, 0}, [2]int64{counts[0].Matched, counts[1].Matched}, "stopped before the invoices")

	counts = r.counts()
	require.NoError(t, r.apply(t.Context(), d.plan, c, counts, 0))
	require.Equal(t, [2]int64{0, 2}, [2]int64{counts[0].Matched, counts[1].Matched})
}
