// Package check validates the names a repository's configuration gives:
// field names, dotted paths and collection names. Every error wraps
// patterns.ErrInvalid and reads "<what>: <why>: invalid".
package check

import (
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/mongopatterns/mongopatterns/internal/errs"
)

// Field checks a single BSON field name, one that must not be a path: it
// must be non-empty valid UTF-8 without NUL bytes, must not start with '$'
// (it would be read as an operator) and must not contain '.' (it would be
// read as a path).
func Field(name string) error {
	if err := segment(name); err != nil {
		return errs.Invalid("field name %q %s", name, err)
	}
	if strings.Contains(name, ".") {
		return errs.Invalid("field name %q contains '.', which makes it a path; a single field is expected", name)
	}
	return nil
}

// Path checks a dotted field path such as "customer.name": every
// dot-separated segment must pass the rules of [Field] (non-empty, no
// leading '$', no NUL, valid UTF-8). So "a..b", ".a", "a." and "a.$b" are
// rejected.
func Path(path string) error {
	if path == "" {
		return errs.Invalid("field path is empty")
	}
	for i, seg := range strings.Split(path, ".") {
		if err := segment(seg); err != nil {
			return errs.Invalid("field path %q: segment %d %s", path, i+1, err)
		}
	}
	return nil
}

// Collection checks a collection name: non-empty valid UTF-8 without NUL
// bytes or '$', and not in the server's "system." namespace.
func Collection(name string) error {
	switch {
	case name == "":
		return errs.Invalid("collection name is empty")
	case !utf8.ValidString(name):
		return errs.Invalid("collection name %q is not valid UTF-8", name)
	case strings.ContainsAny(name, "\x00$"):
		return errs.Invalid("collection name %q contains '$' or a NUL byte", name)
	case strings.HasPrefix(name, "system."):
		return errs.Invalid("collection name %q is in the server's system namespace", name)
	}
	return nil
}

func segment(s string) error {
	switch {
	case s == "":
		return errors.New("is empty")
	case !utf8.ValidString(s):
		return errors.New("is not valid UTF-8")
	case strings.IndexByte(s, 0) >= 0:
		return errors.New("contains a NUL byte")
	case s[0] == '$':
		return errors.New("starts with '$', which makes it an operator")
	}
	return nil
}
