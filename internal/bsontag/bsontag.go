// Package bsontag reads Go struct types as the driver's struct codec
// (go.mongodb.org/mongo-driver/v2/bson, structCodec and parseStructTags)
// lays them out: field names and options from the bson tags.
package bsontag

import (
	"reflect"
	"strings"
)

// Parse reads a field's bson tag as the driver does: the name (the Go
// name lower-cased when none), the options, and whether it is skipped
// ("-").
func Parse(sf reflect.StructField) (name string, opts map[string]bool, skip bool) {
	tag, ok := sf.Tag.Lookup("bson")
	if !ok && !strings.Contains(string(sf.Tag), ":") && len(sf.Tag) > 0 {
		tag = string(sf.Tag)
	}
	if tag == "-" {
		return "", nil, true
	}
	name = strings.ToLower(sf.Name)
	opts = map[string]bool{}
	for i, s := range strings.Split(tag, ",") {
		if i == 0 && s != "" {
			name = s
		}
		opts[s] = true
	}
	return name, opts, false
}

// Declared returns the names of the fields the driver decodes into a
// value of struct type t (its exported fields and those of the structs
// it inlines), and all: t has an inline map, which takes every other
// field.
func Declared(t reflect.Type) (names map[string]bool, all bool) {
	names = map[string]bool{}
	return names, declare(t, names, map[reflect.Type]bool{})
}

func declare(t reflect.Type, names map[string]bool, busy map[reflect.Type]bool) (all bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || busy[t] {
		return false
	}
	busy[t] = true
	defer delete(busy, t)
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, opts, skip := Parse(sf)
		switch {
		case skip:
		case opts["inline"] && sf.Type.Kind() == reflect.Map:
			all = true
		case opts["inline"]:
			// An inlined struct's own inline map is ignored by the driver.
			declare(sf.Type, names, busy)
		default:
			names[name] = true
		}
	}
	return all
}
