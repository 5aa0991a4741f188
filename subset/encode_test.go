package subset

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

type review struct {
	ID        any    `bson:"_id"`
	ProductID any    `bson:"productId,omitempty"`
	Stars     int    `bson:"stars"`
	Text      string `bson:"text,omitempty"`
}

// reviewRepo builds a repository that sends nothing in these tests.
func reviewRepo(t testing.TB, cfg Config) *Repo[bson.M, review] {
	t.Helper()
	r, err := New[bson.M, review](mongotest.Client().Database("subset_unit"), cfg)
	require.NoError(t, err)
	return r
}

// TestEncode checks the stored document: the parent field appended when
// the item lacks it, and a generated _id only when IDField is not _id and
// the item has none.
func TestEncode(t *testing.T) {
	type keyed struct {
		ReviewID string `bson:"reviewId"`
		Stars    int    `bson:"stars"`
	}
	r, err := New[bson.M, keyed](mongotest.Client().Database("subset_unit"), Config{
		Parents: "products", Field: "reviews", Items: "reviews", ParentField: "productId",
		IDField: "reviewId", SortField: "stars", Cap: 3,
	})
	require.NoError(t, err)
	p, err := newParentRef("productId", "p1")
	require.NoError(t, err)
	e, err := r.encode(keyed{ReviewID: "r1", Stars: 2}, p, true)
	require.NoError(t, err)
	var got bson.D
	require.NoError(t, bson.Unmarshal(e.doc, &got))
	require.Len(t, got, 4)
	require.Equal(t, "_id", got[0].Key)
	require.IsType(t, bson.ObjectID{}, got[0].Value)
	require.Equal(t, bson.D{{Key: "reviewId", Value: "r1"}, {Key: "stars", Value: int32(2)}, {Key: "productId", Value: "p1"}}, got[1:])
	require.Equal(t, "r1", e.id.StringValue())

	e, err = r.encode(keyed{ReviewID: "r1", Stars: 2}, p, false)
	require.NoError(t, err)
	got = nil
	require.NoError(t, bson.Unmarshal(e.doc, &got))
	require.Equal(t, bson.D{{Key: "reviewId", Value: "r1"}, {Key: "stars", Value: int32(2)}, {Key: "productId", Value: "p1"}}, got, "an update keeps the stored _id")
}

// TestEncodeComparesParentIDsAsTheServer accepts an item whose parent
// field holds the parent's id in another numeric type: the server finds
// it with the parent's id all the same.
func TestEncodeComparesParentIDsAsTheServer(t *testing.T) {
	r := reviewRepo(t, reviewsConfig(""))
	p, err := newParentRef("productId", 7)
	require.NoError(t, err)
	seven, err := bson.ParseDecimal128("7.00")
	require.NoError(t, err)
	for _, same := range []any{int32(7), int64(7), 7.0, seven} {
		_, err := r.encode(review{ID: "r1", ProductID: same, Stars: 1}, p, true)
		require.NoError(t, err, "%T", same)
	}
	for _, other := range []any{7.5, "7", int64(8)} {
		_, err := r.encode(review{ID: "r1", ProductID: other, Stars: 1}, p, true)
		require.ErrorIs(t, err, patterns.ErrInvalid, "%T %v", other, other)
	}
}

// TestSizes checks the arithmetic of sizes against the BSON encoder.
func TestSizes(t *testing.T) {
	doc := raw(t, bson.D{{Key: "x", Value: 1}})
	for _, n := range []int{0, 1, 9, 10, 11, 99, 100, 101, 1000, 12345} {
		arr := make(bson.A, n)
		docs := make([]bson.Raw, n)
		for i := range arr {
			arr[i], docs[i] = doc, doc
		}
		_, b, err := bson.MarshalValue(arr)
		require.NoError(t, err)
		require.Equal(t, len(b), arraySize(docs), "%d elements", n)
	}
	whole := raw(t, bson.D{{Key: "_id", Value: "p"}, {Key: "reviews", Value: bson.A{doc, doc}}, {Key: "reviewsRev", Value: int64(3)}})
	require.Equal(t, len(whole), 5+elemSize("_id", len("p")+5)+elemSize("reviews", arraySize([]bson.Raw{doc, doc}))+elemSize("reviewsRev", 8))
}

// TestItemLimitCountsTheOverhead checks that Cap items of the largest
// size accepted fill a parent to exactly 16 MiB or less, and that one
// byte more is refused: the per-item limit counts the _id, the subset's
// element keys and the revision, not only MaxDocumentSize/Cap.
//
// It encodes items of up to 16 MiB a few dozen times, which the race
// detector makes up to a minute of client time on a loaded machine: it runs in parallel with the fault
// tests, which spend theirs waiting on the server, and takes every item's
// text from one filler.
func TestItemLimitCountsTheOverhead(t *testing.T) {
	t.Parallel()
	filler := strings.Repeat("x", patterns.MaxDocumentSize)
	for _, capacity := range []int{1, 2, 11} {
		cfg := reviewsConfig("")
		cfg.Cap = capacity
		r := reviewRepo(t, cfg)
		for _, parentID := range []any{strings.Repeat("q", 100), 7} {
			p, err := newParentRef("productId", parentID)
			require.NoError(t, err)
			limit := r.itemLimit(p)
			small := []bson.Raw{raw(t, bson.D{{Key: "_id", Value: 1}}), raw(t, bson.D{{Key: "_id", Value: 2}, {Key: "text", Value: "x"}})}
			require.Equal(t, raw(t, bson.D{{Key: "_id", Value: parentID}, {Key: "reviews", Value: small}, {Key: "reviewsRev", Value: int64(1)}, {Key: "reviewsPushed", Value: pushedID}}), fullParent(t, parentID, small), "fullParent encodes as Marshal does")
			item := func(i, size int) review {
				rv := review{ID: int64(i), ProductID: parentID, Stars: 1}
				base := len(raw(t, bson.D{{Key: "_id", Value: int64(i)}, {Key: "productId", Value: parentID}, {Key: "stars", Value: 1}, {Key: "text", Value: ""}}))
				rv.Text = filler[:size-base]
				return rv
			}
			var full []bson.Raw
			for i := range capacity {
				e, err := r.encode(item(i+1, limit), p, true)
				require.NoError(t, err)
				require.Len(t, e.doc, limit)
				full = append(full, e.doc)
			}
			parent := fullParent(t, parentID, full)
			require.LessOrEqual(t, len(parent), patterns.MaxDocumentSize, "cap %d", capacity)
			require.Greater(t, len(parent)+capacity, patterns.MaxDocumentSize, "cap %d: the limit is the largest that fits", capacity)
			_, err = r.encode(item(1, limit+1), p, true)
			require.ErrorIs(t, err, patterns.ErrTooLarge)
		}
	}
}

// fullParent returns the parent {_id: id, reviews: items, reviewsRev:
// int64(1), reviewsPushed: ObjectID} as bson.Marshal encodes it, built in a buffer of its final
// size: one copy of the items where Marshal's growing buffer makes three,
// which the race detector charges by the byte (16 MiB here).
// pushedID is the push field's value in fullParent.
var pushedID = bson.NewObjectID()

func fullParent(t *testing.T, id any, items []bson.Raw) bson.Raw {
	t.Helper()
	typ, val, err := bson.MarshalValue(id)
	require.NoError(t, err)
	size := 64 + len(val)
	for _, it := range items {
		size += len(it) + 16
	}
	start, doc := bsoncore.AppendDocumentStart(make([]byte, 0, size))
	doc = bsoncore.AppendValueElement(doc, "_id", bsoncore.Value{Type: bsoncore.Type(typ), Data: val})
	arr, doc := bsoncore.AppendArrayElementStart(doc, "reviews")
	for i, it := range items {
		doc = bsoncore.AppendDocumentElement(doc, strconv.Itoa(i), it)
	}
	doc, err = bsoncore.AppendArrayEnd(doc, arr)
	require.NoError(t, err)
	doc = bsoncore.AppendInt64Element(doc, "reviewsRev", 1)
	doc = bsoncore.AppendObjectIDElement(doc, "reviewsPushed", pushedID)
	doc, err = bsoncore.AppendDocumentEnd(doc, start)
	require.NoError(t, err)
	return doc
}

// TestEncodeAllRejectsOneIDTwice rejects two items with one id, as the
// server sees ids: 1 and 1.0 are one.
func TestEncodeAllRejectsOneIDTwice(t *testing.T) {
	r := reviewRepo(t, reviewsConfig(""))
	p, err := newParentRef("productId", "p1")
	require.NoError(t, err)
	_, err = r.encodeAll([]review{{ID: 1, Stars: 1}, {ID: 2, Stars: 1}, {ID: 1.0, Stars: 2}}, p)
	require.ErrorIs(t, err, patterns.ErrInvalid)
	require.EqualError(t, err, "items[2]: id 1 is given twice (items[0]): invalid")
}

// TestEncodeAllIsLinear times encodeAll on n and 16n distinct items: a
// check of duplicates that compared every pair (721 ms of client time
// for 10,000 items) makes the ratio about 256; a set makes it about 16.
// The bound between leaves room for a loaded machine.
func TestEncodeAllIsLinear(t *testing.T) {
	r := reviewRepo(t, reviewsConfig(""))
	p, err := newParentRef("productId", "p1")
	require.NoError(t, err)
	items := func(n int) []review {
		out := make([]review, n)
		for i := range out {
			out[i] = review{ID: fmt.Sprintf("review-%06d", i), Stars: i % 5}
		}
		return out
	}
	best := func(items []review) time.Duration {
		fastest := time.Duration(1 << 62)
		for range 3 {
			start := time.Now()
			_, err := r.encodeAll(items, p)
			require.NoError(t, err)
			fastest = min(fastest, time.Since(start))
		}
		return fastest
	}
	small, large := best(items(1000)), best(items(16000))
	mongotest.Detail(t, "encodeAll: 1,000 items %v, 16,000 items %v (ratio %.1f)", small, large, float64(large)/float64(small))
	require.Less(t, float64(large)/float64(small), 64.0, "16 times the items take about 16 times as long, not 256")
}

// TestErrNoParentIsNotFound checks that a missing parent is reported as
// patterns.ErrNotFound.
func TestErrNoParentIsNotFound(t *testing.T) {
	require.True(t, errors.Is(errNoParent, patterns.ErrNotFound))
}

// TestValidateIDAgreesWithPatterns checks the fast path plainID and
// newParentRef against patterns.ValidateID, which they must never
// contradict.
func TestValidateIDAgreesWithPatterns(t *testing.T) {
	ids := []any{
		"a", "", bson.NewObjectID(), bson.ObjectID{}, 1, 0, int32(-3), int32(0), int64(9), int64(0),
		7.5, 0.0, nil, bson.M{"$ne": nil}, bson.D{}, bson.A{1}, bson.Regex{Pattern: "."}, true, false,
		bson.Null{}, bson.MinKey{}, make(chan int),
	}
	for _, id := range ids {
		want := patterns.ValidateID(id)
		if typ, data, err := bson.MarshalValue(id); err == nil {
			raw := bson.RawValue{Type: typ, Value: data}
			if plainID(raw) {
				require.NoError(t, want, "%T %v", id, id)
			}
			if want == nil {
				require.NoError(t, validateRawID(raw), "%T %v", id, id)
			}
		}
		_, err := newParentRef("p", id)
		require.Equal(t, want == nil, err == nil, "%T %v", id, id)
	}
}

// TestTypeOrderCoversEveryAcceptedValue checks that Page can continue
// after every id and sort value the repository accepts: each has a place
// in the sort order, and a deprecated symbol, which has none, is refused.
func TestTypeOrderCoversEveryAcceptedValue(t *testing.T) {
	dec, err := bson.ParseDecimal128("1.5")
	require.NoError(t, err)
	values := []any{
		int32(1), int64(2), 2.5, dec, "s", bson.Binary{Data: []byte{1}}, bson.NewObjectID(), true,
		bson.NewDateTimeFromTime(time.Now()), bson.Timestamp{T: 1, I: 1}, bson.Symbol("s"),
		bson.Null{}, bson.MinKey{}, bson.MaxKey{}, bson.Undefined{}, bson.Regex{Pattern: "."}, bson.JavaScript("x"),
		bson.A{1}, bson.D{{Key: "a", Value: 1}},
	}
	for _, v := range values {
		raw := rawValue(t, v)
		for name, err := range map[string]error{"sort value": checkScalar(raw), "id": validateRawID(raw)} {
			if err == nil {
				require.True(t, acceptedType(raw.Type), "%s %T is accepted and has a place in the type order", name, v)
			} else {
				require.ErrorIs(t, err, patterns.ErrInvalid, "%s %T", name, v)
			}
		}
		if _, ok := v.(bson.Symbol); ok {
			require.Error(t, checkScalar(raw), "symbol sort value")
			require.Error(t, validateRawID(raw), "symbol id")
		}
	}
}
