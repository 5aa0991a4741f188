package outlier

// Attack on 926b57a: Append's guarded push (pushParentCommand) and
// Update's one-command update (updateParentNative) encoded by hand with
// bsoncore, and the parent id handed to every filter of Append and Update
// as encodeID's bson.RawValue instead of the caller's Go value.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/mongopatterns/mongopatterns/internal/bsonkinds"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// refPushFilter, refPushUpdate and refUpdateNative are the commands as
// 926b57a~1 built them (bson.D with the caller's Go id), for the driver
// to encode: the reference the hand encoding must equal byte for byte.
func (r *Repo[P, I]) refPushFilter(p plan, parentID any, n int, items []item) bson.D {
	neTrue := bson.D{{Key: "$ne", Value: true}}
	isArray := bson.D{{Key: "$type", Value: "array"}}
	notExists := bson.D{{Key: "$exists", Value: false}}
	f := bson.D{{Key: "_id", Value: parentID}, {Key: r.cfg.FlagField, Value: neTrue}}
	switch {
	case !p.serverSizeLimit:
		f = append(f, bson.E{Key: r.cfg.Field, Value: sizeIs(n)})
	case n == unread:
		f = append(f, bson.E{Key: r.cfg.Field, Value: isArray}, bson.E{Key: r.elementPath(r.cfg.Cap - len(items)), Value: notExists})
	default:
		f = append(f, bson.E{Key: r.cfg.Field, Value: isArray}, bson.E{Key: "$or", Value: bson.A{
			bson.D{{Key: r.elementPath(r.cfg.Cap - len(items)), Value: notExists}},
			bson.D{{Key: r.cfg.Field, Value: sizeIs(n)}},
		}})
	}
	return append(f, bson.E{Key: "$nor", Value: bson.A{bson.D{{Key: r.idPath, Value: bson.D{{Key: "$in", Value: ids(items)}}}}}})
}

func (r *Repo[P, I]) refPushUpdate(items []item) bson.D {
	return bson.D{
		{Key: "$push", Value: bson.D{{Key: r.cfg.Field, Value: pushValue(items)}}},
		{Key: "$set", Value: bson.D{{Key: r.cfg.FlagField, Value: false}, {Key: r.cfg.TailField, Value: int64(0)}}},
	}
}

func (r *Repo[P, I]) refUpdateNative(parentID any, it item) (filter, update bson.D, arrayFilters []any) {
	return bson.D{
			{Key: "_id", Value: parentID},
			{Key: "$or", Value: bson.A{
				bson.D{{Key: r.idPath, Value: it.id}},
				bson.D{{Key: r.cfg.FlagField, Value: true}},
			}},
			{Key: r.cfg.Field, Value: bson.D{{Key: "$ne", Value: it.raw}}},
			{Key: r.elementPath(0), Value: bson.D{{Key: "$exists", Value: true}}},
		},
		bson.D{{Key: "$set", Value: bson.D{{Key: r.cfg.Field + ".$[e]", Value: it.raw}}}},
		[]any{bson.D{{Key: "e." + r.cfg.IDField, Value: it.id}}}
}

type atk60Str string
type atk60Int int
type atk60Arr [16]byte

// atk60VM is an id type with its own bson.ValueMarshaler.
type atk60VM struct{ S string }

func (v atk60VM) MarshalBSONValue() (byte, []byte, error) {
	t, data, err := bson.MarshalValue("vm-" + v.S)
	return byte(t), data, err
}

// atk60ParentIDs are Go values of every kind patterns.ValidateID accepts
// as a parent id, with the default registry.
func atk60ParentIDs() []any {
	s := "ptr"
	n := 1 << 40
	oid := bson.ObjectID{0: 0x65, 11: 9}
	dec, _ := bson.ParseDecimal128("7.00")
	big, _ := bson.ParseDecimal128("1E+400")
	out := []any{
		"a", "é☃", strings.Repeat("x", 300), oid,
		7, -7, math.MaxInt32, math.MaxInt32 + 1, math.MinInt32 - 1, 1 << 53, 1<<53 + 1, math.MaxInt64,
		int8(-3), int16(300), int32(7), int64(7), int64(1 << 40), int64(math.MinInt64),
		uint8(3), uint16(7), uint32(7), uint32(math.MaxUint32), uint64(7), uint(9),
		float32(1.5), 7.0, 0.5, math.Inf(1), math.Inf(-1), math.MaxFloat64, math.SmallestNonzeroFloat64,
		dec, big, bson.Symbol("sym"), bson.Binary{Subtype: 4, Data: bytes.Repeat([]byte{0x11}, 16)},
		bson.Binary{Subtype: 0x80, Data: []byte{1}}, []byte{1, 2, 3}, atk60Arr{1},
		true, bson.DateTime(5), bson.DateTime(-1), time.Date(2026, 12, 3, 1, 2, 3, 4e6, time.UTC),
		bson.Timestamp{T: 1, I: 2}, &s, &n, atk60Str("named"), atk60Int(1 << 35), json.Number("42"), json.Number("4.5"), atk60VM{"x"}, &atk60VM{"y"},
		*must(url.Parse("https://x.example/a?b=c")),
	}
	for _, v := range bsonkinds.IDs() {
		out = append(out, v.V) // bson.RawValue given by the user
	}
	var ok []any
	for _, v := range out {
		if patterns.ValidateID(v) == nil {
			ok = append(ok, v)
		}
	}
	return ok
}

// atk60Names are valid field names of odd shapes.
var atk60Names = []string{"comments", "c", "0", "12", "a$b", "é", "☃x", "with space", strings.Repeat("f", 200), "e", "$e"[1:]}

// TestAttack60CommandBytesMatchDriver: for random parent ids of every
// type Append and Update accept, random item ids, item counts past 9 and
// 99, Caps past the 1024 prebuilt element paths, every n and both plans,
// and odd field names, the hand-encoded push and native update are what
// the driver encodes of the bson.D the previous commit built.
func TestAttack60CommandBytesMatchDriver(t *testing.T) {
	rng := rand.New(rand.NewPCG(60, 926))
	pids := atk60ParentIDs()
	var itemIDs []bson.RawValue
	for _, v := range bsonkinds.IDs() {
		if validRawID(v.V) == nil {
			itemIDs = append(itemIDs, v.V)
		}
	}
	for i := range 200 {
		itemIDs = append(itemIDs, rawValue(t, fmt.Sprintf("id%d", i)), rawValue(t, int64(i+1)<<33), rawValue(t, i+1))
	}
	pick := func() string { return atk60Names[rng.IntN(len(atk60Names))] }
	cases := 0
	for range 4000 {
		cfg := Config{Parents: "p", Field: pick(), FlagField: pick(), TailField: pick(), IDField: pick(), Cap: 1 + rng.IntN(3000), OverflowCap: 1 + rng.IntN(50)}
		if rng.IntN(4) == 0 {
			cfg.Cap = 1 + rng.IntN(3)
		}
		r, err := New[bson.Raw, bson.Raw](offline, cfg)
		if err != nil {
			continue // two names equal
		}
		k := 1 + rng.IntN(4)
		switch rng.IntN(4) {
		case 0:
			k = 9 + rng.IntN(5)
		case 1:
			k = 95 + rng.IntN(30)
		}
		p := plan{serverSizeLimit: rng.IntN(2) == 0, arrayFilters: true}
		if p.serverSizeLimit {
			k = min(k, cfg.Cap) // Append never pushes more than Cap items (appendItems, fitParent)
		}
		items := make([]item, k)
		for j := range items {
			id := itemIDs[rng.IntN(len(itemIDs))]
			doc := bson.D{{Key: cfg.IDField, Value: id}, {Key: "t", Value: strings.Repeat("y", rng.IntN(40))}}
			if rng.IntN(3) == 0 {
				doc = append(bson.D{{Key: "48", Value: bson.A{int32(1)}}}, doc...)
			}
			raw, err := bson.Marshal(doc)
			require.NoError(t, err)
			items[j] = item{raw: raw, id: id}
		}
		pid := pids[rng.IntN(len(pids))]
		_, err = encodeID(pid)
		require.NoError(t, err)
		n := rng.IntN(cfg.Cap + 1)
		if p.serverSizeLimit && rng.IntN(2) == 0 {
			n = unread
		}
		filter, update := r.pushParentCommand(p, pid, n, items)
		msg := fmt.Sprintf("cfg %+v, parent %T %v, %d items, n %d, plan %+v", cfg, pid, pid, k, n, p)
		requireEncodes(t, r.refPushFilter(p, pid, n, items), filter, msg)
		requireEncodes(t, r.refPushUpdate(items), update, msg)
		nf, nu, af := r.updateParentNative(pid, items[0])
		wf, wu, waf := r.refUpdateNative(pid, items[0])
		requireEncodes(t, wf, nf, msg)
		requireEncodes(t, wu, nu, msg)
		require.Len(t, af, 1)
		requireEncodes(t, waf[0].(bson.D), af[0].(bson.Raw), msg)
		cases++
	}
	t.Logf("%d cases over %d parent id values", cases, len(pids))
}

// TestAttack60CommandsDoNotAlias: the parts of the filter, the update
// and the array filter share one backing array; appending to any of them
// (as a consumer of a bson.Raw may) must not change another, and two
// calls share nothing.
func TestAttack60CommandsDoNotAlias(t *testing.T) {
	r, a, b := commandsRepo(t)
	enc := func(vs ...any) [][]byte {
		var out [][]byte
		for _, v := range vs {
			raw, err := bson.Marshal(v)
			require.NoError(t, err)
			out = append(out, raw)
		}
		return out
	}
	// grow appends to every byte slice among the command's parts.
	grow := func(vs ...any) {
		for _, v := range vs {
			switch v := v.(type) {
			case bson.D:
				for _, e := range v {
					switch x := e.Value.(type) {
					case bson.Raw:
						_ = append(x, 0xEE, 0xEE, 0xEE)
					case bsoncore.Array:
						_ = append(x, 0xEE, 0xEE, 0xEE)
					}
				}
			case bson.Raw:
				_ = append(v, 0xEE, 0xEE, 0xEE)
			}
		}
	}
	for _, p := range []plan{{serverSizeLimit: true}, {}} {
		for _, n := range []int{5, unread} {
			for _, items := range [][]item{{a}, {a, b}} {
				f, u := r.pushParentCommand(p, "p", n, items)
				before := enc(f, u)
				grow(f, u)
				require.Equal(t, before, enc(f, u))
				f2, u2 := r.pushParentCommand(p, "q", n, items)
				grow(f2, u2)
				require.Equal(t, before, enc(f, u))
			}
		}
	}
	f, u, af := r.updateParentNative("p", a)
	before := enc(f, u, af[0])
	grow(f, u, af[0])
	require.Equal(t, before, enc(f, u, af[0]))
}

// atk60Doc is a parent of any id type.
type atk60Doc = bson.D

// TestAttack60ParentIDTypesRoundTrip: for parent ids of every type
// Append and Update accept, items appended (into the parent and past
// Cap into overflow) and updated are read back by Get, Items, Page and
// Count, and Remove finds them; Append and Update named with a value of
// another numeric type of the same id reach the same parent.
func TestAttack60ParentIDTypesRoundTrip(t *testing.T) {
	ctx := context.Background()
	p := PlanFor(mongotest.Server())
	db := mongotest.DB(t)
	r, err := New[atk60Doc, comment](db, Config{Parents: "posts", Field: "comments", Cap: 2, OverflowCap: 2})
	require.NoError(t, err)
	require.NoError(t, patterns.EnsureIndexes(ctx, r.Indexes()...))
	ids := atk60ParentIDs()
	if !mongotest.Server().Has(patterns.FeatureArrayFilters) { // FerretDB 1.x: slow; its own subset
		ids = []any{"a", math.MaxInt32 + 1, int64(1 << 40), atk60Int(1 << 35), 7.0, json.Number("42"), bson.Symbol("sym"), []byte{1, 2, 3}, atk60Arr{1},
			time.Date(2026, 12, 3, 1, 2, 3, 4e6, time.UTC), bson.Timestamp{T: 1, I: 2}, true}
	}
	seen := map[string]bool{}
	for i, pid := range ids {
		rid, err := encodeID(pid)
		require.NoError(t, err)
		key := fmt.Sprint(rid)
		if seen[key] || rid.Type == bson.TypeDecimal128 && !mongotest.Server().Has(patterns.FeatureArrayFilters) {
			continue
		}
		seen[key] = true
		name := fmt.Sprintf("%d %T %v", i, pid, pid)
		_, err = r.Insert(ctx, atk60Doc{{Key: "_id", Value: pid}, {Key: "title", Value: "t"}})
		if err != nil {
			t.Logf("%s: Insert: %v (skipped)", name, err)
			continue
		}
		require.NoError(t, r.Append(ctx, pid, comment{ID: "c1"}, comment{ID: "c2"}, comment{ID: "c3"}), name)
		require.NoError(t, r.Append(ctx, pid, comment{ID: "c4"}), name)
		require.NoError(t, r.Update(ctx, pid, comment{ID: "c1", Text: "in parent"}), name)
		require.NoError(t, r.Update(ctx, pid, comment{ID: "c4", Text: "in overflow"}), name)
		_, got, err := r.Get(ctx, pid)
		require.NoError(t, err, name)
		require.Equal(t, []comment{{ID: "c1", Text: "in parent"}, {ID: "c2"}, {ID: "c3"}, {ID: "c4", Text: "in overflow"}}, got, name)
		pg, _, err := r.Page(ctx, pid, Cursor{}, 10)
		require.NoError(t, err, name)
		require.Equal(t, got, pg, name)
		n, err := r.Count(ctx, pid)
		require.NoError(t, err, name)
		require.Equal(t, 4, n, name)
		require.NoError(t, r.Remove(ctx, pid, "c3"), name)
		_ = p
	}
	// One id, four numeric types.
	_, err = r.Insert(ctx, atk60Doc{{Key: "_id", Value: int32(77)}})
	require.NoError(t, err)
	require.NoError(t, r.Append(ctx, int64(77), comment{ID: "a"}, comment{ID: "b"}))
	require.NoError(t, r.Append(ctx, 77.0, comment{ID: "c"}))
	require.NoError(t, r.Update(ctx, uint16(77), comment{ID: "c", Text: "x"}))
	require.NoError(t, r.Update(ctx, atk60Int(77), comment{ID: "a", Text: "y"}))
	_, got, err := r.Get(ctx, 77)
	require.NoError(t, err)
	require.Equal(t, []comment{{ID: "a", Text: "y"}, {ID: "b"}, {ID: "c", Text: "x"}}, got)
}

// TestAttack60ManyItemsOneAppend: one Append of 120 items (keys of $in
// and $each past 99) into a parent that takes them all, and a Cap past
// the 1024 prebuilt element paths, filled by one Append and then
// overflowed, keep every item once, in order.
func TestAttack60ManyItemsOneAppend(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ cap, first, then int }{{200, 120, 0}, {50, 120, 3}, {1100, 1099, 3}} {
		t.Run(fmt.Sprint(tc.cap), func(t *testing.T) {
			r, _ := newRepo(t, Config{Parents: "posts", Field: "comments", Cap: tc.cap, OverflowCap: 40}, PlanFor(mongotest.Server()))
			_, err := r.Insert(ctx, post{ID: 1})
			require.NoError(t, err)
			want := comments("a", 0, tc.first)
			require.NoError(t, r.Append(ctx, 1, want...))
			for i := range tc.then {
				c := comment{ID: fmt.Sprintf("z%d", i)}
				require.NoError(t, r.Append(ctx, 1, c))
				want = append(want, c)
			}
			// and the whole first batch again: stored once
			require.NoError(t, r.Append(ctx, 1, comments("a", 0, tc.first)...))
			_, got, err := r.Get(ctx, 1)
			require.NoError(t, err)
			require.Equal(t, want, got)
		})
	}
}

// atk60UUID is a UUID as github.com/google/uuid declares it ([16]byte),
// which applications register an encoder for (binary subtype 4) on their
// client or database, as the driver's documentation shows.
type atk60UUID [16]byte

func atk60Registry() *bson.Registry {
	reg := bson.NewRegistry()
	reg.RegisterTypeEncoder(reflect.TypeOf(atk60UUID{}), bson.ValueEncoderFunc(func(_ bson.EncodeContext, vw bson.ValueWriter, v reflect.Value) error {
		u := v.Interface().(atk60UUID)
		return vw.WriteBinaryWithSubtype(u[:], bson.TypeBinaryUUID)
	}))
	return reg
}

// TestAttack60DatabaseRegistryParentID: the repository is built on a
// *mongo.Database whose registry encodes the application's id type. Get,
// Items, Page, Count, Remove and Delete name the parent as that database
// encodes the id (the driver encodes their filters); since 926b57a,
// Append and Update name it as bson.MarshalValue does (encodeID, the
// default registry), which is another value: a subtype-0 binary, not the
// subtype-4 UUID stored. Before 926b57a all of them used the database's
// encoding.
//
//   - parent written by the application (its InsertOne, through its
//     database): Append and Update answer ErrNotFound for a parent Get reads.
//   - a parent under each encoding: Append returns nil and stores the items
//     in the other document; Get, Count, Page do not see them.
func TestAttack60DatabaseRegistryParentID(t *testing.T) {
	ctx := context.Background()
	name := mongotest.DB(t).Name() // dropped at the end
	db := mongotest.Client().Database(name, options.Database().SetRegistry(atk60Registry()))
	cfg := Config{Parents: "posts", Field: "comments", Cap: 3, OverflowCap: 2}
	r, err := New[bson.Raw, comment](db, cfg)
	require.NoError(t, err)
	require.NoError(t, patterns.EnsureIndexes(ctx, r.Indexes()...))
	u := atk60UUID{0: 0xA1, 15: 0x01}

	t.Run("Append to a parent written by the application", func(t *testing.T) {
		_, err := db.Collection("posts").InsertOne(ctx, bson.D{{Key: "_id", Value: u}, {Key: "comments", Value: bson.A{bson.D{{Key: "_id", Value: "c0"}}}}})
		require.NoError(t, err)
		_, got, err := r.Get(ctx, u)
		require.NoError(t, err, "Get reads the parent")
		require.Equal(t, []comment{{ID: "c0"}}, got)
		require.NoError(t, r.Append(ctx, u, comment{ID: "c1"}), "Append to the parent Get just read")
		_, got, err = r.Get(ctx, u)
		require.NoError(t, err)
		require.Equal(t, []comment{{ID: "c0"}, {ID: "c1"}}, got)
	})

	t.Run("Update in a parent written by the application", func(t *testing.T) {
		w := atk60UUID{0: 0xC3, 15: 0x03}
		_, err := db.Collection("posts").InsertOne(ctx, bson.D{{Key: "_id", Value: w}, {Key: "comments", Value: bson.A{bson.D{{Key: "_id", Value: "c0"}}}}})
		require.NoError(t, err)
		n, err := r.Count(ctx, w)
		require.NoError(t, err)
		require.Equal(t, 1, n, "Count reads the parent")
		require.NoError(t, r.Update(ctx, w, comment{ID: "c0", Text: "edited"}), "Update of the item Count just counted")
		_, got, err := r.Get(ctx, w)
		require.NoError(t, err)
		require.Equal(t, []comment{{ID: "c0", Text: "edited"}}, got)
		require.NoError(t, r.Remove(ctx, w, "c0"), "Remove finds it")
	})

	t.Run("an id given as the BSON value stored reaches the parent Insert stored", func(t *testing.T) {
		// The package's Encoding section: Insert encodes with the default
		// registry, the other methods' filters with the database's; a
		// bson.Binary encodes alike under both.
		w := atk60UUID{0: 0xD4, 15: 0x04}
		id := bson.Binary{Subtype: 4, Data: w[:]}
		_, err := r.Insert(ctx, bson.Raw(must(bson.Marshal(bson.D{{Key: "_id", Value: id}, {Key: "title", Value: "t"}}))))
		require.NoError(t, err)
		require.NoError(t, r.Append(ctx, id, comment{ID: "a"}, comment{ID: "b"}, comment{ID: "c"}, comment{ID: "d"}), "into the parent and overflow")
		require.NoError(t, r.Update(ctx, id, comment{ID: "a", Text: "edited"}))
		require.NoError(t, r.Remove(ctx, id, "b"))
		_, got, err := r.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, []comment{{ID: "a", Text: "edited"}, {ID: "c"}, {ID: "d"}}, got)
		page, _, err := r.Page(ctx, id, Cursor{}, 10)
		require.NoError(t, err)
		require.Equal(t, got, page)
		n, err := r.Count(ctx, id)
		require.NoError(t, err)
		require.Equal(t, 3, n)
		stored, err := db.Collection("posts").CountDocuments(ctx, bson.D{{Key: "_id", Value: w}})
		require.NoError(t, err)
		require.EqualValues(t, 1, stored, "the application's UUID, through its registry, names the same parent")
	})

	t.Run("a parent under each encoding", func(t *testing.T) {
		v := atk60UUID{0: 0xB2, 15: 0x02}
		_, err := db.Collection("posts").InsertOne(ctx, bson.D{{Key: "_id", Value: v}, {Key: "title", Value: "the application's"}})
		require.NoError(t, err)
		// A document under the other encoding of the same UUID: written by
		// Repo.Insert (bson.Marshal, default registry), or by any writer
		// without the registry.
		_, err = r.Insert(ctx, bson.Raw(must(bson.Marshal(bson.D{{Key: "_id", Value: v}, {Key: "title", Value: "default encoding"}}))))
		if mongo.IsDuplicateKeyError(err) {
			t.Skip("the server's unique _id index ignores the binary subtype (FerretDB 1.x): " + err.Error())
		}
		require.NoError(t, err)
		require.NoError(t, r.Append(ctx, v, comment{ID: "x1"}, comment{ID: "x2"}))
		n, err := r.Count(ctx, v)
		require.NoError(t, err)
		parent, got, err := r.Get(ctx, v)
		require.NoError(t, err)
		t.Logf("Get(v): parent %s, items %v; Count %d", parent, got, n)
		require.Equal(t, []comment{{ID: "x1"}, {ID: "x2"}}, got, "a merged read never misses an item whose Append returned before the read began")
		require.Equal(t, 2, n)
	})
}

// TestAttack60ConcurrentAppendUpdate: two repositories (two clients)
// append to and update items of one parent at once; every item is stored
// once, in each appender's order, and the last Update of each item wins
// whole. FerretDB 1.x loses concurrent updates from two clients by design:
// there both goroutines share one repository (one client, one connection).
func TestAttack60ConcurrentAppendUpdate(t *testing.T) {
	ctx := context.Background()
	db := mongotest.DB(t)
	cfg := Config{Parents: "posts", Field: "comments", Cap: 5, OverflowCap: 3}
	r1, err := New[post, comment](db, cfg)
	require.NoError(t, err)
	require.NoError(t, patterns.EnsureIndexes(ctx, r1.Indexes()...))
	r2, err := New[post, comment](mongotest.NewClient(t).Database(db.Name()), cfg)
	require.NoError(t, err)
	if !mongotest.Server().Has(patterns.FeatureConcurrentUpdates) {
		r2 = r1 // FerretDB 1.x: one client with one connection (its documented condition)
	}
	_, err = r1.Insert(ctx, post{ID: 1 << 40})
	require.NoError(t, err)
	pid := 1 << 40
	errc := make(chan error, 4)
	for w, r := range []*Repo[post, comment]{r1, r2} {
		go func() {
			for i := range 12 {
				if err := r.Append(ctx, int64(pid), comment{ID: fmt.Sprintf("w%d-%02d", w, i)}, comment{ID: fmt.Sprintf("w%d-%02db", w, i)}); err != nil {
					errc <- err
					return
				}
				if i > 0 {
					if err := r.Update(ctx, float64(pid), comment{ID: fmt.Sprintf("w%d-%02d", w, i-1), Text: "u"}); err != nil {
						errc <- err
						return
					}
				}
			}
			errc <- nil
		}()
	}
	require.NoError(t, <-errc)
	require.NoError(t, <-errc)
	_, got, err := r1.Get(ctx, pid)
	require.NoError(t, err)
	require.Len(t, got, 48)
	last := map[int]int{0: -1, 1: -1}
	for _, c := range got {
		var w, i int
		var tail string
		_, _ = fmt.Sscanf(c.ID, "w%d-%02d%s", &w, &i, &tail)
		require.GreaterOrEqual(t, i, last[w], "order of %s", c.ID)
		last[w] = i
		if tail == "" && i < 11 {
			require.Equal(t, "u", c.Text, c.ID)
		}
	}
}
