package validation_test

import (
	"context"
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/validation"
)

// BenchmarkCheck compares Check with the same measure written by hand: a
// countDocuments of {$nor: [validator]} and a find of the first 20 by
// _id, with the validator written out as the server takes it. Check adds
// the evaluation of the sample in Go (the first failing field of each).
// Each side has a database of its own with 1,000 users, a tenth invalid.
func BenchmarkCheck(b *testing.B) {
	mongotest.Require(b, patterns.FeatureValidators)
	ctx := context.Background()
	v := users(b, validation.OnlyConstrained())
	p := validation.PlanFor(mongotest.Server())
	filter, err := validation.SendForm(p, v, "the server")
	if err != nil {
		b.Fatal(err)
	}
	prepare := func(b *testing.B) *mongo.Collection {
		coll := mongotest.DB(b).Collection("users")
		docs := make([]any, 1000)
		for i := range docs {
			d := user(fmt.Sprintf("u%04d", i), fmt.Sprintf("u%d@example.com", i))
			if i%10 == 0 {
				d = with(d, "role", "root")
			}
			docs[i] = d
		}
		if _, err := coll.InsertMany(ctx, docs); err != nil {
			b.Fatal(err)
		}
		return coll
	}
	mongotest.Compare(b, mongotest.Comparison{
		Library: func(b *testing.B) func(int) {
			coll := prepare(b)
			return func(int) {
				rep, err := validation.Check(ctx, coll, v)
				if err != nil || rep.Rejected != 100 || len(rep.Sample) != validation.SampleSize {
					b.Fatalf("Check: %+v, %v", rep, err)
				}
			}
		},
		Baseline: func(b *testing.B) func(int) {
			coll := prepare(b)
			rejects := bson.D{{Key: "$nor", Value: bson.A{filter}}}
			return func(int) {
				n, err := coll.CountDocuments(ctx, rejects)
				if err != nil || n != 100 {
					b.Fatalf("count: %d, %v", n, err)
				}
				cur, err := coll.Find(ctx, rejects, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(validation.SampleSize))
				if err != nil {
					b.Fatal(err)
				}
				var docs []bson.Raw
				if err := cur.All(ctx, &docs); err != nil || len(docs) != validation.SampleSize {
					b.Fatalf("sample: %d, %v", len(docs), err)
				}
			}
		},
		Speed: 0.9,
	})
}
