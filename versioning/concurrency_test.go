package versioning_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/versioning"
)

// UserV1 is the shape of the release before versioning moved to v3: during
// a rolling deploy, its code still runs next to the new one.
type UserV1 struct {
	ID     string `bson:"_id"`
	Name   string `bson:"name"`
	Mail   string `bson:"mail"`
	Visits int    `bson:"visits"`
}

func oldRelease(t testing.TB, db *mongo.Database, p versioning.Plan) *versioning.Repo[UserV1] {
	t.Helper()
	return newRepo[UserV1](t, db, p, versioning.Config{Collection: "users", Current: 1})
}

// TestWriteBetweenReadAndWriteBackIsNotLost makes the race happen on
// purpose: the migration itself, run by a reader between its read and its
// write-back, lets a writer change the document. The reader's write-back
// must lose, re-read, and return the writer's change.
func TestWriteBetweenReadAndWriteBackIsNotLost(t *testing.T) {
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, p versioning.Plan) {
		writers := map[string]func(ctx context.Context, db *mongo.Database, r *versioning.Repo[User]) error{
			// The old release keeps the version at 1: only the revision
			// tells the reader that the document changed.
			"older release": func(ctx context.Context, db *mongo.Database, _ *versioning.Repo[User]) error {
				return oldRelease(t, db, p).Update(ctx, "ada", incVisits)
			},
			// The current release migrates the document before updating it.
			"current release": func(ctx context.Context, _ *mongo.Database, r *versioning.Repo[User]) error {
				return r.Update(ctx, "ada", incVisits)
			},
			// Code outside the package is covered when it sets a new revision.
			"raw driver setting the revision": func(ctx context.Context, db *mongo.Database, _ *versioning.Repo[User]) error {
				_, err := db.Collection("users").UpdateOne(ctx, bson.D{{Key: "_id", Value: "ada"}},
					bson.D{{Key: "$inc", Value: bson.D{{Key: "visits", Value: 1}}}, {Key: "$set", Value: bson.D{{Key: "_rev", Value: bson.NewObjectID()}}}})
				return err
			},
		}
		for name, write := range writers {
			t.Run(name, func(t *testing.T) {
				ctx := context.Background()
				db := mongotest.DB(t)
				_, err := oldRelease(t, db, p).Insert(ctx, UserV1{ID: "ada", Name: "Ada Lovelace", Mail: "ada@example.com"})
				require.NoError(t, err)

				var runs atomic.Int32
				var r *versioning.Repo[User]
				r = newUsers(t, db, p, func(c *versioning.Config) {
					c.Migrations[1].Up = func(d *versioning.Doc) error {
						if runs.Add(1) == 1 {
							require.NoError(t, write(ctx, db, r))
						}
						return splitName(d)
					}
				})
				u, err := r.Get(ctx, "ada")
				require.NoError(t, err)
				require.Equal(t, 1, u.Visits, "Get returns the writer's change")
				got, err := r.Get(ctx, "ada")
				require.NoError(t, err)
				require.Equal(t, User{ID: "ada", First: "Ada", Last: "Lovelace", Email: "ada@example.com", Locale: "en", Visits: 1}, got)
				require.Equal(t, int32(3), stored(t, db.Collection("users"), "ada").Lookup("schemaVersion").Int32())
				require.GreaterOrEqual(t, runs.Load(), int32(2), "the reader lost its write-back and migrated again what it re-read")
			})
		}
	})
}

// TestWritersAndLazyReadersHammerOldDocuments: readers migrate v1
// documents lazily while a writer of this release and a writer of the old
// release increment them. Every increment that reported success is in the
// final documents, exactly.
func TestWritersAndLazyReadersHammerOldDocuments(t *testing.T) {
	mongotest.RunPlans(t, versioning.PlanFor, func(t *testing.T, p versioning.Plan) {
		ctx := context.Background()
		db := mongotest.DB(t)
		old := oldRelease(t, db, p)
		var migrations atomic.Int32
		r := newUsers(t, db, p, func(c *versioning.Config) {
			up := c.Migrations[1].Up
			c.Migrations[1].Up = func(d *versioning.Doc) error { migrations.Add(1); return up(d) }
		})
		const docs, readers, passes, incs = 20, 4, 3, 5
		ids := make([]string, docs)
		for i := range ids {
			ids[i] = fmt.Sprintf("u%02d", i)
			_, err := old.Insert(ctx, UserV1{ID: ids[i], Name: "Ada Lovelace", Mail: "ada@example.com"})
			require.NoError(t, err)
		}

		var wg sync.WaitGroup
		var oldWrites atomic.Int32
		errs := make(chan error, docs*(readers*passes+incs+1))
		wg.Go(func() { // the old release: refused once a document is migrated
			for _, id := range ids {
				err := old.Update(ctx, id, incVisits)
				if errors.Is(err, versioning.ErrNewerSchema) {
					continue
				}
				if err == nil {
					oldWrites.Add(1)
				}
				errs <- err
			}
		})
		wg.Go(func() {
			for range incs {
				for _, id := range ids {
					errs <- r.Update(ctx, id, incVisits)
				}
			}
		})
		for range readers {
			wg.Go(func() {
				for range passes {
					for _, id := range ids {
						_, err := r.Get(ctx, id)
						errs <- err
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}

		total := 0
		for u, err := range r.Find(ctx, nil) {
			require.NoError(t, err)
			require.Equal(t, "Ada", u.First)
			total += u.Visits
		}
		require.Equal(t, docs*incs+int(oldWrites.Load()), total, "no increment lost")
		s, err := r.Stats(ctx)
		require.NoError(t, err)
		require.Equal(t, map[int]int64{3: docs}, s.Versions)
		mongotest.Detail(t, "%d old-release increments landed; %d migrations ran for %d documents (the excess is lost races)", oldWrites.Load(), migrations.Load(), docs)
	})
}
