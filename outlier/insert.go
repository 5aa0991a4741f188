package outlier

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/internal/srverr"
	"github.com/mongopatterns/mongopatterns/internal/txn"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Insert inserts a new parent and returns its _id (generated when P has
// none). The stored document is P as encoded, with the array field (empty
// if P has none, or has it nil), the flag false and the tail hint 0: a
// parent starts open, with the room its close needs. One command
// (insert), sent again after FerretDB 2.x's transient deadlock, which
// applied nothing.
//
// Before anything is written it returns an error wrapping
// [patterns.ErrInvalid] when P does not encode as a document, its _id is
// not a valid id (see [patterns.ValidateID]: no other method could reach
// the parent), its flag is true or its tail hint is set (both belong to
// the repository), or its array field is not an array of at most Cap
// items with distinct, valid ids; and [patterns.ErrTooLarge] when the
// document exceeds 16 MiB. A parent with the same _id is the server's
// duplicate key error ([mongo.IsDuplicateKeyError]).
//
// Parents inserted by other means work too: a missing or null array is an
// empty one (Append gives it an array first, one command more), a missing
// flag is false.
func (r *Repo[P, I]) Insert(ctx context.Context, parent P) (_ any, err error) {
	ctx, op := r.start(ctx, "Insert")
	defer op.Finish(&err)
	if err := txn.Refuse(ctx); err != nil {
		return nil, pkg.Wrap("Insert", err)
	}
	doc, err := r.newParent(parent)
	if err != nil {
		return nil, pkg.Wrap("Insert", err)
	}
	var res *mongo.InsertOneResult
	err = srverr.Retry(ctx, func() (err error) {
		op.Sent(1)
		res, err = r.parents.InsertOne(ctx, doc)
		return err
	})
	if err != nil {
		return nil, pkg.Wrap("Insert", srverr.Classify(err))
	}
	op.Affected(1)
	return res.InsertedID, nil
}

// newParent builds the document Insert stores and checks it.
func (r *Repo[P, I]) newParent(parent P) (bson.D, error) {
	raw, err := bson.Marshal(parent)
	if err != nil {
		return nil, errs.Invalid("cannot encode %T as a document: %v", parent, err)
	}
	elems, err := bson.Raw(raw).Elements()
	if err != nil {
		return nil, err
	}
	doc := make(bson.D, 0, len(elems)+2)
	hasArray := false
	for _, e := range elems {
		switch e.Key() {
		case "_id":
			var id any
			if err := e.Value().Unmarshal(&id); err != nil {
				return nil, errs.Invalid("_id: %v", err)
			}
			if err := patterns.ValidateID(id); err != nil {
				return nil, fmt.Errorf("_id: %w", err)
			}
		case r.cfg.FlagField:
			if b, ok := e.Value().BooleanOK(); !ok || b {
				return nil, errs.Invalid("a new parent must have %s false or absent, not %s", r.cfg.FlagField, e.Value())
			}
			continue // written below
		case r.cfg.TailField:
			return nil, errs.Invalid("a new parent cannot have %s: the repository sets it when the parent overflows", r.cfg.TailField)
		case r.cfg.Field:
			hasArray = true
			if e.Value().Type == bson.TypeNull {
				doc = append(doc, bson.E{Key: e.Key(), Value: bson.A{}}) // a nil slice
				continue
			}
			if err := r.checkEmbedded(e.Value()); err != nil {
				return nil, err
			}
		}
		doc = append(doc, bson.E{Key: e.Key(), Value: e.Value()})
	}
	if !hasArray {
		doc = append(doc, bson.E{Key: r.cfg.Field, Value: bson.A{}})
	}
	doc = append(doc, bson.E{Key: r.cfg.FlagField, Value: false}, bson.E{Key: r.cfg.TailField, Value: int64(0)})
	if b, err := bson.Marshal(doc); err != nil || len(b) > patterns.MaxDocumentSize {
		if err != nil {
			return nil, err
		}
		return nil, errs.TooLarge("the parent encodes to %d bytes, over %d", len(b), patterns.MaxDocumentSize)
	}
	return doc, nil
}

// checkEmbedded checks the items a new parent embeds.
func (r *Repo[P, I]) checkEmbedded(v bson.RawValue) error {
	arr, ok := v.ArrayOK()
	if !ok {
		return errs.Invalid("field %q holds a BSON %s, not an array", r.cfg.Field, v.Type)
	}
	vals, err := arr.Values()
	if err != nil {
		return err
	}
	if len(vals) > r.cfg.Cap {
		return errs.Invalid("field %q holds %d items; a parent embeds at most %d (append the others)", r.cfg.Field, len(vals), r.cfg.Cap)
	}
	seen := make(map[string]bool, len(vals))
	for i, v := range vals {
		doc, ok := v.DocumentOK()
		if !ok {
			return r.notDocument(i, v)
		}
		it, err := r.itemOf(doc)
		if err != nil {
			return fmt.Errorf("%s.%d: %w", r.cfg.Field, i, err)
		}
		if seen[it.idKey()] {
			return errs.Invalid("%s.%d repeats %s %s", r.cfg.Field, i, r.cfg.IDField, bsonid.Text(it.id))
		}
		seen[it.key] = true
	}
	return nil
}
