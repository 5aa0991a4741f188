package doctor

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/validation"
)

// Validator rules, for the collections' validators, when
// [Options].Validators is set.
const (
	// RuleValidatorDrift: a collection's validator differs from the one
	// its Go type gives ([ValidatorCheck].Types), one finding per field
	// that differs; or it is under validationLevel "off", so the server
	// enforces none of it (one finding).
	RuleValidatorDrift = "validator-drift"
	// RuleMissingValidator: a collection without a validator, or with
	// one under validationLevel "off", which checks nothing, or under
	// validationAction "warn", which enforces nothing (info).
	RuleMissingValidator = "missing-validator"
)

// ValidatorCheck turns on the validator rules. Its zero value runs
// missing-validator on every checked collection, which needs no Go
// types (the CLI's --validators); Types adds validator-drift.
type ValidatorCheck struct {
	// Types are the validators the stored Go types give
	// (validation.For[T], or versioning.Repo.Validator), by collection
	// name. Each collection named must exist: one that does not is a
	// validator-drift finding.
	Types map[string]*validation.Validator
}

// validatorRules is what the two rules read: one listCollections for
// the whole database. On a server without validators both rules are
// skipped with the reason.
func (c *checker) validatorRules(ctx context.Context, selected []string) error {
	vc := c.s.Validators
	if vc == nil {
		return nil
	}
	srv, err := patterns.Capabilities(ctx, c.db.Client())
	if err != nil {
		return err
	}
	if !srv.Has(patterns.FeatureValidators) && !srv.Has(patterns.FeatureJSONSchema) {
		reason := fmt.Sprintf("%s lacks %s", srv, patterns.FeatureValidators)
		c.skip(RuleMissingValidator, "", reason)
		if len(vc.Types) > 0 {
			c.skip(RuleValidatorDrift, "", reason)
		}
		return nil
	}
	specs, err := c.db.ListCollectionSpecifications(ctx, bson.D{})
	if err != nil {
		return fmt.Errorf("listCollections: %w", err)
	}
	stored := map[string]bson.Raw{} // by collection: its validator, nil when none
	off := map[string]bool{}        // by collection: a validator under validationLevel "off"
	warn := map[string]bool{}       // by collection: a validator under validationAction "warn"
	for _, s := range specs {
		if s.Type != "collection" {
			continue
		}
		v, ok := s.Options.Lookup("validator").DocumentOK()
		if ok {
			if elems, _ := v.Elements(); len(elems) == 0 {
				v = nil // {} validates nothing
			}
		}
		stored[s.Name] = v
		level, _ := s.Options.Lookup("validationLevel").StringValueOK()
		off[s.Name] = v != nil && level == levelOff
		action, _ := s.Options.Lookup("validationAction").StringValueOK()
		warn[s.Name] = v != nil && action == actionWarn
	}
	for _, name := range selected {
		v, ok := stored[name]
		switch {
		case ok && v == nil:
			c.add(Finding{Rule: RuleMissingValidator, Severity: Info, Collection: name,
				Message:  fmt.Sprintf("collection %s has no validator: any document shape can be written", name),
				Evidence: Evidence{{"validator", false}},
				Remedy:   "generate one from the Go type the collection stores (validation.For), measure it with validation.Check, then validation.Apply"})
		case off[name]:
			c.add(Finding{Rule: RuleMissingValidator, Severity: Info, Collection: name,
				Message:  fmt.Sprintf(`collection %s has a validator under validationLevel "off", which checks nothing: any document shape can be written`, name),
				Evidence: Evidence{{"validator", true}, {"validationLevel", levelOff}},
				Remedy:   `measure the validator with validation.Check, then set it with validation.Apply (validationLevel "strict" or "moderate")`})
		case warn[name]:
			c.add(Finding{Rule: RuleMissingValidator, Severity: Info, Collection: name,
				Message:  fmt.Sprintf(`collection %s has a validator under validationAction "warn", which enforces nothing: a write it rejects is stored, and only logged`, name),
				Evidence: Evidence{{"validator", true}, {"validationAction", actionWarn}},
				Remedy:   `measure the validator with validation.Check, then set it with validation.Apply and validation.Error`})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(vc.Types)) {
		v, exists := stored[name]
		if off[name] {
			c.add(Finding{Rule: RuleValidatorDrift, Severity: Warning, Collection: name,
				Message:  fmt.Sprintf(`collection %s has its validator under validationLevel "off": the server enforces nothing of the type's`, name),
				Evidence: Evidence{{"validationLevel", levelOff}},
				Remedy:   `apply the type's validator (validation.Check, then validation.Apply), which sets validationLevel "strict"`})
			continue
		}
		c.addAll(validatorDrift(name, exists, v, vc.Types[name]))
	}
	return nil
}

// levelOff is the validationLevel under which a validator checks
// nothing; actionWarn the validationAction under which it enforces
// nothing.
const (
	levelOff   = "off"
	actionWarn = "warn"
)

// validatorDrift compares a collection's validator (nil: none) with the
// one a Go type gives, and returns a finding per field that differs.
func validatorDrift(coll string, exists bool, got bson.Raw, want *validation.Validator) []Finding {
	finding := func(field, msg string, ev Evidence) Finding {
		return Finding{Rule: RuleValidatorDrift, Severity: Warning, Collection: coll, Field: field, Message: msg, Evidence: ev,
			Remedy: "apply the type's validator (validation.Check, then validation.Apply), or change the type to match"}
	}
	switch {
	case !exists:
		return []Finding{finding("", fmt.Sprintf("collection %s does not exist; its Go type gives a validator", coll), Evidence{{"exists", false}})}
	case got == nil:
		return []Finding{finding("", fmt.Sprintf("collection %s has no validator; its Go type gives one", coll), Evidence{{"validator", false}})}
	}
	forms := []bson.D{want.Document()}
	if p, err := want.Portable(); err == nil {
		forms = append(forms, p)
	}
	for _, f := range forms {
		if b, err := bson.Marshal(f); err == nil && slices.Equal(b, got) {
			return nil
		}
	}
	// Compare with the form the stored validator is closest to: a
	// validator whose root has no required field looks alike in both
	// forms (every field optional), so the fewest differences decide.
	var out []Finding
	for _, f := range forms {
		diff := diffForm(got, mustRaw(f), finding)
		if out == nil || len(diff) < len(out) {
			out = diff
		}
	}
	return out
}

// diffForm returns a finding per difference between the stored validator
// got and the type's validator in one form, at least one.
func diffForm(got, wantForm bson.Raw, finding func(field, msg string, ev Evidence) Finding) []Finding {
	out := []Finding{}
	named := map[string]bool{} // the fields the schema's differences name
	report := func(field, what, g, w string) {
		named[field] = true
		out = append(out, finding(field, fmt.Sprintf("%s: the validator has %s, the type gives %s", what, g, w),
			Evidence{{"validator", g}, {"type", w}}))
	}
	diffSchema("", findSchema(got), findSchema(wantForm), report)
	gotOps, wantOps := operators(got), operators(wantForm)
	paths := slices.Sorted(maps.Keys(wantOps))
	for _, k := range slices.Sorted(maps.Keys(gotOps)) {
		if _, ok := wantOps[k]; !ok {
			paths = append(paths, k)
		}
	}
	for _, k := range paths {
		// A field the schema's differences already name (one the type
		// adds or drops) is named once: its required or enum condition
		// beside the $jsonSchema differs with it.
		if gotOps[k] != wantOps[k] && !named[k] {
			report(k, "conditions beside the $jsonSchema (required, enum)", cmp.Or(gotOps[k], "none"), cmp.Or(wantOps[k], "none"))
		}
	}
	if len(out) == 0 {
		out = append(out, finding("", "the validator differs from the type's outside its $jsonSchema (the query operators beside it)",
			Evidence{{"validator", got.String()}}))
	}
	return out
}

func mustRaw(d bson.D) bson.Raw {
	b, _ := bson.Marshal(d)
	return b
}

// operators describes, by path, the conditions of the portable form's
// $nor (see validation.Validator.Portable): "required" for {$exists:
// false}, the condition itself otherwise. Empty for MongoDB's form.
func operators(validator bson.Raw) map[string]string {
	out := map[string]string{}
	nor, ok := findKey(validator, "$nor").ArrayOK()
	if !ok {
		return out
	}
	vals, _ := nor.Values()
	for _, v := range vals {
		d, _ := v.DocumentOK()
		elems, _ := d.Elements()
		for _, e := range elems {
			cond := e.Value().String()
			switch cond {
			case `{"$type": "object"}`: // the guard of a nested object's condition
				continue
			case `{"$exists": false}`:
				cond = "required"
			}
			out[e.Key()] = strings.TrimPrefix(out[e.Key()]+", "+cond, ", ")
		}
	}
	return out
}

// findKey returns the value of the first element named key inside doc,
// searching documents and arrays depth first.
func findKey(doc bson.Raw, key string) bson.RawValue {
	elems, _ := doc.Elements()
	for _, e := range elems {
		if e.Key() == key {
			return e.Value()
		}
		var inner []bson.RawValue
		if a, ok := e.Value().ArrayOK(); ok {
			inner, _ = a.Values()
		} else if d, ok := e.Value().DocumentOK(); ok {
			inner = []bson.RawValue{{Type: bson.TypeEmbeddedDocument, Value: d}}
		}
		for _, v := range inner {
			if d, ok := v.DocumentOK(); ok {
				if found := findKey(d, key); found.Type != 0 {
					return found
				}
			}
		}
	}
	return bson.RawValue{}
}

// findSchema returns the first $jsonSchema inside a validator, or nil.
func findSchema(doc bson.Raw) bson.Raw {
	s, _ := findKey(doc, "$jsonSchema").DocumentOK()
	return s
}

// diffSchema reports each difference between two $jsonSchema documents
// at path p: a field only one declares, a field required by one only,
// and each other keyword that differs, recursing into properties and
// items.
func diffSchema(p string, got, want bson.Raw, report func(field, what, got, want string)) {
	join := func(name string) string {
		if p == "" {
			return name
		}
		return p + "." + name
	}
	gotReq, wantReq := names(got.Lookup("required")), names(want.Lookup("required"))
	gotProps, _ := got.Lookup("properties").DocumentOK()
	wantProps, _ := want.Lookup("properties").DocumentOK()
	fields := keys(wantProps)
	for _, k := range keys(gotProps) {
		if !slices.Contains(fields, k) {
			fields = append(fields, k)
		}
	}
	for _, r := range append(slices.Clone(wantReq), gotReq...) {
		if !slices.Contains(fields, r) {
			fields = append(fields, r)
		}
	}
	for _, f := range fields {
		g, gok := gotProps.Lookup(f).DocumentOK()
		w, wok := wantProps.Lookup(f).DocumentOK()
		switch {
		case gok && !wok:
			report(join(f), "field", g.String(), "no such field")
		case wok && !gok:
			report(join(f), "field", "no such field", w.String())
		case gok && wok:
			diffSchema(join(f), g, w, report)
		}
		if gr, wr := slices.Contains(gotReq, f), slices.Contains(wantReq, f); gr != wr {
			report(join(f), "required", requiredText(gr), requiredText(wr))
		}
	}
	gotItems, _ := got.Lookup("items").DocumentOK()
	wantItems, _ := want.Lookup("items").DocumentOK()
	if gotItems != nil || wantItems != nil {
		diffSchema(join("[]"), gotItems, wantItems, report)
	}
	kws := keys(want)
	for _, k := range keys(got) {
		if !slices.Contains(kws, k) {
			kws = append(kws, k)
		}
	}
	for _, k := range kws {
		switch k {
		case "required", "properties", "items":
			continue
		}
		g, w := got.Lookup(k), want.Lookup(k)
		if !g.Equal(w) {
			report(p, k, show(g), show(w))
		}
	}
}

func requiredText(required bool) string {
	if required {
		return "it required"
	}
	return "it optional"
}

func show(v bson.RawValue) string {
	if v.Type == 0 {
		return "none"
	}
	return v.String()
}

func names(v bson.RawValue) []string {
	a, ok := v.ArrayOK()
	if !ok {
		return nil
	}
	vals, _ := a.Values()
	var out []string
	for _, x := range vals {
		if s, ok := x.StringValueOK(); ok {
			out = append(out, s)
		}
	}
	return out
}

func keys(d bson.Raw) []string {
	elems, _ := d.Elements()
	out := make([]string, 0, len(elems))
	for _, e := range elems {
		out = append(out, e.Key())
	}
	return out
}
