package extref_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/extref"
	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

func TestMain(m *testing.M) { mongotest.Main(m) }

// The documents of the tests: customers copied into orders (a single
// embedded document), products copied into the items of carts (copies in
// array elements) and into a featured collection.

type Customer struct {
	ID    int    `bson:"_id"`
	Name  string `bson:"name"`
	Email string `bson:"email"`
	Notes string `bson:"notes"` // not copied
}

type CustomerRef struct {
	ID    int    `bson:"id"`
	Name  string `bson:"name"`
	Email string `bson:"email"`
}

type Order struct {
	ID       int         `bson:"_id"`
	Customer CustomerRef `bson:"customer"`
	Total    int         `bson:"total"`
}

type Product struct {
	ID    int     `bson:"_id"`
	Name  string  `bson:"name"`
	Price float64 `bson:"price"`
	Stock int     `bson:"stock"` // not copied
}

type ProductRef struct {
	ID    int     `bson:"id"`
	Name  string  `bson:"name"`
	Price float64 `bson:"price"`
}

type Item struct {
	Product ProductRef `bson:"product"`
	Qty     int        `bson:"qty"`
}

type Cart struct {
	ID    int    `bson:"_id"`
	Items []Item `bson:"items"`
}

var ctx = context.Background()

// customerRefs copies customers into orders' customer, on plan p when one
// is given (else on the server's own).
func customerRefs(t testing.TB, db *mongo.Database, p ...extref.Plan) *extref.Ref[CustomerRef] {
	t.Helper()
	return refs[CustomerRef](t, db, "customers", []extref.Target{{Collection: "orders", Path: "customer"}}, p)
}

// refs builds a repository, creates its indexes and forces plan p[0] when
// given.
func refs[S any](t testing.TB, db *mongo.Database, source string, targets []extref.Target, p []extref.Plan) *extref.Ref[S] {
	t.Helper()
	r, err := extref.New[S](db, extref.Config{Source: source, Targets: targets})
	require.NoError(t, err)
	require.NoError(t, patterns.EnsureIndexes(ctx, r.Indexes()...))
	for _, p := range p {
		extref.ForcePlan(r, p)
	}
	return r
}

// productRefs copies products into carts' items and into featured's
// product (one array target and one single target), on plan p when one is
// given.
func productRefs(t testing.TB, db *mongo.Database, p ...extref.Plan) *extref.Ref[ProductRef] {
	t.Helper()
	return refs[ProductRef](t, db, "products", []extref.Target{
		{Collection: "carts", Path: "items[].product"},
		{Collection: "featured", Path: "product"},
	}, p)
}

// cartRefs copies products into carts' items only, on plan p when one is
// given.
func cartRefs(t testing.TB, db *mongo.Database, p ...extref.Plan) *extref.Ref[ProductRef] {
	t.Helper()
	return refs[ProductRef](t, db, "products", []extref.Target{{Collection: "carts", Path: "items[].product"}}, p)
}

// portable is the plan of a server with no optional feature.
func portable() extref.Plan { return extref.PlanFor(mongotest.Portable()) }

// has reports whether p, a plan that mongotest.RunPlans gives, is made
// for a server with feature f.
func has(p extref.Plan, f patterns.Feature) bool {
	for _, srv := range []*patterns.Server{mongotest.Server(), mongotest.Native()} {
		if p == extref.PlanFor(srv) {
			return srv.Has(f)
		}
	}
	return mongotest.Portable().Has(f)
}

// withOrders returns a fresh database holding customers and orders as
// seedOrders stores them, and their repository on plan p when one is given.
func withOrders(t testing.TB, nCustomers, nOrders int, p ...extref.Plan) (*mongo.Database, *extref.Ref[CustomerRef]) {
	t.Helper()
	db := mongotest.DB(t)
	r := customerRefs(t, db, p...)
	seedOrders(t, db, r, nCustomers, nOrders)
	return db, r
}

// withCarts returns a fresh database holding products, carts and featured
// documents as seedCarts stores them, and their repository on plan p when
// one is given.
func withCarts(t testing.TB, nProducts, nCarts int, p ...extref.Plan) (*mongo.Database, *extref.Ref[ProductRef]) {
	t.Helper()
	db := mongotest.DB(t)
	r := productRefs(t, db, p...)
	seedCarts(t, db, r, nProducts, nCarts)
	return db, r
}

// insertAll inserts docs in batches of 500, so that setup stays fast on
// FerretDB.
func insertAll[T any](t testing.TB, coll *mongo.Collection, docs []T) {
	t.Helper()
	for start := 0; start < len(docs); start += 500 {
		batch := make([]any, 0, 500)
		for _, d := range docs[start:min(start+500, len(docs))] {
			batch = append(batch, d)
		}
		_, err := coll.InsertMany(ctx, batch)
		require.NoError(t, err)
	}
}

// seedOrders stores customers 1..nCustomers and orders 1..nOrders, order i
// belonging to customer i%nCustomers+1, each embedding Of(customer).
func seedOrders(t testing.TB, db *mongo.Database, r *extref.Ref[CustomerRef], nCustomers, nOrders int) {
	t.Helper()
	customers := make([]Customer, nCustomers)
	for i := range customers {
		customers[i] = Customer{ID: i + 1, Name: fmt.Sprintf("Customer %d", i+1), Email: fmt.Sprintf("c%d@example.com", i+1), Notes: "vip"}
	}
	insertAll(t, db.Collection("customers"), customers)
	refs := ofAll(t, r, nCustomers)
	orders := make([]Order, nOrders)
	for i := range orders {
		orders[i] = Order{ID: i + 1, Customer: refs[i%nCustomers], Total: 10 * i}
	}
	insertAll(t, db.Collection("orders"), orders)
}

// ofAll returns the copies of sources 1..n.
func ofAll[S any](t testing.TB, r *extref.Ref[S], n int) []S {
	t.Helper()
	refs := make([]S, n)
	for i := range refs {
		var err error
		refs[i], err = r.Of(ctx, i+1)
		require.NoError(t, err)
	}
	return refs
}

// seedCarts stores products 1..nProducts, nCarts carts of 1 to 5 distinct
// products each, and one featured document per product.
func seedCarts(t testing.TB, db *mongo.Database, r *extref.Ref[ProductRef], nProducts, nCarts int) {
	t.Helper()
	products := make([]Product, nProducts)
	for i := range products {
		products[i] = Product{ID: i + 1, Name: fmt.Sprintf("Product %d", i+1), Price: float64(i) + 0.5, Stock: 100}
	}
	insertAll(t, db.Collection("products"), products)
	refs := ofAll(t, r, nProducts)
	rng := rand.New(rand.NewPCG(1, 2))
	carts := make([]Cart, nCarts)
	for i := range carts {
		carts[i].ID = i + 1
		for _, p := range rng.Perm(nProducts)[:min(nProducts, 1+rng.IntN(5))] {
			carts[i].Items = append(carts[i].Items, Item{Product: refs[p], Qty: 1 + rng.IntN(3)})
		}
	}
	insertAll(t, db.Collection("carts"), carts)
	featured := make([]bson.D, nProducts)
	for i := range featured {
		featured[i] = bson.D{{Key: "_id", Value: i + 1}, {Key: "product", Value: refs[i]}}
	}
	insertAll(t, db.Collection("featured"), featured)
}

// snapshot returns every document of coll by _id.
func snapshot(t testing.TB, coll *mongo.Collection) map[int32]bson.Raw {
	t.Helper()
	cur, err := coll.Find(ctx, bson.D{})
	require.NoError(t, err)
	var docs []bson.Raw
	require.NoError(t, cur.All(ctx, &docs))
	out := make(map[int32]bson.Raw, len(docs))
	for _, d := range docs {
		out[d.Lookup("_id").Int32()] = d
	}
	return out
}

// rename changes a source's name behind the repository's back (as other
// code would), so that its copies become stale.
func rename(t testing.TB, coll *mongo.Collection, id int, name string) {
	t.Helper()
	res, err := coll.UpdateByID(ctx, id, bson.D{{Key: "$set", Value: bson.D{{Key: "name", Value: name}}}})
	require.NoError(t, err)
	require.EqualValues(t, 1, res.ModifiedCount)
}

// verifyStale runs Verify and returns the stale copies per target.
func verifyStale[S any](t testing.TB, r *extref.Ref[S]) []int64 {
	t.Helper()
	reports, err := r.Verify(ctx)
	require.NoError(t, err)
	out := make([]int64, len(reports))
	for i, rep := range reports {
		out[i] = rep.Stale
	}
	return out
}
