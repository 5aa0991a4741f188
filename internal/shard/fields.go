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

// KeepValues returns the replacement doc with, for each of the shard-key
// fields that doc lacks and stored holds, stored's value: so that a
// replacement written from a type that has no such field keeps the
// document's key (mongos targets a replacement by the key it holds, a
// missing field as null). A field doc holds keeps doc's value; a field
// neither holds stays missing. doc is returned as is when it lacks
// nothing stored holds. A dotted field whose parent in doc is not a
// document is an error wrapping patterns.ErrInvalid.
func KeepValues(doc, stored bson.Raw, fields []string) (bson.Raw, error) {
	var d bson.D
	for _, f := range fields {
		path := strings.Split(f, ".")
		if _, err := doc.LookupErr(path...); err == nil {
			continue
		}
		v, err := stored.LookupErr(path...)
		if err != nil {
			continue
		}
		if d == nil {
			if err := bson.Unmarshal(doc, &d); err != nil {
				return nil, errs.Invalid("the replacement: %v", err)
			}
		}
		if d, err = setPath(d, path, v); err != nil {
			return nil, err
		}
	}
	if d == nil {
		return doc, nil
	}
	out, err := bson.Marshal(d)
	if err != nil {
		return nil, errs.Invalid("the replacement: %v", err)
	}
	return out, nil
}

// setPath sets the value at path in d, creating the documents on the way,
// appended after d's fields.
func setPath(d bson.D, path []string, v bson.RawValue) (bson.D, error) {
	i := slices.IndexFunc(d, func(e bson.E) bool { return e.Key == path[0] })
	if len(path) == 1 {
		if i >= 0 {
			d[i].Value = v
			return d, nil
		}
		return append(d, bson.E{Key: path[0], Value: v}), nil
	}
	if i < 0 {
		sub, err := setPath(nil, path[1:], v)
		return append(d, bson.E{Key: path[0], Value: sub}), err
	}
	sub, ok := d[i].Value.(bson.D)
	if !ok {
		return nil, errs.Invalid("shard-key field %q: %q is not a document", strings.Join(path, "."), path[0])
	}
	sub, err := setPath(sub, path[1:], v)
	d[i].Value = sub
	return d, err
}
