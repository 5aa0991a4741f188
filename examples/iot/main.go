// Command iot stores the readings of greenhouse sensors with the bucket
// pattern: a gateway sends them in batches, they land in hourly buckets
// (one document per sensor and hour, not one per reading), the hourly
// summaries come from the buckets, a dashboard shows each sensor's
// latest reading and a fleet view each sensor's summary over the last
// hour. Old buckets are then expired.
//
//	go -C examples run ./iot
//
// It uses MONGODB_URI when set, otherwise the embedded dev server.
package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/bucket"
	"github.com/mongopatterns/mongopatterns/examples/internal/demo"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Sensor identifies a series: a struct meta, stored as a document.
type Sensor struct {
	Site string `bson:"site"`
	ID   int    `bson:"id"`
}

// Reading is one measurement.
type Reading struct {
	At       time.Time `bson:"at"`
	Celsius  float64   `bson:"celsius"`
	Humidity float64   `bson:"humidity"`
}

func main() { demo.Run("example_iot", run) }

func run(ctx context.Context, db *mongo.Database) error {

	store, err := bucket.New[Sensor, Reading](db, bucket.Config{
		Collection:  "readings",
		TimeField:   "at",
		ValueFields: []string{"celsius", "humidity"},
		Window:      time.Hour,
		Cap:         60,
	})
	if err != nil {
		return err
	}
	if err := patterns.EnsureIndexes(ctx, store.Indexes()...); err != nil {
		return err
	}

	// Three sensors report every 5 minutes from 06:00 to 12:00; the
	// gateway forwards what it has every half hour, in one AddMany, and
	// sends a batch again when the network fails it.
	sensors := []Sensor{{"north", 1}, {"north", 2}, {"south", 1}}
	start := time.Date(2026, 6, 1, 6, 0, 0, 0, time.UTC)
	var batch []bucket.Point[Sensor, Reading]
	total := 0
	for i := range 72 {
		t := start.Add(time.Duration(i) * 5 * time.Minute)
		for k, s := range sensors {
			batch = append(batch, bucket.Point[Sensor, Reading]{Meta: s, Value: reading(t, k)})
		}
		if len(batch) == 6*len(sensors) {
			if err := forward(ctx, store, batch); err != nil {
				return err
			}
			total += len(batch)
			batch = batch[:0]
		}
	}
	buckets, err := db.Collection("readings").CountDocuments(ctx, bson.D{})
	if err != nil {
		return err
	}
	fmt.Printf("%d readings from %d sensors stored in %d hourly buckets\n", total, len(sensors), buckets)

	fmt.Println("hourly summaries of north/1:")
	for s, err := range store.Summaries(ctx, sensors[0], start, start.Add(6*time.Hour), time.Hour) {
		if err != nil {
			return err
		}
		c, h := s.Values["celsius"], s.Values["humidity"]
		fmt.Printf("  %s-%s  %2d readings  %.1f..%.1f °C (mean %.2f)  humidity mean %.1f%%\n",
			s.Start.Format("15:04"), s.End.Format("15:04"), s.Count, c.Min, c.Max, c.Mean, h.Mean)
	}

	fmt.Println("latest reading of each sensor (the dashboard):")
	for _, s := range sensors {
		r, err := store.Latest(ctx, s)
		if err != nil {
			return err
		}
		fmt.Printf("  %s/%d  %s  %.1f °C  humidity %.0f%%\n", s.Site, s.ID, r.At.UTC().Format("15:04"), r.Celsius, r.Humidity)
	}

	// The fleet view at 11:57: one summary per sensor over the last hour,
	// in one aggregate (or, on FerretDB 1.x, two finds), exact although
	// the hour straddles two hourly buckets of each sensor. The sensors
	// come in the order of their stored metas, {id, site}: keys sorted.
	now := start.Add(5*time.Hour + 57*time.Minute)
	fmt.Printf("fleet over the last hour (%s-%s):\n", now.Add(-time.Hour).Format("15:04"), now.Format("15:04"))
	for s, err := range store.SummariesBySeries(ctx, now.Add(-time.Hour), now) {
		if err != nil {
			return err
		}
		c := s.Values["celsius"]
		fmt.Printf("  %s/%d  %2d readings  %.1f..%.1f °C (mean %.2f)\n", s.Meta.Site, s.Meta.ID, s.Count, c.Min, c.Max, c.Mean)
	}

	fmt.Println("south/1 from 11:40:")
	for r, err := range store.Range(ctx, sensors[2], start.Add(5*time.Hour+40*time.Minute), start.Add(6*time.Hour)) {
		if err != nil {
			return err
		}
		fmt.Printf("  %s  %.1f °C\n", r.At.UTC().Format("15:04"), r.Celsius)
	}

	if err := store.DeleteBefore(ctx, start.Add(2*time.Hour)); err != nil {
		return err
	}
	left, err := db.Collection("readings").CountDocuments(ctx, bson.D{})
	if err != nil {
		return err
	}
	fmt.Printf("retention: buckets before 08:00 deleted, %d left\n", left)
	return nil
}

// forward stores a batch, trying up to three times: AddMany is exact to
// retry, so a batch whose first send timed out or lost its connection
// halfway is stored once, whatever had applied. A bad reading is not
// worth another try.
func forward(ctx context.Context, store *bucket.Buckets[Sensor, Reading], batch []bucket.Point[Sensor, Reading]) error {
	var err error
	for attempt := range 3 {
		if attempt > 0 {
			time.Sleep(time.Duration(attempt) * 100 * time.Millisecond)
		}
		if err = store.AddMany(ctx, batch); err == nil || errors.Is(err, patterns.ErrInvalid) || errors.Is(err, patterns.ErrTooLarge) {
			return err
		}
	}
	return err
}

// reading is a made-up, deterministic reading of sensor k at t: warmer
// towards noon, the south side warmer still.
func reading(t time.Time, k int) Reading {
	hours := t.Sub(t.Truncate(24 * time.Hour)).Hours()
	return Reading{
		At:       t,
		Celsius:  math.Round((14+float64(k)+6*math.Sin((hours-6)/12*math.Pi))*10) / 10,
		Humidity: math.Round(80 - 3*hours + float64(k)),
	}
}
