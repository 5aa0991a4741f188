package versioning

import (
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Doc is a stored document as a [Migration] sees it: its fields in stored
// order, as the driver decodes them into a [bson.D]. Embedded documents are
// bson.D (convert with Doc(v.(bson.D)) to use the helpers on them), arrays
// are bson.A, and numbers keep their BSON type (int32, int64, float64).
//
// The helpers work on top-level fields, keep the order of the others and
// never fail; a Doc is also a plain slice, so anything else (inserting at a
// position, building a new document) is ordinary slice code.
type Doc bson.D

// Get returns the value of the field key, and whether the field exists.
func (d *Doc) Get(key string) (any, bool) {
	if i := d.index(key); i >= 0 {
		return (*d)[i].Value, true
	}
	return nil, false
}

// Set sets the field key to value: in place when the field exists, at the
// end otherwise.
func (d *Doc) Set(key string, value any) {
	if i := d.index(key); i >= 0 {
		(*d)[i].Value = value
		return
	}
	*d = append(*d, bson.E{Key: key, Value: value})
}

// Delete removes the field key and reports whether it existed.
func (d *Doc) Delete(key string) bool {
	i := d.index(key)
	if i < 0 {
		return false
	}
	*d = slices.Delete(*d, i, i+1)
	return true
}

// Rename renames the field from to to, keeping its position, and reports
// whether from existed. As with $rename, an existing field named to is
// replaced (removed); renaming a missing field changes nothing.
func (d *Doc) Rename(from, to string) bool {
	i := d.index(from)
	if i < 0 {
		return false
	}
	if from == to {
		return true
	}
	if j := d.index(to); j >= 0 {
		*d = slices.Delete(*d, j, j+1)
		if j < i {
			i--
		}
	}
	(*d)[i].Key = to
	return true
}

func (d *Doc) index(key string) int {
	return slices.IndexFunc(*d, func(e bson.E) bool { return e.Key == key })
}
