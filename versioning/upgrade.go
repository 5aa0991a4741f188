package versioning

import (
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
)

// upgrade brings a stored document to the current version in memory. It
// returns the document decoded into T and, when migrations ran, the
// migrated document to store: T's encoding of it (a field T does not hold
// is not kept), stamped with the current version and a new revision, as
// Insert stores it; migrated is nil for a document already current. A
// document is only ever stored in a shape that decodes into T and fits
// in 16 MiB.
func (r *Repo[T]) upgrade(raw bson.Raw) (t T, migrated bson.Raw, err error) {
	v, err := r.versionOf(raw)
	if err != nil {
		return t, nil, err
	}
	switch {
	case v > r.current:
		return t, nil, r.newer(v)
	case v == r.current:
		if err := bson.Unmarshal(raw, &t); err != nil {
			return t, nil, fmt.Errorf("decode into %T: %w", t, err)
		}
		return t, nil, nil
	case v < r.oldest:
		return t, nil, &MigrationError{ID: idOf(raw), From: v, To: v + 1,
			Err: fmt.Errorf("no migration from version %d: the oldest version this code reads is %d", v, r.oldest)}
	}
	var d Doc
	if err := bson.Unmarshal(raw, &d); err != nil {
		return t, nil, fmt.Errorf("decode the stored document: %w", err)
	}
	for k := v; k < r.current; k++ {
		if err := r.steps[k-r.oldest](&d); err != nil {
			return t, nil, &MigrationError{ID: idOf(raw), From: k, To: k + 1, Err: err}
		}
	}
	fail := func(err error) (T, bson.Raw, error) {
		var zero T
		return zero, nil, &MigrationError{ID: idOf(raw), From: v, To: r.current, Err: err}
	}
	out, err := bson.Marshal(bson.D(d))
	if err != nil {
		return fail(fmt.Errorf("encode the migrated document: %w", err))
	}
	if id, err := bson.Raw(out).LookupErr("_id"); err != nil || !bsonid.Equal(id, raw.Lookup("_id")) {
		return fail(fmt.Errorf("the migrations changed or removed _id"))
	}
	if err := bson.Unmarshal(out, &t); err != nil {
		return fail(fmt.Errorf("the migrated document does not decode into %T: %w", t, err))
	}
	// What is stored is T's encoding, as Insert and Replace store it (and
	// as Validator describes it): a value the migration set in another
	// BSON type (the constant 0, an int32, for an int64 field) is written
	// as T writes it.
	if migrated, err = r.encodeMigrated(t, raw.Lookup("_id")); err != nil {
		return fail(err)
	}
	return t, migrated, nil
}

// encodeMigrated returns t as Insert encodes it. Its _id, if T has one,
// must be the stored document's: the server keeps a document's _id, and
// a replacement without one keeps it too.
func (r *Repo[T]) encodeMigrated(t T, id bson.RawValue) (bson.Raw, error) {
	migrated, err := r.encode(t)
	if err != nil {
		return nil, fmt.Errorf("the migrated document: %w", err)
	}
	if got, err := migrated.LookupErr("_id"); err == nil && !bsonid.Equal(got, id) {
		return nil, fmt.Errorf("the migrated %T encodes _id %s, not the stored %s", t, got, id)
	}
	return migrated, nil
}
