package versioning

import (
	"encoding/binary"
	"fmt"
	"reflect"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
	"github.com/mongopatterns/mongopatterns/internal/bsontag"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// upgrade brings a stored document to the current version in memory. It
// returns the document decoded into T and, when migrations ran, the
// migrated document to store: T's encoding of it, followed by the fields
// T does not declare as the migration left them, stamped with the current version and a new revision, as
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
	// as T writes it. The fields T does not declare (a shard key T does
	// not hold...) are kept as the migration left them.
	if migrated, err = r.encodeMigrated(t, out); err != nil {
		return fail(err)
	}
	return t, migrated, nil
}

// encodeMigrated returns t encoded as Insert encodes it, followed by the
// fields of the migrated document out that T does not declare, stamped
// with the current version and a new revision. Its _id, if T has one,
// must be the stored document's.
func (r *Repo[T]) encodeMigrated(t T, out bson.Raw) (bson.Raw, error) {
	enc, err := bson.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("encode the migrated %T: %w", t, err)
	}
	id := out.Lookup("_id")
	if got, err := bson.Raw(enc).LookupErr("_id"); err == nil && !bsonid.Equal(got, id) {
		return nil, fmt.Errorf("the migrated %T encodes _id %s, not the stored %s", t, got, id)
	}
	names, all := bsontag.Declared(reflect.TypeFor[T]())
	elems, err := out.Elements()
	if err != nil {
		return nil, err
	}
	doc := enc[: len(enc)-1 : len(enc)-1] // without its terminating 0
	for _, e := range elems {
		if k := e.Key(); !all && !names[k] && k != r.field && k != r.revField {
			doc = append(doc, e...)
		}
	}
	doc = append(doc, 0)
	binary.LittleEndian.PutUint32(doc, uint32(len(doc)))
	migrated, err := r.stampDoc(doc, bson.NewObjectID())
	if err != nil {
		return nil, fmt.Errorf("stamp the migrated document: %w", err)
	}
	if len(migrated) > patterns.MaxDocumentSize {
		return nil, fmt.Errorf("the migrated document: %w", tooLarge(len(migrated)))
	}
	return migrated, nil
}
