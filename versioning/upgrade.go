package versioning

import (
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// upgrade brings a stored document to the current version in memory. It
// returns the document decoded into T and, when migrations ran, the
// migrated document to store, stamped with the current version and a new
// revision; migrated is nil for a document already current. A document is
// only ever stored in a shape that decodes into T and fits in 16 MiB.
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
	d.Set(r.field, int32(r.current))
	d.Set(r.revField, bson.NewObjectID())
	fail := func(err error) (T, bson.Raw, error) {
		var zero T
		return zero, nil, &MigrationError{ID: idOf(raw), From: v, To: r.current, Err: err}
	}
	migrated, err = bson.Marshal(bson.D(d))
	switch {
	case err != nil:
		return fail(fmt.Errorf("encode the migrated document: %w", err))
	case len(migrated) > patterns.MaxDocumentSize:
		return fail(fmt.Errorf("the migrated document: %w", tooLarge(len(migrated))))
	}
	if id, err := migrated.LookupErr("_id"); err != nil || !bsonid.Equal(id, raw.Lookup("_id")) {
		return fail(fmt.Errorf("the migrations changed or removed _id"))
	}
	if err := bson.Unmarshal(migrated, &t); err != nil {
		return fail(fmt.Errorf("the migrated document does not decode into %T: %w", t, err))
	}
	return t, migrated, nil
}
