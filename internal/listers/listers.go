// Package listers reads the driver options a caller passes through a
// repository, so that the repository can check what they ask for (an
// option the server lacks, a projection that would hide fields) before
// sending them.
package listers

import (
	"reflect"

	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/errs"
)

// Merged applies opts in order to a zero O, as the driver does when it
// builds the command, and returns the result: the last lister to set a
// field wins, and nil listers (typed nil pointers too) and setters are
// skipped, as the driver skips them. An option whose setter fails (the driver would refuse it
// too) gives an error wrapping [patterns.ErrInvalid]. It sends nothing.
func Merged[O any](opts []options.Lister[O]) (O, error) {
	var o O
	for _, l := range opts {
		if l == nil || reflect.ValueOf(l).Kind() == reflect.Pointer && reflect.ValueOf(l).IsNil() {
			continue
		}
		for _, set := range l.List() {
			if set == nil {
				continue
			}
			if err := set(&o); err != nil {
				return o, errs.Invalid("options: %v", err)
			}
		}
	}
	return o, nil
}

// SimpleCollation returns an error wrapping [patterns.ErrInvalid] for a
// collation other than the simple one (nil, or {locale: "simple"}). An
// operation that finds its document by _id gives it none: under a
// collation that ignores case, {_id: "ann"} also matches a document whose
// _id is "ANN" (the unique index compares bytes, the query the
// collation), and on a sharded cluster a string compared under a
// collation routes no write to one shard.
func SimpleCollation(c *options.Collation) error {
	if c == nil || c.Locale == "simple" {
		return nil
	}
	return errs.Invalid("collation option %q: the document is found by its _id, which a collation other than the simple one may match in another document (and mongos cannot route by); leave it out", c.Locale)
}
