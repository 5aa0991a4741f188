package doctor

import (
	"fmt"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Limits on what one collection's profile tracks, so that a collection of
// documents keyed by values (millions of distinct keys) cannot exhaust
// memory: past a limit, new paths are counted as untracked.
const (
	maxLevels       = 10_000 // distinct object paths
	maxKeysPerLevel = 10_000 // distinct keys at one path
	maxArrayPaths   = 10_000 // distinct array paths
	maxDepth        = 100    // nesting depth walked (BSON's own limit is about 100)
)

// profile is what the sample says about one collection's documents. It is
// built one document at a time ([profile.add]) and never holds a
// document, so its memory does not depend on the sample's size.
type profile struct {
	th Thresholds // for counting long arrays and large documents

	docs     int
	bytes    int64
	sizes    histogram
	docsOver int // documents larger than th.DocumentBytes
	largest  largestDoc

	arrays    map[string]*arrayStats // array path -> its arrays
	levels    map[string]*levelStats // object path ("" for the top level) -> its keys
	dates     map[string]int         // top-level field -> documents where it holds a date
	fields    int                    // top-level fields, summed over documents
	untracked int                    // paths or keys past the limits
}

// largestDoc is the largest document seen and its largest top-level field.
type largestDoc struct {
	size       int64
	id         string
	field      string
	fieldBytes int64
	fieldType  bson.Type
}

// arrayStats describes the arrays found at one path.
type arrayStats struct {
	lengths      histogram
	over, overCr int    // arrays longer than the warning and critical thresholds
	longestID    string // _id of the document with the longest array
}

// levelStats describes the objects found at one path: how many, and which
// keys they hold.
type levelStats struct {
	objects  int
	keys     map[string]keyStat
	families map[string]int // key family (see familyOf) -> objects holding one of its keys
	valueish int            // objects holding a key that looks like a value
}

// keyStat describes one key found at an object path.
type keyStat struct {
	count  int    // objects holding it
	family string // see familyOf
	value  bool   // it looks like a value
	child  string // its path
}

func newProfile(th Thresholds) *profile {
	return &profile{
		th:     th,
		arrays: map[string]*arrayStats{}, levels: map[string]*levelStats{}, dates: map[string]int{},
	}
}

// add profiles one document.
func (p *profile) add(doc bson.Raw) error {
	elems, err := doc.Elements()
	if err != nil {
		return fmt.Errorf("malformed document: %w", err)
	}
	id := idString(doc.Lookup("_id"))
	size := int64(len(doc))
	p.docs++
	p.bytes += size
	p.sizes.add(size)
	p.fields += len(elems)
	if size > p.th.DocumentBytes {
		p.docsOver++
	}
	if size > p.largest.size {
		p.largest = largestDoc{size: size, id: id}
		for _, e := range elems {
			if n := int64(len(e)); n > p.largest.fieldBytes {
				p.largest.field, p.largest.fieldBytes, p.largest.fieldType = e.Key(), n, e.Value().Type
			}
		}
	}
	for _, e := range elems {
		if e.Value().Type == bson.TypeDateTime {
			p.dates[e.Key()]++
		}
	}
	return p.walkObject("", elems, id, 0)
}

// walkObject records the keys of one object found at path and walks its
// values.
func (p *profile) walkObject(path string, elems []bson.RawElement, id string, depth int) error {
	if depth > maxDepth {
		return nil
	}
	lv := p.level(path)
	var fams []string // families present in this object
	valueish := false
	for _, e := range elems {
		key := e.Key()
		child := ""
		if lv != nil {
			ks, seen := lv.keys[key]
			if !seen {
				// Once per distinct key, not once per object.
				ks.family, ks.value = familyOf(key)
				ks.child = join(path, key)
			}
			child = ks.child
			ks.count++
			if seen || len(lv.keys) < maxKeysPerLevel {
				lv.keys[key] = ks
			} else {
				p.untracked++
			}
			valueish = valueish || ks.value
			if ks.family != "" && !slices.Contains(fams, ks.family) {
				fams = append(fams, ks.family)
			}
		}
		if child == "" {
			child = join(path, key)
		}
		if err := p.walkValue(child, e.Value(), id, depth+1); err != nil {
			return err
		}
	}
	if lv != nil {
		lv.objects++
		for _, f := range fams {
			lv.families[f]++
		}
		if valueish {
			lv.valueish++
		}
	}
	return nil
}

// walkValue walks into embedded documents and arrays; scalars need nothing.
func (p *profile) walkValue(path string, v bson.RawValue, id string, depth int) error {
	switch v.Type {
	case bson.TypeEmbeddedDocument:
		elems, err := v.Document().Elements()
		if err != nil {
			return fmt.Errorf("malformed document at %s: %w", path, err)
		}
		return p.walkObject(path, elems, id, depth)
	case bson.TypeArray:
		vals, err := v.Array().Values()
		if err != nil {
			return fmt.Errorf("malformed array at %s: %w", path, err)
		}
		p.recordArray(path, len(vals), id)
		for _, el := range vals {
			var err error
			switch el.Type {
			case bson.TypeEmbeddedDocument:
				// Elements of an array of documents share the array's path,
				// as in MongoDB's dotted notation ("items.sku").
				err = p.walkValue(path, el, id, depth+1)
			case bson.TypeArray:
				err = p.walkValue(path+".$[]", el, id, depth+1)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func (p *profile) recordArray(path string, n int, id string) {
	a := p.arrays[path]
	if a == nil {
		if len(p.arrays) >= maxArrayPaths {
			p.untracked++
			return
		}
		a = &arrayStats{}
		p.arrays[path] = a
	}
	if int64(n) > a.lengths.max || a.lengths.n == 0 {
		a.longestID = id
	}
	a.lengths.add(int64(n))
	if n > p.th.ArrayLength {
		a.over++
	}
	if n > p.th.ArrayLengthCritical {
		a.overCr++
	}
}

// level returns the stats of the objects at path, or nil when the limit on
// tracked paths is reached.
func (p *profile) level(path string) *levelStats {
	lv := p.levels[path]
	if lv == nil {
		if len(p.levels) >= maxLevels {
			p.untracked++
			return nil
		}
		lv = &levelStats{keys: map[string]keyStat{}, families: map[string]int{}}
		p.levels[path] = lv
	}
	return lv
}

// arraysAt returns the paths, among path and its prefixes, at which the
// sample saw arrays, outermost first, and how many arrays it saw there in
// all: MongoDB makes an index on "a.b" multikey when "a" or "a.b" holds
// arrays.
func (p *profile) arraysAt(path string) (at []string, n int) {
	for prefix := range prefixes(path) {
		if a := p.arrays[prefix]; a != nil {
			at = append(at, prefix)
			n += a.lengths.n
		}
	}
	return at, n
}

// prefixes yields "a", "a.b", "a.b.c" for "a.b.c".
func prefixes(path string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for i := range len(path) {
			if path[i] == '.' && !yield(path[:i]) {
				return
			}
		}
		yield(path)
	}
}

// join appends key to a dotted path.
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// idString renders a document's _id for the evidence: an ObjectID as its
// hex, a string as itself, anything else as [humanValue] does; cut at 64
// bytes.
func idString(v bson.RawValue) string {
	var s string
	switch v.Type {
	case 0:
		return ""
	case bson.TypeObjectID:
		s = v.ObjectID().Hex()
	case bson.TypeString:
		s = v.StringValue()
	default:
		s = humanValue(v)
	}
	if len(s) > 64 {
		s = strings.ToValidUTF8(s[:61], "") + "..."
	}
	return s
}
