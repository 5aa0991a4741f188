package outlier

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// The benchmarks compare the repository with the same work written by
// hand with the driver, through mongotest.Compare: each side has a
// database of its own, seeded identically, and the two run interleaved.

// benchPost is a post that decodes its embedded comments, as a service's
// type would.
type benchPost struct {
	ID       int       `bson:"_id"`
	Title    string    `bson:"title"`
	Comments []comment `bson:"comments"`
	HasExtra bool      `bson:"has_extra"`
	Tail     int64     `bson:"extra_tail"`
}

// benchConfig embeds 50 comments and overflows the rest 100 per document.
var benchConfig = Config{Parents: "posts", Field: "comments", Cap: 50, OverflowCap: 100}

// seedPosts writes, with the driver, parent 1 holding n comments of about
// 100 bytes as the repository stores them (the first 50 embedded, the
// rest 100 per overflow document), into a fresh database.
func seedPosts(b *testing.B, n int) *mongo.Database {
	b.Helper()
	ctx := context.Background()
	db := mongotest.DB(b)
	all := make([]comment, n)
	for i := range all {
		all[i] = comment{ID: fmt.Sprintf("c%06d", i), Text: strings.Repeat("x", 80)}
	}
	embedded := all[:min(n, benchConfig.Cap)]
	rest := all[len(embedded):]
	var docs []any
	for seq := 0; len(rest) > 0; seq++ {
		k := min(len(rest), benchConfig.OverflowCap)
		docs = append(docs, bson.D{
			{Key: fParent, Value: 1}, {Key: fSeq, Value: int64(seq)}, {Key: fCount, Value: int64(k)},
			{Key: fBytes, Value: int64(0)}, {Key: fItems, Value: rest[:k]},
		})
		rest = rest[k:]
	}
	parent := benchPost{ID: 1, Title: "viral", Comments: embedded, HasExtra: len(docs) > 0, Tail: int64(max(len(docs)-1, 0))}
	if _, err := db.Collection("posts").InsertOne(ctx, parent); err != nil {
		b.Fatal(err)
	}
	if len(docs) > 0 {
		if _, err := db.Collection("posts_overflow").InsertMany(ctx, docs); err != nil {
			b.Fatal(err)
		}
	}
	return db
}

// benchRepo is the repository over db, on the server's own plan.
func benchRepo[P any](b *testing.B, db *mongo.Database) *Repo[P, comment] {
	b.Helper()
	r, err := New[P, comment](db, benchConfig)
	if err != nil {
		b.Fatal(err)
	}
	if err := patterns.EnsureIndexes(context.Background(), r.Indexes()...); err != nil {
		b.Fatal(err)
	}
	return r
}

// handOverflow is how the baselines read post 1's overflow documents, by
// hand: in seq order, through a cursor of batch documents per round trip,
// decoding one document at a time and handing its comments to use.
func handOverflow(b *testing.B, overflow *mongo.Collection, batch int32, use func([]comment)) {
	ctx := context.Background()
	cur, err := overflow.Find(ctx, bson.D{{Key: "parent", Value: 1}}, options.Find().
		SetSort(bson.D{{Key: "seq", Value: 1}}).
		SetProjection(bson.D{{Key: "_id", Value: 0}, {Key: "items", Value: 1}}).
		SetBatchSize(batch))
	if err != nil {
		b.Fatal(err)
	}
	for cur.Next(ctx) {
		var doc struct {
			Items []comment `bson:"items"`
		}
		if err := cur.Decode(&doc); err != nil {
			b.Fatal(err)
		}
		use(doc.Items)
	}
	if err := cur.Close(ctx); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkGet loads a post and its comments: an ordinary post (20
// comments, one command) and an outlier (1,000: two commands). P has a
// field for the embedded comments. The baseline decodes the post, then its
// overflow documents in seq order, appending their items to the post's.
func BenchmarkGet(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{20, 1000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			mongotest.Compare(b, mongotest.Comparison{
				Library: func(b *testing.B) func(int) {
					r := benchRepo[benchPost](b, seedPosts(b, n))
					return func(int) {
						_, items, err := r.Get(ctx, 1)
						if err != nil || len(items) != n {
							b.Fatalf("got %d items, %v", len(items), err)
						}
					}
				},
				Baseline: func(b *testing.B) func(int) {
					db := seedPosts(b, n)
					posts, overflow := db.Collection("posts"), db.Collection("posts_overflow")
					return func(int) {
						var p benchPost
						if err := posts.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&p); err != nil {
							b.Fatal(err)
						}
						items := p.Comments
						if p.HasExtra {
							handOverflow(b, overflow, int32(min(p.Tail+2, math.MaxInt32)), func(c []comment) { items = append(items, c...) })
						}
						if len(items) != n {
							b.Fatalf("got %d items", len(items))
						}
					}
				},
				Speed:  0.9,
				Allocs: 1.1,
			})
		})
	}
}

// BenchmarkItems streams an outlier's 1,000 and 10,000 comments with
// bounded memory (10 overflow documents, 1,000 comments, per round trip).
// The baseline reads the parent's array and flag, then the overflow
// documents through a cursor of the same batch size, decoding one
// document at a time.
func BenchmarkItems(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{1000, 10000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			mongotest.Compare(b, mongotest.Comparison{
				Library: func(b *testing.B) func(int) {
					r := benchRepo[post](b, seedPosts(b, n))
					return func(int) {
						count := 0
						for _, err := range r.Items(ctx, 1) {
							if err != nil {
								b.Fatal(err)
							}
							count++
						}
						if count != n {
							b.Fatalf("streamed %d items", count)
						}
					}
				},
				Baseline: func(b *testing.B) func(int) {
					db := seedPosts(b, n)
					posts, overflow := db.Collection("posts"), db.Collection("posts_overflow")
					batch := int32(DefaultBatchItems / benchConfig.OverflowCap)
					return func(int) {
						var p struct {
							Comments []comment `bson:"comments"`
							HasExtra bool      `bson:"has_extra"`
						}
						err := posts.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}, options.FindOne().
							SetProjection(bson.D{{Key: "comments", Value: 1}, {Key: "has_extra", Value: 1}})).Decode(&p)
						if err != nil {
							b.Fatal(err)
						}
						count := len(p.Comments)
						if p.HasExtra {
							handOverflow(b, overflow, batch, func(c []comment) { count += len(c) })
						}
						if count != n {
							b.Fatalf("streamed %d items", count)
						}
					}
				},
				Speed:  0.9,
				Allocs: 1.1,
			})
		})
	}
}

// perParent is how many comments BenchmarkAppend appends to a post before
// it moves to the next: the workload is the same whatever b.N, and no
// post comes near Cap.
const perParent = 20

// seedOpenPosts writes, with the driver, open posts enough for b.N
// appends of BenchmarkAppend, into a fresh database.
func seedOpenPosts(b *testing.B) *mongo.Database {
	b.Helper()
	db := mongotest.DB(b)
	posts := make([]any, b.N/perParent+1)
	for i := range posts {
		posts[i] = bson.D{{Key: "_id", Value: i + 1}, {Key: "comments", Value: bson.A{}},
			{Key: "has_extra", Value: false}, {Key: "extra_tail", Value: int64(0)}}
	}
	if _, err := db.Collection("posts").InsertMany(context.Background(), posts); err != nil {
		b.Fatal(err)
	}
	return db
}

// BenchmarkAppend appends one comment to an open post, moving to a new
// post every 20 appends. The baseline is the same work written by hand:
// where the server refuses documents past 16 MiB (the native plan), a
// guarded $push, {_id, comments.49: {$exists: false}, $nor:
// [{comments._id: {$in: [id]}}]}; elsewhere (the portable plan) a read of the post, to
// check its size, then the $push guarded on the number of comments read.
func BenchmarkAppend(b *testing.B) {
	ctx := context.Background()
	native := PlanFor(mongotest.Server()).serverSizeLimit
	newComment := func(i int) comment { return comment{ID: "c" + strconv.Itoa(i), Text: "hello"} }
	mongotest.Compare(b, mongotest.Comparison{
		Library: func(b *testing.B) func(int) {
			r := benchRepo[post](b, seedOpenPosts(b))
			return func(i int) {
				if err := r.Append(ctx, i/perParent+1, newComment(i)); err != nil {
					b.Fatal(err)
				}
			}
		},
		Baseline: func(b *testing.B) func(int) {
			posts := seedOpenPosts(b).Collection("posts")
			return func(i int) {
				c := newComment(i)
				at := benchConfig.Cap - 1
				if !native {
					raw, err := posts.FindOne(ctx, bson.D{{Key: "_id", Value: i/perParent + 1}}).Raw()
					if err != nil {
						b.Fatal(err)
					}
					arr, _ := raw.Lookup("comments").Array().Values()
					elem, _ := bson.Marshal(c)
					if len(raw)+elementSize(len(arr), len(elem)) > patterns.MaxDocumentSize {
						b.Fatal("full")
					}
					at = len(arr)
				}
				res, err := posts.UpdateOne(ctx, bson.D{
					{Key: "_id", Value: i/perParent + 1},
					{Key: "comments." + strconv.Itoa(at), Value: bson.D{{Key: "$exists", Value: false}}},
					{Key: "$nor", Value: bson.A{bson.D{{Key: "comments._id", Value: bson.D{{Key: "$in", Value: bson.A{c.ID}}}}}}},
				}, bson.D{{Key: "$push", Value: bson.D{{Key: "comments", Value: c}}}})
				if err != nil || res.MatchedCount != 1 {
					b.Fatal(res, err)
				}
			}
		},
		Speed:  0.9,
		Allocs: 1.1,
	})
}

// BenchmarkPage reads a page of 20 comments of an outlier of 1,000: the
// first (in the parent: one command) and a deep one (comments 581-600, in
// overflow documents 5 and 6: the parent's flag, then one find from
// document 5). The baseline does the same reads by hand: the parent's
// array and flag, or its flag (whether the parent exists: Page's godoc
// promises a deleted parent's leftover overflow is never read) and the
// two overflow documents by {parent, seq}, decoded whole, and takes the
// 20. (Without the flag's read the baseline does less than Page
// promises: 0.70x, one round trip of two.)
func BenchmarkPage(b *testing.B) {
	ctx := context.Background()
	const n, limit = 1000, 20
	for _, tc := range []struct {
		name string
		skip int // the comments before the page
	}{{"first", 0}, {"deep", 581}} {
		b.Run(tc.name, func(b *testing.B) {
			mongotest.Compare(b, mongotest.Comparison{
				Library: func(b *testing.B) func(int) {
					r := benchRepo[post](b, seedPosts(b, n))
					var after Cursor
					if tc.skip > 0 {
						var err error
						if _, after, err = r.Page(ctx, 1, Cursor{}, tc.skip); err != nil {
							b.Fatal(err)
						}
					}
					return func(int) {
						items, _, err := r.Page(ctx, 1, after, limit)
						if err != nil || len(items) != limit || items[0].ID != fmt.Sprintf("c%06d", tc.skip) {
							b.Fatalf("got %d items, %v", len(items), err)
						}
					}
				},
				Baseline: func(b *testing.B) func(int) {
					db := seedPosts(b, n)
					posts, overflow := db.Collection("posts"), db.Collection("posts_overflow")
					return func(int) {
						var items []comment
						if tc.skip == 0 {
							var p struct {
								Comments []comment `bson:"comments"`
								HasExtra bool      `bson:"has_extra"`
							}
							err := posts.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}, options.FindOne().
								SetProjection(bson.D{{Key: "comments", Value: 1}, {Key: "has_extra", Value: 1}})).Decode(&p)
							if err != nil {
								b.Fatal(err)
							}
							items = p.Comments[:limit]
						} else {
							var p struct {
								HasExtra bool `bson:"has_extra"`
							}
							if err := posts.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}, options.FindOne().
								SetProjection(bson.D{{Key: "has_extra", Value: 1}})).Decode(&p); err != nil || !p.HasExtra {
								b.Fatal(p, err)
							}
							seq := (tc.skip - benchConfig.Cap) / benchConfig.OverflowCap
							cur, err := overflow.Find(ctx, bson.D{{Key: "parent", Value: 1}, {Key: "seq", Value: bson.D{{Key: "$gte", Value: int64(seq)}}}},
								options.Find().SetSort(bson.D{{Key: "seq", Value: 1}}).
									SetProjection(bson.D{{Key: "_id", Value: 0}, {Key: "seq", Value: 1}, {Key: "items", Value: 1}}).
									SetLimit(2).SetBatchSize(3))
							if err != nil {
								b.Fatal(err)
							}
							var docs []struct {
								Items []comment `bson:"items"`
							}
							if err := cur.All(ctx, &docs); err != nil {
								b.Fatal(err)
							}
							at := (tc.skip - benchConfig.Cap) % benchConfig.OverflowCap
							items = append(docs[0].Items[at:], docs[1].Items...)[:limit]
						}
						if len(items) != limit || items[0].ID != fmt.Sprintf("c%06d", tc.skip) {
							b.Fatalf("got %d items", len(items))
						}
					}
				},
				Speed:  0.9,
				Allocs: 1.1,
			})
		})
	}
}

// BenchmarkUpdate edits a comment of an outlier of 1,000: one in the
// parent and one in an overflow document, each time with a new text. The
// baseline is the same work by hand: where the server has arrayFilters
// (the native plan), an update of the parent by the comment's id, and
// when it matches nothing, a find of the overflow document holding it and
// an update of its element, guarded on it, with its bytes; elsewhere a
// read of the parent first, and its element set by index; on collections
// with the repository's indexes (their upkeep is part of every write).
//
// Update/overflow sends the baseline's three commands; on FerretDB 2.7
// it measured 0.85x [0.82, 0.88], MISSED, on a loaded machine
// (2026-12-02), and 0.93x [0.91, 0.94], met, on a quiet one (2026-12-03),
// with the same indexes (0.64x against a baseline without them). The time
// goes to the first update's filter: median 1.90 ms against the
// baseline's 1.24 ms over 200 runs (the holder's find 1.39 and 1.37 ms,
// the overflow update 3.95 and 4.21 ms). That filter tells in one command
// whether the parent holds the item as given, holds it otherwise, or has
// overflow ($or of the id and the flag, $ne of the item, an element in
// the array: see updateParentNative), which the baseline's by-id update
// does not; without it Update would need a read of the parent first.
// Update/parent allocated 159 against the baseline's 136 (1.17x, over
// the goal) while that command was a bson.D; encoded in one buffer
// (updateParentNative), 130 (0.96x, 2026-12-03).
func BenchmarkUpdate(b *testing.B) {
	ctx := context.Background()
	native := PlanFor(mongotest.Server()).arrayFilters
	for _, tc := range []struct{ name, id string }{{"parent", "c000010"}, {"overflow", "c000500"}} {
		b.Run(tc.name, func(b *testing.B) {
			edit := func(i int) comment { return comment{ID: tc.id, Text: "edited " + strconv.Itoa(i)} }
			mongotest.Compare(b, mongotest.Comparison{
				Library: func(b *testing.B) func(int) {
					r := benchRepo[post](b, seedPosts(b, 1000))
					return func(i int) {
						if err := r.Update(ctx, 1, edit(i)); err != nil {
							b.Fatal(err)
						}
					}
				},
				Baseline: func(b *testing.B) func(int) {
					db := seedPosts(b, 1000)
					benchRepo[post](b, db) // the same indexes
					posts, overflow := db.Collection("posts"), db.Collection("posts_overflow")
					find := func(arr bson.RawArray) (int, bson.RawValue) {
						vals, _ := arr.Values()
						for i, v := range vals {
							if v.Document().Lookup("_id").StringValue() == tc.id {
								return i, v
							}
						}
						return -1, bson.RawValue{}
					}
					return func(i int) {
						c := edit(i)
						raw, err := bson.Marshal(c)
						if err != nil {
							b.Fatal(err)
						}
						if native {
							res, err := posts.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "comments._id", Value: tc.id}},
								bson.D{{Key: "$set", Value: bson.D{{Key: "comments.$[e]", Value: bson.Raw(raw)}}}},
								options.UpdateOne().SetArrayFilters([]any{bson.D{{Key: "e._id", Value: tc.id}}}))
							if err != nil {
								b.Fatal(err)
							}
							if res.MatchedCount == 1 {
								return
							}
						} else {
							p, err := posts.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Raw()
							if err != nil {
								b.Fatal(err)
							}
							if at, old := find(p.Lookup("comments").Array()); at >= 0 {
								res, err := posts.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "comments." + strconv.Itoa(at), Value: old}},
									bson.D{{Key: "$set", Value: bson.D{{Key: "comments." + strconv.Itoa(at), Value: bson.Raw(raw)}}}})
								if err != nil || res.MatchedCount != 1 {
									b.Fatal(res, err)
								}
								return
							}
						}
						doc, err := overflow.FindOne(ctx, bson.D{{Key: "parent", Value: 1}, {Key: "items._id", Value: tc.id}},
							options.FindOne().SetProjection(bson.D{{Key: "seq", Value: 1}, {Key: "bytes", Value: 1}, {Key: "items", Value: 1}})).Raw()
						if err != nil {
							b.Fatal(err)
						}
						at, old := find(doc.Lookup("items").Array())
						delta := len(raw) - len(old.Value)
						res, err := overflow.UpdateOne(ctx, bson.D{{Key: "parent", Value: 1}, {Key: "seq", Value: doc.Lookup("seq").Int64()},
							{Key: "items." + strconv.Itoa(at), Value: old}},
							bson.D{{Key: "$set", Value: bson.D{{Key: "items." + strconv.Itoa(at), Value: bson.Raw(raw)}}},
								{Key: "$inc", Value: bson.D{{Key: "bytes", Value: int64(delta)}}}})
						if err != nil || res.MatchedCount != 1 {
							b.Fatal(res, err)
						}
					}
				},
				Speed:  0.9,
				Allocs: 1.1,
			})
		})
	}
}

// scalePosts is the data of the scaling benchmarks over the number of
// posts: at size n, posts 1..n with ten embedded comments each (no
// overflow), as the repository stores them.
func scalePosts(b *testing.B, op func(r *Repo[post, comment], n int) func(i int), writes bool) {
	db := mongotest.DB(b)
	r := benchRepo[post](b, db)
	mongotest.Scaling(b, mongotest.Growth{
		Grow: func(b *testing.B, from, to int) {
			mongotest.InsertN(b, db.Collection("posts"), from, to, func(i int) any {
				cs := make([]comment, 10)
				for j := range cs {
					cs[j] = comment{ID: fmt.Sprintf("c%02d", j), Text: "hello"}
				}
				return benchPost{ID: i + 1, Title: "post", Comments: cs}
			})
		},
		Op:     func(_ *testing.B, n int) func(int) { return op(r, n) },
		Bound:  mongotest.Flat,
		Writes: writes,
	})
}

// BenchmarkScaleAppend measures how Append of one comment grows with the
// number of posts: flat (the guarded $push finds the post by _id). Each
// append goes to another post, so that none nears Cap.
func BenchmarkScaleAppend(b *testing.B) {
	scalePosts(b, func(r *Repo[post, comment], n int) func(int) {
		return func(i int) {
			c := comment{ID: fmt.Sprintf("a%07d-%07d", n, i), Text: "hello"}
			if err := r.Append(context.Background(), i%n+1, c); err != nil {
				b.Fatal(err)
			}
		}
	}, true)
}

// BenchmarkScaleGet measures how Get of a post with its ten comments
// grows with the number of posts: flat (by _id).
func BenchmarkScaleGet(b *testing.B) {
	scalePosts(b, func(r *Repo[post, comment], _ int) func(int) {
		return func(int) {
			if _, cs, err := r.Get(context.Background(), 1); err != nil || len(cs) != 10 {
				b.Fatal(len(cs), err)
			}
		}
	}, false)
}

// BenchmarkScalePage measures how Page of a post's first five comments
// grows with the number of posts: flat (by _id).
func BenchmarkScalePage(b *testing.B) {
	scalePosts(b, func(r *Repo[post, comment], _ int) func(int) {
		return func(int) {
			if cs, _, err := r.Page(context.Background(), 1, Cursor{}, 5); err != nil || len(cs) != 5 {
				b.Fatal(len(cs), err)
			}
		}
	}, false)
}

// scaleOutlier is the data of the scaling benchmarks over the size of one
// outlier: at size n, post 1 holding n comments (the first 50 embedded,
// the rest 100 per overflow document), appended by the repository in
// batches of 100 as the data grows.
func scaleOutlier(b *testing.B, sizes []int, bound mongotest.Bound, op func(r *Repo[post, comment], n int) func(i int)) {
	db := mongotest.DB(b)
	r := benchRepo[post](b, db)
	ctx := context.Background()
	if _, err := r.Insert(ctx, post{ID: 1, Title: "viral"}); err != nil {
		b.Fatal(err)
	}
	mongotest.Scaling(b, mongotest.Growth{
		Sizes: sizes,
		Grow: func(b *testing.B, from, to int) {
			for i := from; i < to; i += 100 {
				cs := make([]comment, min(100, to-i))
				for j := range cs {
					cs[j] = comment{ID: fmt.Sprintf("c%06d", i+j), Text: strings.Repeat("x", 80)}
				}
				if err := r.Append(ctx, 1, cs...); err != nil {
					b.Fatal(err)
				}
			}
		},
		Op:    func(_ *testing.B, n int) func(int) { return op(r, n) },
		Bound: bound,
	})
}

// BenchmarkScaleGetOutlier measures how Get of a post grows with its
// number of comments: linear, as it reads them all (its godoc: one find
// of the overflow documents, in batches). From 3,000 comments to 30,000:
// below, the fixed cost of the call (about 3 ms on FerretDB 2, loaded, the
// time of some 500 comments) flattens the fitted slope (10^2..10^4
// measured 0.61; 10^3..10^4 0.83 [0.80, 0.86], undecided, 2026-12-02).
func BenchmarkScaleGetOutlier(b *testing.B) {
	scaleOutlier(b, []int{3000, 10000, 30000}, mongotest.Linear, func(r *Repo[post, comment], n int) func(int) {
		return func(int) {
			if _, cs, err := r.Get(context.Background(), 1); err != nil || len(cs) != n {
				b.Fatal(len(cs), err)
			}
		}
	})
}

// BenchmarkScalePageDeep measures how Page of the last 20 comments of a
// post grows with its number of comments: flat (one find from the
// overflow document holding the cursor's item, by {parent, seq}).
func BenchmarkScalePageDeep(b *testing.B) {
	scaleOutlier(b, []int{100, 1000, 10000}, mongotest.Flat, func(r *Repo[post, comment], n int) func(int) {
		_, after, err := r.Page(context.Background(), 1, Cursor{}, n-20)
		if err != nil {
			b.Fatal(err)
		}
		return func(int) {
			if cs, _, err := r.Page(context.Background(), 1, after, 20); err != nil || len(cs) != 20 {
				b.Fatal(len(cs), err)
			}
		}
	})
}
