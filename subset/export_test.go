package subset

import "go.mongodb.org/mongo-driver/v2/mongo"

// NewPortable is New with the portable path forced, so that the tests
// exercise it on every server.
func NewPortable[P, I any](db *mongo.Database, cfg Config) (*Repo[P, I], error) {
	r, err := New[P, I](db, cfg)
	if err == nil {
		r.path.Set(false)
	}
	return r, err
}

// NewNative is New with the native path forced. Only the allocation
// benchmark uses it on a server without the $push modifiers (whose subsets
// then grow past the cap): what it measures happens in the client.
func NewNative[P, I any](db *mongo.Database, cfg Config) (*Repo[P, I], error) {
	r, err := New[P, I](db, cfg)
	if err == nil {
		r.path.Set(true)
	}
	return r, err
}
