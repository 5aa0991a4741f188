// Command posts shows the outlier pattern on a blog: ordinary posts embed
// their comments; one viral post keeps its first 50 embedded and
// overflows the rest into documents of 20, and reads merge them back.
//
//	go -C examples run ./posts
//
// It uses MONGODB_URI when set; otherwise it starts the embedded dev
// server.
package main

import (
	"context"
	"fmt"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/examples/internal/demo"
	"github.com/mongopatterns/mongopatterns/outlier"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Post is a blog post; its comments are read through the repository.
type Post struct {
	ID    string `bson:"_id"`
	Title string `bson:"title"`
}

// Comment is one comment, identified by its _id within the post.
type Comment struct {
	ID     string `bson:"_id"`
	Author string `bson:"author"`
	Text   string `bson:"text"`
}

func main() { demo.Run("example_posts", blog) }

// blog is what a service would do: everything but the connection.
func blog(ctx context.Context, db *mongo.Database) error {
	posts, err := outlier.New[Post, Comment](db, outlier.Config{
		Parents: "posts", Field: "comments", Cap: 50, OverflowCap: 20,
	})
	if err != nil {
		return err
	}
	if err := patterns.EnsureIndexes(ctx, posts.Indexes()...); err != nil {
		return err
	}

	// Ordinary posts get a handful of comments each.
	for i, n := range []int{3, 7, 12} {
		id := fmt.Sprint("post-", i+1)
		if _, err := posts.Insert(ctx, Post{ID: id, Title: fmt.Sprintf("Ordinary post %d", i+1)}); err != nil {
			return err
		}
		for c := range n {
			if err := posts.Append(ctx, id, Comment{ID: fmt.Sprint(c + 1), Author: "reader", Text: "nice"}); err != nil {
				return err
			}
		}
	}

	// The viral post: four fans post 25 comments each, concurrently,
	// through one repository (safe for concurrent use; each fan's comments
	// keep their order among the others').
	if _, err := posts.Insert(ctx, Post{ID: "viral", Title: "The post everyone comments on"}); err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for w := range 4 {
		wg.Go(func() {
			for c := range 25 {
				comment := Comment{ID: fmt.Sprintf("%d-%02d", w, c), Author: fmt.Sprint("fan ", w), Text: "wow"}
				if err := posts.Append(ctx, "viral", comment); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}

	// The merged read: one command for an ordinary post, two for the
	// viral one (the post, then its overflow documents in seq order).
	for _, id := range []string{"post-2", "viral"} {
		post, comments, err := posts.Get(ctx, id)
		if err != nil {
			return err
		}
		var stored struct {
			Comments []bson.Raw `bson:"comments"`
			HasExtra bool       `bson:"has_extra"`
		}
		if err := db.Collection("posts").FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&stored); err != nil {
			return err
		}
		overflow, err := db.Collection("posts_overflow").CountDocuments(ctx, bson.D{{Key: "parent", Value: id}})
		if err != nil {
			return err
		}
		fmt.Printf("%q: %d comments, %d embedded, has_extra %v, %d overflow documents\n",
			post.Title, len(comments), len(stored.Comments), stored.HasExtra, overflow)
	}

	// Moderation removes a comment from the overflow; documents are not
	// compacted, the order stays.
	if err := posts.Remove(ctx, "viral", "2-20"); err != nil {
		return err
	}
	n, err := posts.Count(ctx, "viral")
	if err != nil {
		return err
	}
	fmt.Printf("after removing comment 2-20: %d comments\n", n)

	// Stream the viral post's comments without loading them all; check
	// that each fan's comments come out in the order they were posted.
	next := make([]int, 4)
	streamed := 0
	for c, err := range posts.Items(ctx, "viral") {
		if err != nil {
			return err
		}
		var w, i int
		if _, err := fmt.Sscanf(c.ID, "%d-%d", &w, &i); err != nil {
			return err
		}
		if i < next[w] {
			return fmt.Errorf("comment %s came after %d-%02d", c.ID, w, next[w]-1)
		}
		next[w] = i + 1
		streamed++
	}
	fmt.Printf("streamed %d comments, each fan's in posting order\n", streamed)

	// The post's page shows comments 41-60 and a "more" button: the page
	// after the cursor the previous page handed the browser, as text. The
	// first page lies in the post (one command); a page from a cursor in
	// the overflow reads from that document on (one command), however deep.
	var more string
	for page := 1; page <= 3; page++ {
		after, err := outlier.ParseCursor(more) // "" is the first page
		if err != nil {
			return err
		}
		comments, next, err := posts.Page(ctx, "viral", after, 20)
		if err != nil {
			return err
		}
		if page == 3 {
			fmt.Printf("page 3, comments 41-60: from %s to %s, more: %v\n", comments[0].ID, comments[len(comments)-1].ID, !next.IsZero())
		}
		more = next.String()
	}

	// An author edits a comment that overflowed: it keeps its place.
	if err := posts.Update(ctx, "viral", Comment{ID: "3-24", Author: "fan 3", Text: "wow (edited)"}); err != nil {
		return err
	}
	for c, err := range posts.Items(ctx, "viral") {
		if err != nil {
			return err
		}
		if c.ID == "3-24" {
			fmt.Printf("comment 3-24 now reads %q\n", c.Text)
		}
	}
	return nil
}
