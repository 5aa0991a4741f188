// Package pagetoken encodes the resumable cursors that the repositories'
// Page methods hand to clients: a small BSON document of named values, as
// unpadded base64url text, URL-safe and opaque to clients. It checks the
// shape of what it reads back (base64url, a valid document, exactly the
// names expected, in order); what the values may be is the caller's to
// check.
package pagetoken

import (
	"crypto/sha256"
	"encoding/base64"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/bsonid"
	"github.com/mongopatterns/mongopatterns/internal/errs"
)

// Encode returns the text of doc: unpadded base64url of its BSON
// encoding.
func Encode(doc bson.D) ([]byte, error) {
	raw, err := bson.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return base64.RawURLEncoding.AppendEncode(nil, raw), nil
}

// Decode reads text written by [Encode] from a document whose names are
// keys, in that order, and returns its values. Text of another shape is
// an error wrapping patterns.ErrInvalid that says what is wrong with it.
func Decode(text string, keys ...string) ([]bson.RawValue, error) {
	raw, err := base64.RawURLEncoding.DecodeString(text)
	if err != nil {
		return nil, errs.Invalid("not base64url: %v", err)
	}
	doc := bson.Raw(raw)
	if err := doc.Validate(); err != nil {
		return nil, errs.Invalid("%v", err)
	}
	elems, err := doc.Elements()
	if err != nil || len(elems) != len(keys) {
		return nil, errs.Invalid("not a cursor")
	}
	vals := make([]bson.RawValue, len(elems))
	for i, e := range elems {
		if e.Key() != keys[i] {
			return nil, errs.Invalid("not a cursor")
		}
		vals[i] = e.Value()
	}
	return slices.Clip(vals), nil
}

// ScopeSize is the length of a [Scope].
const ScopeSize = 8

// Scope returns the digest that binds a cursor to the list it is a place
// in: names (a repository's database and collection) and an id (a
// parent's), compared as the server compares ids, by [bsonid.Key] (the
// parent 7 and the parent 7.0 are one list). A Page method writes it into
// its cursors and refuses a cursor whose scope is not the list's: a
// cursor of another parent or repository is then an error rather than a
// place in the wrong list. It is no secret (a client can make the scope
// of any list, as it can forge any place in one); it catches mistakes.
func Scope(id bson.RawValue, names ...string) []byte {
	h := sha256.New()
	for _, n := range names {
		h.Write(append([]byte(n), 0)) // names hold no NUL
	}
	h.Write([]byte(bsonid.Key(id)))
	return h.Sum(nil)[:ScopeSize]
}
