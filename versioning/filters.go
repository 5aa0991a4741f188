package versioning

import "go.mongodb.org/mongo-driver/v2/bson"

// The filters below are the repository's guards. They are pure functions
// of the configuration and what was read, pinned by unit tests.

// casFilter matches the stored document old only if nobody wrote it since
// it was read: same _id, same version and same revision, or, for each
// field that was absent, still absent. It guards every write-back.
func (r *Repo[T]) casFilter(old bson.Raw) bson.D {
	f := bson.D{{Key: "_id", Value: old.Lookup("_id")}}
	for _, name := range []string{r.field, r.revField} {
		if v, err := old.LookupErr(name); err == nil {
			f = append(f, bson.E{Key: name, Value: bson.D{{Key: "$eq", Value: v}}})
		} else {
			f = append(f, bson.E{Key: name, Value: bson.D{{Key: "$exists", Value: false}}})
		}
	}
	return f
}

// currentFilter matches the document id only at the current version: an
// update written against the shape T must not land on an older document.
func (r *Repo[T]) currentFilter(id any) bson.D {
	if r.implicit == r.current { // a missing or null field is current too
		return bson.D{{Key: "_id", Value: id}, {Key: r.field, Value: bson.D{{Key: "$in", Value: bson.A{r.current, nil}}}}}
	}
	return bson.D{{Key: "_id", Value: id}, {Key: r.field, Value: r.current}}
}

// notNewerFilter matches the document id unless it is at a newer version
// than this code knows: a replacement must never downgrade one. A missing
// or non-numeric version field matches.
func (r *Repo[T]) notNewerFilter(id any) bson.D {
	return bson.D{{Key: "_id", Value: id}, {Key: r.field, Value: bson.D{{Key: "$not", Value: bson.D{{Key: "$gt", Value: r.current}}}}}}
}

// scanFilter matches every document MigrateAll must look at: below the
// current version, without a version field (or with null) when the
// implicit version is older, or with a version field that is not a number
// (to report it). It
// excludes current and newer documents, and uses the index on the version
// field (missing fields index as null, below every number).
func (r *Repo[T]) scanFilter() bson.D {
	notCurrent := bson.D{{Key: "$not", Value: bson.D{{Key: "$gte", Value: r.current}}}}
	if r.implicit == r.current {
		notCurrent = append(bson.D{{Key: "$ne", Value: nil}}, notCurrent...)
	}
	return bson.D{{Key: r.field, Value: notCurrent}}
}
