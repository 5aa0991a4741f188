package bucket_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/bucket"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// A greenhouse thermometer reports every 15 minutes; its readings go into
// hourly buckets, and the hourly summaries come from the buckets.
func Example() {
	ctx := context.Background()
	client, err := mongo.Connect(options.Client().ApplyURI(os.Getenv("MONGODB_URI")))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Disconnect(ctx)
	db := client.Database("example_bucket")
	defer db.Drop(ctx)

	type Reading struct {
		At      time.Time `bson:"at"`
		Celsius float64   `bson:"celsius"`
	}
	store, err := bucket.New[string, Reading](db, bucket.Config{
		Collection:  "readings",
		TimeField:   "at",
		ValueFields: []string{"celsius"},
		Window:      time.Hour,
		Cap:         120,
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := patterns.EnsureIndexes(ctx, store.Indexes()...); err != nil {
		log.Fatal(err)
	}

	start := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	var batch []bucket.Point[string, Reading]
	for i := range 11 {
		batch = append(batch, bucket.Point[string, Reading]{
			Meta:  "greenhouse-1",
			Value: Reading{At: start.Add(time.Duration(i) * 15 * time.Minute), Celsius: 18 + float64(i)/2},
		})
	}
	if err := store.AddMany(ctx, batch); err != nil {
		log.Fatal(err)
	}
	// A late reading, out of order.
	if err := store.Add(ctx, "greenhouse-1", Reading{At: start.Add(165 * time.Minute), Celsius: 21}); err != nil {
		log.Fatal(err)
	}
	buckets, err := db.Collection("readings").CountDocuments(ctx, bson.D{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("12 readings in %d buckets\n", buckets)

	fmt.Println("from 10:00 to 11:00:")
	for r, err := range store.Range(ctx, "greenhouse-1", start.Add(2*time.Hour), start.Add(3*time.Hour)) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("  %s %.1f°C\n", r.At.UTC().Format("15:04"), r.Celsius)
	}
	fmt.Println("hourly:")
	for s, err := range store.Summaries(ctx, "greenhouse-1", start, start.Add(3*time.Hour), time.Hour) {
		if err != nil {
			log.Fatal(err)
		}
		c := s.Values["celsius"]
		fmt.Printf("  %s %d readings, min %.1f, max %.1f, mean %.3f\n", s.Start.Format("15:04"), s.Count, c.Min, c.Max, c.Mean)
	}
	// Output:
	// 12 readings in 3 buckets
	// from 10:00 to 11:00:
	//   10:00 22.0°C
	//   10:15 22.5°C
	//   10:30 23.0°C
	//   10:45 21.0°C
	// hourly:
	//   08:00 4 readings, min 18.0, max 19.5, mean 18.750
	//   09:00 4 readings, min 20.0, max 21.5, mean 20.750
	//   10:00 4 readings, min 21.0, max 23.0, mean 22.125
}
