package validation_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/validation"
)

// Address, Stamp and Rich use every mapping of the encoder: tags,
// omitempty, inline, "-", every scalar type, pointers, slices, nested
// structs and interfaces.
type Address struct {
	City string  `bson:"city"`
	Zip  *string `bson:"zip"`
}

type Stamp struct {
	Created time.Time `bson:"created"`
	By      string    `bson:"by,omitempty"`
}

type Rich struct {
	ID     bson.ObjectID `bson:"_id"`
	Stamp  `bson:",inline"`
	N      int             `bson:"n"`
	I64    int64           `bson:"i64,omitempty"`
	Small  int64           `bson:"small,minsize"`
	U8     uint8           // stored as "u8"
	U32    uint32          `bson:"u32"`
	F      float64         `bson:"f"`
	Dec    bson.Decimal128 `bson:"dec"`
	Bytes  []byte          `bson:"bytes"`
	Tags   []string        `bson:"tags"`
	Addr   Address         `bson:"addr"`
	PAddr  *Address        `bson:"paddr"`
	Addrs  []Address       `bson:"addrs,omitempty"`
	PAddrs []*Address      `bson:"paddrs"`
	Any    any             `bson:"any"`
	Skip   string          `bson:"-"`
	Flag   bool            `bson:"flag"`
	Level  string          `bson:"level,omitempty"`
	Count  int32           `bson:"count"`
	Code   *string         `bson:"code,omitempty"`
}

// RichMap adds a map, which has no portable form.
type RichMap struct {
	Rich   `bson:",inline"`
	Labels map[string]int32 `bson:"labels"`
}

var richRules = []validation.Option{
	validation.Field("level", validation.Enum("low", "high")),
	validation.Field("count", validation.Minimum(0), validation.Maximum(100)),
	validation.Field("tags", validation.MaxItems(5), validation.Items(validation.MinLength(1), validation.Pattern(`^[a-z]+$`))),
	validation.Field("addr.city", validation.MinLength(1)),
	validation.Field("f", validation.Minimum(-1.5)),
}

// genRich returns a valid Rich from r: every value the constraints allow
// is drawn, including nil pointers, slices and interfaces.
func genRich(r *rand.Rand) Rich {
	str := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('a' + r.IntN(26))
		}
		return string(b)
	}
	maybe := func() bool { return r.IntN(3) == 0 }
	addr := func() Address {
		a := Address{City: str(1 + r.IntN(8))}
		if maybe() {
			z := str(r.IntN(6))
			a.Zip = &z
		}
		return a
	}
	var x Rich
	x.ID = bson.NewObjectIDFromTimestamp(time.Unix(r.Int64N(1<<31), 0))
	x.Created = time.UnixMilli(r.Int64N(1 << 42)).UTC()
	if maybe() {
		x.By = str(r.IntN(4))
	}
	x.N = int(r.Int64()) >> r.IntN(64)
	if r.IntN(2) == 0 {
		x.N = -x.N
	}
	x.I64 = r.Int64N(3) - 1
	x.Small = r.Int64() >> r.IntN(64)
	x.U8 = uint8(r.Uint32())
	x.U32 = r.Uint32()
	x.F = -1.5 + r.Float64()*math.Pow(10, float64(r.IntN(12)))
	x.Dec, _ = bson.ParseDecimal128(fmt.Sprintf("%d.%d", r.Int32(), r.IntN(100)))
	if !maybe() {
		x.Bytes = []byte(str(r.IntN(4)))
	}
	if !maybe() {
		x.Tags = make([]string, r.IntN(6))
		for i := range x.Tags {
			x.Tags[i] = str(1 + r.IntN(5))
		}
	}
	x.Addr = addr()
	if maybe() {
		a := addr()
		x.PAddr = &a
	}
	for range r.IntN(3) {
		x.Addrs = append(x.Addrs, addr())
	}
	for range r.IntN(3) {
		if maybe() {
			x.PAddrs = append(x.PAddrs, nil)
		} else {
			a := addr()
			x.PAddrs = append(x.PAddrs, &a)
		}
	}
	switch r.IntN(4) {
	case 1:
		x.Any = str(3)
	case 2:
		x.Any = bson.D{{Key: "k", Value: r.Int32()}}
	case 3:
		x.Any = []any{1, "two"}
	}
	x.Skip = "never stored"
	x.Flag = maybe()
	x.Level = []string{"", "low", "high"}[r.IntN(3)]
	x.Count = r.Int32N(101)
	if maybe() {
		c := str(2)
		x.Code = &c
	}
	return x
}

func richValidator(t testing.TB) *validation.Validator {
	t.Helper()
	v, err := validation.For[Rich](richRules...)
	require.NoError(t, err)
	return v
}

func seeded(data []byte) *rand.Rand {
	var seed [16]byte
	copy(seed[:], data)
	return rand.New(rand.NewPCG(binary.LittleEndian.Uint64(seed[:8]), binary.LittleEndian.Uint64(seed[8:])))
}

// FuzzValidDocumentsPass: every document the driver encodes from a valid
// Rich or RichMap passes the validator, as the evaluator sees it (tested
// against the server by TestEvaluatorAgreesWithTheServer).
func FuzzValidDocumentsPass(f *testing.F) {
	v := richValidator(f)
	vm, err := validation.For[RichMap](richRules...)
	require.NoError(f, err)
	for i := range 20 {
		f.Add([]byte(fmt.Sprint(i)))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := seeded(data)
		x := genRich(r)
		raw, err := bson.Marshal(x)
		require.NoError(t, err)
		require.Nil(t, v.Validate(raw), "%s", bson.Raw(raw))
		m := RichMap{Rich: x}
		if r.IntN(2) == 0 {
			m.Labels = map[string]int32{"a": r.Int32(), "b": 2}
		}
		raw, err = bson.Marshal(m)
		require.NoError(t, err)
		require.Nil(t, vm.Validate(raw), "%s", bson.Raw(raw))
	})
}

// mutations break a valid document in each way the validator can see.
var mutations = []func(d bson.D, r *rand.Rand) bson.D{
	func(d bson.D, _ *rand.Rand) bson.D { return with(d, "n", nil) },                                 // required missing
	func(d bson.D, _ *rand.Rand) bson.D { return with(d, "n", "7") },                                 // wrong type
	func(d bson.D, _ *rand.Rand) bson.D { return with(d, "i64", int32(1)) },                          // int where long
	func(d bson.D, _ *rand.Rand) bson.D { return with(d, "level", "mid") },                           // enum
	func(d bson.D, _ *rand.Rand) bson.D { return with(d, "count", int32(101)) },                      // maximum
	func(d bson.D, _ *rand.Rand) bson.D { return with(d, "count", int32(-1)) },                       // minimum
	func(d bson.D, _ *rand.Rand) bson.D { return with(d, "f", -2.0) },                                // minimum of a double
	func(d bson.D, _ *rand.Rand) bson.D { return with(d, "f", math.NaN()) },                          // no comparison holds for NaN
	func(d bson.D, _ *rand.Rand) bson.D { return with(d, "tags", bson.A{"A"}) },                      // item pattern
	func(d bson.D, _ *rand.Rand) bson.D { return with(d, "tags", bson.A{""}) },                       // item minLength
	func(d bson.D, _ *rand.Rand) bson.D { return with(d, "tags", make(bson.A, 6)) },                  // maxItems
	func(d bson.D, _ *rand.Rand) bson.D { return with(d, "addr", bson.D{{Key: "zip", Value: nil}}) }, // nested required
	func(d bson.D, _ *rand.Rand) bson.D {
		return with(d, "addr", bson.D{{Key: "city", Value: ""}, {Key: "zip", Value: nil}})
	}, // nested minLength
	func(d bson.D, _ *rand.Rand) bson.D {
		return with(d, "paddrs", bson.A{bson.D{{Key: "city", Value: "x"}}})
	}, // element required
	func(d bson.D, _ *rand.Rand) bson.D { return with(d, "paddrs", bson.A{"x"}) },  // element type
	func(d bson.D, _ *rand.Rand) bson.D { return with(d, "created", "yesterday") }, // inlined field type
	func(d bson.D, _ *rand.Rand) bson.D { return with(d, "u32", int32(3)) },        // uint32 is long
	func(d bson.D, _ *rand.Rand) bson.D { return with(d, "code", nil) },            // optional: still valid
	func(d bson.D, _ *rand.Rand) bson.D { return with(d, "paddr", bson.Null{}) },   // nullable: valid
}

// TestEvaluatorAgreesWithTheServer stores valid documents and each
// mutation of them, and requires the server's verdict ({$nor:
// [validator]} in the form the server takes) to equal Validate's for
// every document; then it applies the validator and requires every
// valid document to be accepted on insert: what the driver encodes from
// a valid Rich passes the server's own $jsonSchema.
func TestEvaluatorAgreesWithTheServer(t *testing.T) {
	mongotest.Require(t, patterns.FeatureValidators)
	ctx := context.Background()
	db := mongotest.DB(t)
	v := richValidator(t)
	p := validation.PlanFor(mongotest.Server())
	n := mongotest.Scale(200, 60)
	r := rand.New(rand.NewPCG(24, 1))
	var docs []any
	want := map[string]bool{} // by _id: the evaluator rejects it
	for i := range n {
		raw, err := bson.Marshal(genRich(r))
		require.NoError(t, err)
		var d bson.D
		require.NoError(t, bson.Unmarshal(raw, &d))
		if i%2 == 1 {
			d = mutations[(i/2)%len(mutations)](d, r)
		}
		raw, err = bson.Marshal(d)
		require.NoError(t, err)
		id := bson.Raw(raw).Lookup("_id").ObjectID().Hex()
		want[id] = v.Validate(raw) != nil
		require.Equal(t, i%2 == 1 && (i/2)%len(mutations) < len(mutations)-2, want[id], "document %d %s: %v", i, bson.Raw(raw), v.Validate(raw))
		docs = append(docs, d)
	}
	coll := db.Collection("rich")
	_, err := coll.InsertMany(ctx, docs)
	require.NoError(t, err)
	rejects, err := validation.CheckPlan(ctx, coll, v, p)
	require.NoError(t, err)
	wantRejected := 0
	for _, bad := range want {
		if bad {
			wantRejected++
		}
	}
	require.EqualValues(t, wantRejected, rejects.Rejected)
	filter, err := validation.SendForm(p, v, "the server")
	require.NoError(t, err)
	cur, err := coll.Find(ctx, validation.RejectsFilter(filter))
	require.NoError(t, err)
	var got []struct {
		ID bson.ObjectID `bson:"_id"`
	}
	require.NoError(t, cur.All(ctx, &got))
	for _, g := range got {
		require.True(t, want[g.ID.Hex()], "the server rejects %s, the evaluator does not", g.ID.Hex())
	}

	require.NoError(t, validation.ApplyPlan(ctx, db, "enforced", v, "", "", p))
	for i := range n {
		_, err := db.Collection("enforced").InsertOne(ctx, genRich(r))
		require.NoError(t, err, "valid document %d", i)
	}
}

// TestEnforcementAgreesWithValidate inserts valid documents and each
// mutation of them, one by one, into a collection under Apply's
// validator: the server refuses exactly the documents Validate fails
// (enforcement by collMod, not only the query form, agrees), and Check
// afterwards counts none (what got in is valid).
func TestEnforcementAgreesWithValidate(t *testing.T) {
	mongotest.Require(t, patterns.FeatureValidators)
	ctx := context.Background()
	db := mongotest.DB(t)
	v := richValidator(t)
	p := validation.PlanFor(mongotest.Server())
	require.NoError(t, validation.ApplyPlan(ctx, db, "rich", v, "", "", p))
	coll := db.Collection("rich")
	r := rand.New(rand.NewPCG(25, 2))
	refused := 0
	for i := range mongotest.Scale(2*len(mutations)*4, 2*len(mutations)) {
		raw, err := bson.Marshal(genRich(r))
		require.NoError(t, err)
		var d bson.D
		require.NoError(t, bson.Unmarshal(raw, &d))
		if i%2 == 1 {
			d = mutations[(i/2)%len(mutations)](d, r)
		}
		raw, err = bson.Marshal(d)
		require.NoError(t, err)
		fe := v.Validate(raw)
		_, err = coll.InsertOne(ctx, raw)
		if fe != nil {
			requireRejected(t, err, fmt.Sprintf("document %d (Validate: %v): %s", i, fe, bson.Raw(raw)))
			refused++
		} else {
			require.NoError(t, err, "document %d, valid for Validate: %s", i, bson.Raw(raw))
		}
	}
	rep, err := validation.CheckPlan(ctx, coll, v, p)
	require.NoError(t, err)
	require.Zero(t, rep.Rejected)
	mongotest.Detail(t, "%d refused by the server and by Validate", refused)
}
