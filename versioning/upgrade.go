package versioning

import (
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/patterns"
)

// upgrade brings a stored document to the current version in memory. It
// returns the document decoded into T and, when migrations ran, the
// migrated document to store, stamped with the current version and a new
// revision; migrated is nil for a document already current. A document is
// only ever stored in a shape that decodes into T.
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
		return fail(fmt.Errorf("%w: the migrated document takes %d bytes, over %d", patterns.ErrTooLarge, len(migrated), patterns.MaxDocumentSize))
	case !migrated.Lookup("_id").Equal(raw.Lookup("_id")):
		return fail(fmt.Errorf("the migrations changed or removed _id"))
	}
	if err := bson.Unmarshal(migrated, &t); err != nil {
		return fail(fmt.Errorf("the migrated document does not decode into %T: %w", t, err))
	}
	return t, migrated, nil
}

// newer is the error for a document at version v, newer than this code.
func (r *Repo[T]) newer(v int) error {
	return fmt.Errorf("%w: the document is at version %d, this code knows up to %d", ErrNewerSchema, v, r.current)
}

// stamp encodes v as a document with the current version and a new
// revision: the fields of those names keep their place when v has them and
// are appended otherwise.
func (r *Repo[T]) stamp(v T) (bson.D, error) {
	raw, err := bson.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: encode %T: %v", patterns.ErrInvalid, v, err)
	}
	elems, err := bson.Raw(raw).Elements()
	if err != nil {
		return nil, fmt.Errorf("%w: encode %T: %v", patterns.ErrInvalid, v, err)
	}
	d := make(Doc, 0, len(elems)+2)
	for _, e := range elems {
		d = append(d, bson.E{Key: e.Key(), Value: e.Value()})
	}
	d.Set(r.field, int32(r.current))
	d.Set(r.revField, bson.NewObjectID())
	return bson.D(d), nil
}
