package doctor

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// Dynamic field names.
//
// A schema that stores values as field names ({"attr_color": "blue",
// "attr_size": "M"}, or a map keyed by dates or ids) cannot be indexed or
// queried by those values, and grows a new "field" for every value. The
// check looks at every object path of the sample (the top level, each
// embedded document, the documents inside arrays) and groups the keys
// found there:
//
//   - Keys that look like values (see [looksLikeValue]: numbers, dates,
//     ObjectIds, UUIDs, long hex strings, e-mail addresses) form one group.
//     It is reported when it holds at least Thresholds.DynamicKeys
//     distinct keys.
//   - Other keys are grouped by family: the key up to its first
//     separator ("attr_" for "attr_color"), its first lower-to-upper case
//     change ("attr" for "attrColor"), or its trailing digits ("sensor"
//     for "sensor12"); a key with none of these is a family of its own
//     and never reported. A family is reported when it holds at least
//     Thresholds.DynamicKeys distinct keys and its spread is at least
//     Thresholds.DynamicKeySpread, where
//
//     spread = distinct keys of the family / mean number of its keys in an object that has any
//
//     Ordinary fields, present in every document, have a spread of 1
//     however many there are (fifty fields "f_1" ... "f_50" in every
//     document: 50 / 50). Forty documents that each hold one different
//     "attr_*" key have a spread of 40.
//
// Keys that share no family and do not look like values (product codes
// such as "X7F2" and "B991") are not detected.

// familyOf returns the family of a key, or "" when the key has none, and
// whether the key looks like a value (then its family is "").
func familyOf(key string) (family string, value bool) {
	if looksLikeValue(key) {
		return "", true
	}
	return stem(key), false
}

// stem returns the family prefix of a key (see the package comment on
// dynamic field names), or "" if it has none.
func stem(key string) string {
	rs := []rune(key)
	for i := 1; i < len(rs); i++ {
		if strings.ContainsRune("_-:.|# /@", rs[i]) {
			return string(rs[:i+1])
		}
	}
	for i := 1; i < len(rs); i++ {
		if unicode.IsLower(rs[i-1]) && unicode.IsUpper(rs[i]) {
			return string(rs[:i])
		}
	}
	for i := 1; i < len(rs); i++ {
		if unicode.IsDigit(rs[i]) {
			if strings.IndexFunc(string(rs[:i]), unicode.IsDigit) < 0 {
				return string(rs[:i])
			}
			break
		}
	}
	return ""
}

var valueKeyREs = []*regexp.Regexp{
	regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?$`), // numbers
	regexp.MustCompile(`^[0-9]{4}-?[0-9]{2}(-?[0-9]{2}([T ][0-9]{2}(:?[0-9]{2}(:?[0-9]{2}(\.[0-9]+)?)?)?(Z|[+-][0-9]{2}:?[0-9]{2})?)?)?$`), // dates
	regexp.MustCompile(`^[0-9a-fA-F]{16,}$`),                                                            // ObjectIds and other hex ids
	regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`), // UUIDs
	regexp.MustCompile(`^[^@\s]+@[^@\s]+\.[^@\s]+$`),                                                    // e-mail addresses
}

// looksLikeValue reports whether a key looks like data rather than a name:
// a number, a date (2024-01-31, 20240131, 2024-01, with or without a
// time), a hex id of 16 or more digits (ObjectIds have 24), a UUID or an
// e-mail address.
func looksLikeValue(key string) bool {
	for _, re := range valueKeyREs {
		if re.MatchString(key) {
			return true
		}
	}
	return false
}

// dynamicFindings applies the rule to every object path of a profile.
func dynamicFindings(coll string, p *profile, th Thresholds) []Finding {
	var out []Finding
	for _, path := range slices.Sorted(maps.Keys(p.levels)) {
		lv := p.levels[path]
		var values []string
		families := map[string][]string{}
		for key, ks := range lv.keys {
			switch {
			case ks.value:
				values = append(values, key)
			case ks.family != "":
				families[ks.family] = append(families[ks.family], key)
			}
		}
		if len(values) >= th.DynamicKeys {
			out = append(out, dynamicFinding(coll, path, "*", values, lv, lv.valueish, th,
				"keys that look like values (numbers, dates, ids)"))
		}
		for _, f := range slices.Sorted(maps.Keys(families)) {
			keys := families[f]
			if len(keys) < th.DynamicKeys {
				continue
			}
			if spread(keys, lv, lv.families[f]) < th.DynamicKeySpread {
				continue
			}
			out = append(out, dynamicFinding(coll, path, f+"*", keys, lv, lv.families[f], th,
				fmt.Sprintf("a family of keys %q that each document holds few of", f+"*")))
		}
	}
	return out
}

// spread is the number of distinct keys divided by the mean number of them
// in an object that holds any (objects).
func spread(keys []string, lv *levelStats, objects int) float64 {
	if objects == 0 {
		return 0
	}
	occurrences := 0
	for _, k := range keys {
		occurrences += lv.keys[k].count
	}
	return float64(len(keys)) / (float64(occurrences) / float64(objects))
}

func dynamicFinding(coll, path, pattern string, keys []string, lv *levelStats, objects int, th Thresholds, what string) Finding {
	slices.Sort(keys)
	examples := keys[:min(3, len(keys))]
	field := join(path, pattern)
	where := "at the top level"
	if path != "" {
		where = "in " + path
	}
	return Finding{
		Rule:       RuleDynamicFieldNames,
		Severity:   Warning,
		Collection: coll,
		Field:      field,
		Message: fmt.Sprintf("%d distinct field names %s are %s: values stored as keys",
			len(keys), where, what),
		Evidence: Evidence{
			{"distinctKeys", len(keys)},
			{"objects", objects},
			{"spread", ratio(spread(keys, lv, objects))},
			{"examples", strings.Join(examples, ", ")},
			{"thresholdKeys", th.DynamicKeys},
			{"thresholdSpread", th.DynamicKeySpread},
		},
		Remedy: "store them as an array of {k, v} pairs with one index on {k: 1, v: 1} (the attribute pattern)",
	}
}
