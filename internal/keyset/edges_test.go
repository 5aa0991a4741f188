package keyset_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/bsonkinds"
	"github.com/mongopatterns/mongopatterns/internal/keyset"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
)

func attackDec(s string) bson.Decimal128 {
	d, err := bson.ParseDecimal128(s)
	if err != nil {
		panic(err)
	}
	return d
}

// attackScan stores ids (each that the server refuses is skipped, and
// logged), then checks every page size from 1 to 4: the scan yields every
// stored document once, in the order of one find sorted by _id.
func attackScan(t *testing.T, coll *mongo.Collection, ids []any) {
	ctx := context.Background()
	_, err := coll.DeleteMany(ctx, bson.D{})
	require.NoError(t, err)
	for _, id := range ids {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: id}}); err != nil {
			mongotest.Detail(t, "not stored: %v: %v", id, err)
		}
	}
	want := sortedIDs(t, coll)
	if len(want) == 0 {
		t.Skip("the server stored none of them")
	}
	for size := 1; size <= 4; size++ {
		var got []string
		var scanErr error
		for page, err := range keyset.Pages(ctx, coll, nil, size, 0) {
			if err != nil {
				scanErr = err
				break
			}
			for _, d := range page {
				got = append(got, d.Lookup("_id").String())
			}
		}
		require.NoError(t, scanErr, "pages of %d", size)
		require.Equal(t, want, got, "pages of %d: every stored document once", size)
	}
}

// TestPagesNumberEdges: keyset's doc: "A scan yields each document
// stored before it starts ... once, whatever its _id's value", and numbers
// are "compared by value" (manual, Comparison/Sort Order; the server's
// compareLongToDouble/compareDecimals compare exactly). The generator only
// places odd numbers among small ones, so $gt is never asked to tell apart
// two neighbours past 2^53, two decimals past float64's range, or a
// decimal below float64's smallest subnormal.
func TestPagesNumberEdges(t *testing.T) {
	coll := mongotest.DB(t).Collection("c")
	cases := map[string][]any{
		"int64 past 2^53":            {int64(1<<53 + 1), int64(1<<53 + 2), int64(1<<53 + 3), int64(math.MaxInt64 - 1), int64(math.MaxInt64)},
		"double 2^53 then int64s":    {float64(1 << 53), int64(1<<53 + 1), float64(1<<53 + 2), int64(1<<53 + 3)},
		"decimals past float64":      {attackDec("1E+400"), attackDec("2E+400"), attackDec("3E+400"), math.Inf(1)},
		"decimals below float64":     {attackDec("1E-400"), attackDec("2E-400"), attackDec("3E-400"), 5e-324},
		"decimal 34 digits":          {attackDec("0.1000000000000000000000000000000001"), attackDec("0.1000000000000000000000000000000002"), attackDec("0.1000000000000000000000000000000003")},
		"double 0.1 and decimal 0.1": {0.1, attackDec("0.1"), attackDec("0.10000000000000001"), 0.10000000000000002},
	}
	for name, ids := range cases {
		t.Run(name, func(t *testing.T) { attackScan(t, coll, ids) })
	}
}

// TestPagesStringsAndSymbols: keyset's doc: "strings and symbols"
// share one place; "{$gte: ""} reaches the strings and the symbols (which
// {$type: "string"} misses)". The generator's odd-id test stores one
// symbol among numbers only, so After a string never has to reach a
// symbol with $gt (nor a string after a symbol).
func TestPagesStringsAndSymbols(t *testing.T) {
	coll := mongotest.DB(t).Collection("c")
	attackScan(t, coll, []any{"a", bson.Symbol("b"), "c", bson.Symbol("d"), "e", int32(1)})
}

// TestPagesAllIDsTogether: every generated _id at once (the
// generator's test stores one odd _id at a time): MinKey and MaxKey,
// several types past timestamps, symbols beside strings.
func TestPagesAllIDsTogether(t *testing.T) {
	coll := mongotest.DB(t).Collection("c")
	var ids []any
	for _, v := range bsonkinds.IDs() {
		ids = append(ids, v.V)
	}
	attackScan(t, coll, ids)
}

var _ = fmt.Sprint
