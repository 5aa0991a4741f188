package shard

import (
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/check"
	"github.com/mongopatterns/mongopatterns/internal/errs"
)

// CheckFields checks the shard-key fields that a repository's
// Config.ShardKey names, for a collection whose documents the repository
// addresses by _id: each a valid path (as shardCollection takes it), none
// of them _id or inside it (every filter of such a repository holds the
// _id already: a collection sharded on _id needs no Config.ShardKey), none
// given twice. Errors wrap patterns.ErrInvalid and name the field; the
// caller adds its config field's name.
func CheckFields(fields []string) error {
	for i, f := range fields {
		if err := check.Path(f); err != nil {
			return err
		}
		root, _, _ := strings.Cut(f, ".")
		switch {
		case root == "_id":
			return errs.Invalid("%q: every filter holds the _id already; a collection sharded on _id needs no ShardKey", f)
		case slices.Contains(fields[:i], f):
			return errs.Invalid("%q is given twice", f)
		}
	}
	return nil
}

// AppendValues appends to filter, for each of the shard-key fields, its
// value in doc by equality, {<field>: {$eq: <value>}} (null for a field
// doc lacks, which the server routes as null), so that a write whose
// filter names a document read as doc carries its full shard key and
// goes to one shard. $eq keeps a value that is itself a document from
// being read as operators.
func AppendValues(filter bson.D, doc bson.Raw, fields []string) bson.D {
	for _, k := range fields {
		var v any // null
		if rv, err := doc.LookupErr(strings.Split(k, ".")...); err == nil {
			v = rv
		}
		filter = append(filter, bson.E{Key: k, Value: bson.D{{Key: "$eq", Value: v}}})
	}
	return filter
}
