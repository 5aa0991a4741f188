package versioning

import (
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/internal/shard"
)

// schema is what the commands of a repository depend on: the names of its
// fields and the versions it knows. The builders below are pure functions
// of it and of what was read, and build every filter, update, pipeline and
// stamped document the repository sends; commands_test.go pins them.
type schema struct {
	field    string // the version field
	revField string // the revision field
	current  int
	implicit int // the version of a document without field
	oldest   int // the oldest version the chain reads
	shardKey []string
}

// idFilter matches the document id, whatever its version: the reads by id
// and Delete.
func idFilter(id any) bson.D {
	return bson.D{{Key: "_id", Value: id}}
}

// notArray is the condition that keeps an equality on the version field
// from matching an array: MongoDB's {f: 3} and {f: {$eq: 3}} match an
// array that contains 3 ($type "number" does too, by its elements), and
// a version field that holds an array is no version (see versionOf).
var notArray = bson.E{Key: "$not", Value: bson.D{{Key: "$type", Value: "array"}}}

// casFilter matches the stored document old only if nobody wrote it since
// it was read: same _id, same version (not an array that contains it) and
// same revision, or, for each field that was absent, still absent. It
// guards every write-back, every write of MigrateAll and, on a server
// without the 16 MiB limit on updates, Update's findAndModify.
func (s schema) casFilter(old bson.Raw) bson.D {
	f := s.docFilter(old)
	for _, name := range [2]string{s.field, s.revField} {
		v, err := old.LookupErr(name)
		switch {
		case err != nil:
			f = append(f, bson.E{Key: name, Value: bson.D{{Key: "$exists", Value: false}}})
		case name == s.field:
			f = append(f, bson.E{Key: name, Value: bson.D{{Key: "$eq", Value: v}, notArray}})
		default:
			f = append(f, bson.E{Key: name, Value: bson.D{{Key: "$eq", Value: v}}})
		}
	}
	return f
}

// currentFilter matches the document of doc (idFilter, or docFilter of a
// document read) only at the current version, a number (or, where the
// implicit version is current, a missing or null field), never an array
// that contains it: an update written against the shape T must not land
// on a document of another shape.
func (s schema) currentFilter(doc bson.D) bson.D {
	doc = slices.Clip(doc)       // append to a copy: doc is used again
	if s.implicit == s.current { // a missing or null field is current too
		return append(doc, bson.E{Key: s.field, Value: bson.D{{Key: "$in", Value: bson.A{int32(s.current), nil}}, notArray}})
	}
	return append(doc, bson.E{Key: s.field, Value: bson.D{{Key: "$eq", Value: int32(s.current)}, notArray}})
}

// notNewerFilter matches the document of doc (idFilter, or docFilter of
// a document read) unless it is at a newer version than this code knows:
// a replacement must never downgrade one. A missing or non-numeric
// version field matches.
func (s schema) notNewerFilter(doc bson.D) bson.D {
	return append(slices.Clip(doc), bson.E{Key: s.field, Value: bson.D{{Key: "$not", Value: bson.D{{Key: "$gt", Value: int32(s.current)}}}}})
}

// docFilter matches the document read as doc by its _id and, where
// Config.ShardKey names fields, by their values in doc ({f: {$eq: v}},
// null for a missing field, which the server routes as null): the start
// of every filter of a write that follows a read, so that a sharded
// cluster sends it to one shard.
func (s schema) docFilter(doc bson.Raw) bson.D {
	f := make(bson.D, 1, len(s.shardKey)+3)
	f[0] = bson.E{Key: "_id", Value: doc.Lookup("_id")}
	return shard.AppendValues(f, doc, s.shardKey)
}

// stampedFilter matches the document read as before while it holds the
// revision rev that Update's findAndModify stamped: the read-back of an
// update whose reply was lost, which tells whether it landed.
func (s schema) stampedFilter(before bson.Raw, rev bson.ObjectID) bson.D {
	return append(s.docFilter(before), bson.E{Key: s.revField, Value: bson.D{{Key: "$eq", Value: rev}}})
}

// restoreFilter is the guard of putting back the document before, read
// by Update, that an oversized update stamped with rev replaced: it
// matches the document while it holds rev, so that a later write is
// never undone, or before's own revision, so that the put-back can be
// sent again after its reply was lost (it then rewrites what it already
// put back). A document read without a revision is matched on rev only.
func (s schema) restoreFilter(before bson.Raw, rev bson.ObjectID) bson.D {
	f := s.stampedFilter(before, rev)
	if prev, err := before.LookupErr(s.revField); err == nil {
		f[len(f)-1].Value = bson.D{{Key: "$in", Value: bson.A{rev, prev}}}
	}
	return f
}

// scanFilter matches every document MigrateAll must look at: below the
// current version, without a version field (or with null) when the
// implicit version is older, or with a version field that is not a number
// (to report it). It excludes current and newer documents, and uses the
// index on the version field (missing fields index as null, below every
// number).
func (s schema) scanFilter() bson.D {
	notCurrent := bson.D{{Key: "$not", Value: bson.D{{Key: "$gte", Value: int32(s.current)}}}}
	if s.implicit == s.current {
		notCurrent = append(bson.D{{Key: "$ne", Value: nil}}, notCurrent...)
	}
	return bson.D{{Key: s.field, Value: notCurrent}}
}

// statsPipeline counts the documents per value of the version field, with
// $group and $sum, which every server has.
func (s schema) statsPipeline() mongo.Pipeline {
	return mongo.Pipeline{
		{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$" + s.field}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}}},
	}
}

// versionIndex is the key of the index MigrateAll's scan and Stats use.
func (s schema) versionIndex() bson.D {
	return bson.D{{Key: s.field, Value: 1}}
}

// stampDoc returns the encoded document doc with the version field set to
// the current version and the revision field to rev: in place where doc
// has them, appended otherwise. It is the document Insert and Replace
// send, and the stamp of a migrated document.
func (s schema) stampDoc(doc bson.Raw, rev bson.ObjectID) (bson.Raw, error) {
	elems, err := doc.Elements()
	if err != nil {
		return nil, err
	}
	idx, out := bsoncore.AppendDocumentStart(make([]byte, 0, len(doc)+len(s.field)+len(s.revField)+24))
	hasVersion, hasRev := false, false
	for _, e := range elems {
		switch e.Key() {
		case s.field:
			out, hasVersion = bsoncore.AppendInt32Element(out, s.field, int32(s.current)), true
		case s.revField:
			out, hasRev = bsoncore.AppendObjectIDElement(out, s.revField, rev), true
		default:
			out = append(out, e...)
		}
	}
	if !hasVersion {
		out = bsoncore.AppendInt32Element(out, s.field, int32(s.current))
	}
	if !hasRev {
		out = bsoncore.AppendObjectIDElement(out, s.revField, rev)
	}
	return bsoncore.AppendDocumentEnd(out, idx)
}

// stampUpdate checks an update and adds the version and revision to it.
// For a document of operators, it returns a bson.D whose $set (the user's,
// extended, or a new one at the end) also sets both fields; for a pipeline
// (pipeline is true), a bson.A of the stages, as documents, with a final
// $set stage that sets them. Anything else, an operator touching either
// field, or a field that is not an operator is ErrInvalid.
func (s schema) stampUpdate(update any, rev bson.ObjectID) (stamped any, pipeline bool, err error) {
	if update == nil {
		return nil, false, errs.Invalid("update is nil")
	}
	typ, data, err := bson.MarshalValue(update)
	if err != nil {
		return nil, false, errs.Invalid("encode the update %T: %v", update, err)
	}
	stamp := bson.D{{Key: s.field, Value: int32(s.current)}, {Key: s.revField, Value: rev}}
	switch typ {
	case bson.TypeArray:
		stages, err := bson.Raw(data).Values()
		if err != nil {
			return nil, false, errs.Invalid("the update pipeline: %v", err)
		}
		if len(stages) == 0 {
			return nil, false, errs.Invalid("the update pipeline is empty")
		}
		// The driver encodes each element of a pipeline as a document of
		// its own: the stages go as documents (bson.Raw), which it can
		// encode alone, not as bson.RawValue, which it cannot.
		out := make(bson.A, 0, len(stages)+1)
		for i, st := range stages {
			doc, ok := st.DocumentOK()
			if !ok {
				return nil, false, errs.Invalid("stage %d of the update pipeline is a BSON %s, not a document", i, st.Type)
			}
			out = append(out, doc)
		}
		return append(out, bson.D{{Key: "$set", Value: stamp}}), true, nil
	case bson.TypeEmbeddedDocument:
	default:
		return nil, false, errs.Invalid("update is a BSON %s: want a document of update operators or a pipeline", typ)
	}
	ops, err := bson.Raw(data).Elements()
	if err != nil {
		return nil, false, errs.Invalid("the update: %v", err)
	}
	if len(ops) == 0 {
		return nil, false, errs.Invalid("update is empty")
	}
	out := make(bson.D, 0, len(ops)+1)
	hasSet := false
	for _, op := range ops {
		name, val := op.Key(), op.Value()
		if !strings.HasPrefix(name, "$") {
			return nil, false, errs.Invalid("update field %q is not an update operator; use Replace to replace a document", name)
		}
		args, ok := val.DocumentOK()
		if !ok {
			return nil, false, errs.Invalid("update operator %s takes a document, not a BSON %s", name, val.Type)
		}
		for _, prev := range out {
			if prev.Key == name {
				return nil, false, errs.Invalid("update operator %s appears twice", name)
			}
		}
		elems, err := args.Elements()
		if err != nil {
			return nil, false, errs.Invalid("update operator %s: %v", name, err)
		}
		var fields bson.D
		for _, a := range elems {
			paths := []string{a.Key()}
			if to, ok := a.Value().StringValueOK(); ok && name == "$rename" {
				paths = append(paths, to)
			}
			for _, p := range paths {
				if s.owns(p) {
					return nil, false, errs.Invalid("update operator %s touches %q: the repository sets the version and revision fields", name, p)
				}
			}
			if name == "$set" {
				fields = append(fields, bson.E{Key: a.Key(), Value: a.Value()})
			}
		}
		if name == "$set" {
			hasSet = true
			out = append(out, bson.E{Key: name, Value: append(fields, stamp...)})
			continue
		}
		out = append(out, bson.E{Key: name, Value: args})
	}
	if !hasSet {
		out = append(out, bson.E{Key: "$set", Value: stamp})
	}
	return out, false, nil
}

// owns reports whether the path p is the version or the revision field or
// lies inside one.
func (s schema) owns(p string) bool {
	for _, f := range [2]string{s.field, s.revField} {
		if p == f || strings.HasPrefix(p, f+".") {
			return true
		}
	}
	return false
}
