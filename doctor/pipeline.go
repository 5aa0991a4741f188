package doctor

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mongopatterns/mongopatterns/internal/check"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Pipeline is an aggregation pipeline an application runs on a collection.
type Pipeline struct {
	Collection string
	Stages     []bson.D
	// Name labels the pipeline in the report; empty means the collection
	// and the stage operators (see [Pipeline.String]).
	Name string
}

// String returns the Name, or "orders [$match $lookup $project]".
func (p Pipeline) String() string {
	if p.Name != "" {
		return p.Name
	}
	ops := make([]string, len(p.Stages))
	for i, s := range p.Stages {
		if len(s) > 0 {
			ops[i] = s[0].Key
		}
	}
	return p.Collection + " [" + strings.Join(ops, " ") + "]"
}

func (p Pipeline) validate() error {
	if err := check.Collection(p.Collection); err != nil {
		return err
	}
	if len(p.Stages) == 0 {
		return fmt.Errorf("pipeline on %s has no stages: %w", p.Collection, patterns.ErrInvalid)
	}
	for i, s := range p.Stages {
		if len(s) != 1 || !strings.HasPrefix(s[0].Key, "$") {
			return fmt.Errorf("stage %d is not a document with one $-operator: %w", i, patterns.ErrInvalid)
		}
	}
	return nil
}

// ParsePipeline reads a pipeline from MongoDB extended JSON:
//
//	{"collection": "orders", "pipeline": [{"$match": {"status": "paid"}}, {"$lookup": {...}}], "name": "paid orders with customers"}
//
// collection and pipeline are required, name is optional; any other key
// is an error. Errors wrap [patterns.ErrInvalid].
func ParsePipeline(data []byte) (Pipeline, error) {
	fields, err := parseSpec("ParsePipeline", data, "collection", "pipeline", "name")
	if err != nil {
		return Pipeline{}, err
	}
	var p Pipeline
	if p.Collection, err = specString("ParsePipeline", fields, "collection", true); err != nil {
		return Pipeline{}, err
	}
	if p.Name, err = specString("ParsePipeline", fields, "name", false); err != nil {
		return Pipeline{}, err
	}
	arr, ok := fields["pipeline"].(bson.A)
	if !ok {
		return Pipeline{}, fmt.Errorf("doctor: ParsePipeline: \"pipeline\" must be an array of stages: %w", patterns.ErrInvalid)
	}
	for i, s := range arr {
		d, ok := s.(bson.D)
		if !ok {
			return Pipeline{}, fmt.Errorf("doctor: ParsePipeline: stage %d is a %T, not a document: %w", i, s, patterns.ErrInvalid)
		}
		p.Stages = append(p.Stages, d)
	}
	if err := p.validate(); err != nil {
		return Pipeline{}, fmt.Errorf("doctor: ParsePipeline: %w", err)
	}
	return p, nil
}

// LintPipeline checks one pipeline (see the pipeline rules of [Rules]). It
// reads the pipeline and, for each $lookup, the indexes of the foreign
// collection: one listIndexes command per distinct foreign collection.
// It neither runs nor explains the pipeline.
func LintPipeline(ctx context.Context, db *mongo.Database, p Pipeline, opts Options) (Report, error) {
	s, err := opts.validate("LintPipeline")
	if err != nil {
		return Report{}, err
	}
	if db == nil {
		return Report{}, fmt.Errorf("doctor: LintPipeline: nil database: %w", patterns.ErrInvalid)
	}
	if err := p.validate(); err != nil {
		return Report{}, fmt.Errorf("doctor: LintPipeline: %w", err)
	}
	c := newChecker(db, s)
	rep := Report{Database: db.Name()}
	fs, err := lintPipeline(p, s, c.indexesOf(ctx))
	if err != nil {
		return Report{}, fmt.Errorf("doctor: LintPipeline: %s: %w", p, err)
	}
	rep.Findings = fs
	rep.Sort()
	return rep, nil
}

// stageInfo is what one stage reads and writes, as far as this analysis
// follows it.
type stageInfo struct {
	op        string
	uses      []string // field paths it reads; "*" for the whole document
	sets      []string // fields it adds or overwrites
	drops     []string // fields it removes
	keeps     []string // fields an inclusion projection keeps as they are
	inclusion bool     // an inclusion projection: only keeps and sets survive
	lookup    *lookupInfo
}

type lookupInfo struct {
	from, foreignField, as string
}

// carrying stages hold or multiply whole documents: a projection before
// them makes each document smaller where it costs most.
var carrying = []string{"$lookup", "$graphLookup", "$unwind", "$sort"}

// describe reads a stage. Stages it does not follow ($group, $facet,
// $replaceRoot, ...) get only their op; the rules stop at them.
func describe(stage bson.D) stageInfo {
	si := stageInfo{op: stage[0].Key}
	v := stage[0].Value
	switch si.op {
	case "$match":
		if d, ok := v.(bson.D); ok {
			si.uses = matchFields(d)
		}
	case "$sort":
		if d, ok := v.(bson.D); ok {
			for _, e := range d {
				si.uses = append(si.uses, e.Key)
			}
		}
	case "$project":
		d, _ := v.(bson.D)
		for _, e := range d {
			switch x := e.Value.(type) {
			case bool, int32, int64, float64, int:
				if truthy(x) {
					si.keeps = append(si.keeps, e.Key)
					si.inclusion = si.inclusion || e.Key != "_id"
				} else {
					si.drops = append(si.drops, e.Key)
				}
			default:
				si.sets = append(si.sets, e.Key)
				si.uses = append(si.uses, refs(x)...)
				si.inclusion = true
			}
		}
	case "$unset":
		switch x := v.(type) {
		case string:
			si.drops = []string{x}
		case bson.A:
			for _, f := range x {
				if s, ok := f.(string); ok {
					si.drops = append(si.drops, s)
				}
			}
		}
	case "$addFields", "$set":
		d, _ := v.(bson.D)
		for _, e := range d {
			si.sets = append(si.sets, e.Key)
			si.uses = append(si.uses, refs(e.Value)...)
		}
	case "$lookup", "$graphLookup":
		d, _ := v.(bson.D)
		li := &lookupInfo{}
		for _, e := range d {
			s, _ := e.Value.(string)
			switch e.Key {
			case "from":
				li.from = s
			case "as":
				li.as = s
			case "localField":
				si.uses = append(si.uses, s)
			case "foreignField", "connectToField":
				li.foreignField = s
			case "let", "startWith":
				si.uses = append(si.uses, refs(e.Value)...)
			case "pipeline":
				if li.foreignField == "" {
					li.foreignField = pipelineJoinField(e.Value)
				}
			}
		}
		si.sets = []string{li.as}
		si.lookup = li
	case "$unwind":
		var path, idx string
		switch x := v.(type) {
		case string:
			path = x
		case bson.D:
			for _, e := range x {
				s, _ := e.Value.(string)
				switch e.Key {
				case "path":
					path = s
				case "includeArrayIndex":
					idx = s
				}
			}
		}
		path = strings.TrimPrefix(path, "$")
		si.uses = []string{path}
		si.sets = []string{path}
		if idx != "" {
			si.sets = append(si.sets, idx)
		}
	case "$group", "$bucket", "$bucketAuto", "$sortByCount", "$count":
		si.uses = refs(v)
	}
	return si
}

func truthy(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case int32:
		return x != 0
	case int64:
		return x != 0
	case int:
		return x != 0
	case float64:
		return x != 0
	}
	return false
}

// matchFields returns the fields a $match filter reads.
func matchFields(d bson.D) []string {
	var out []string
	for _, e := range d {
		switch {
		case e.Key == "$and" || e.Key == "$or" || e.Key == "$nor":
			arr, _ := e.Value.(bson.A)
			for _, sub := range arr {
				if sd, ok := sub.(bson.D); ok {
					out = append(out, matchFields(sd)...)
				}
			}
		case e.Key == "$expr":
			out = append(out, refs(e.Value)...)
		case strings.HasPrefix(e.Key, "$"):
			out = append(out, "*") // $text, $where: the whole document
		default:
			out = append(out, e.Key)
		}
	}
	return out
}

// refs returns the field paths an expression reads: "$a.b" is a.b;
// "$$ROOT" and "$$CURRENT" are the whole document ("*"); other variables
// are not fields.
func refs(v any) []string {
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			switch {
			case x == "$$ROOT" || x == "$$CURRENT" || strings.HasPrefix(x, "$$ROOT.") || strings.HasPrefix(x, "$$CURRENT."):
				out = append(out, "*")
			case strings.HasPrefix(x, "$$"):
			case strings.HasPrefix(x, "$") && len(x) > 1:
				out = append(out, x[1:])
			}
		case bson.D:
			for _, e := range x {
				walk(e.Value)
			}
		case bson.A:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return out
}

// pipelineJoinField finds the foreign field of a $lookup written with let
// and pipeline: the field compared by {$eq: ["$field", "$$var"]} in a
// $match $expr of the sub-pipeline's first stage.
func pipelineJoinField(v any) string {
	stages, _ := v.(bson.A)
	if len(stages) == 0 {
		return ""
	}
	first, _ := stages[0].(bson.D)
	if len(first) != 1 || first[0].Key != "$match" {
		return ""
	}
	m, _ := first[0].Value.(bson.D)
	for _, e := range m {
		if e.Key != "$expr" {
			continue
		}
		var found string
		var walk func(any)
		walk = func(x any) {
			d, ok := x.(bson.D)
			if !ok || found != "" {
				return
			}
			for _, op := range d {
				switch op.Key {
				case "$eq":
					args, _ := op.Value.(bson.A)
					if len(args) == 2 {
						a, _ := args[0].(string)
						b, _ := args[1].(string)
						switch {
						case strings.HasPrefix(a, "$") && !strings.HasPrefix(a, "$$") && strings.HasPrefix(b, "$$"):
							found = a[1:]
						case strings.HasPrefix(b, "$") && !strings.HasPrefix(b, "$$") && strings.HasPrefix(a, "$$"):
							found = b[1:]
						}
					}
				case "$and":
					args, _ := op.Value.(bson.A)
					for _, a := range args {
						walk(a)
					}
				}
			}
		}
		walk(e.Value)
		return found
	}
	return ""
}

// touches reports whether two field paths overlap: one is the other or
// lies inside it. "*" touches everything.
func touches(a, b string) bool {
	return a == "*" || b == "*" || a == b || strings.HasPrefix(a, b+".") || strings.HasPrefix(b, a+".")
}

func touchesAny(as, bs []string) bool {
	for _, a := range as {
		for _, b := range bs {
			if touches(a, b) {
				return true
			}
		}
	}
	return false
}

// within reports whether path lies inside one of the roots (or is one).
func within(path string, roots []string) bool {
	return slices.ContainsFunc(roots, func(r string) bool { return path == r || strings.HasPrefix(path, r+".") })
}

// indexLookup returns the indexes of a collection of the database and
// whether it exists.
type indexLookup func(coll string) ([]indexSpec, bool, error)

// lintPipeline applies the pipeline rules.
func lintPipeline(p Pipeline, s settings, indexesOf indexLookup) ([]Finding, error) {
	infos := make([]stageInfo, len(p.Stages))
	for i, st := range p.Stages {
		infos[i] = describe(st)
	}
	var out []Finding
	add := func(rule string, sev Severity, field, msg string, ev Evidence, remedy string) {
		if s.on(rule) {
			out = append(out, Finding{Rule: rule, Severity: sev, Collection: p.Collection, Field: field,
				Query: p.String(), Message: msg, Evidence: ev, Remedy: remedy})
		}
	}
	for i, si := range infos {
		switch si.op {
		case "$match":
			if filter, ok := p.Stages[i][0].Value.(bson.D); ok {
				sh, _ := shapeOf(filter, nil) // a malformed $match has no regex to report
				for _, re := range sh.regexI {
					add(RuleCaseInsensitiveRegex, Warning, re.Path, regexMessage(re),
						Evidence{{"stage", i}, {"pattern", re.Pattern}, {"anchored", strings.HasPrefix(re.Pattern, "^")}}, regexRemedy)
				}
			}
			if j := matchTarget(infos, i); j < i {
				sev, where := Info, fmt.Sprintf("before stage %d (%s)", j, infos[j].op)
				if j == 0 {
					sev, where = Warning, "to the front, where it can use an index"
				}
				add(RulePipelineMatchLate, sev, strings.Join(si.uses, ", "),
					fmt.Sprintf("stage %d ($match) could move %s: only a leading $match (and $sort) uses an index", i, where),
					Evidence{{"stage", i}, {"canMoveTo", j}, {"passes", opsOf(infos[j:i])}},
					"move the $match "+where+" (MongoDB's optimizer moves some $match stages itself, as explain shows; other servers may not)")
			}
		case "$project", "$unset":
			if j := projectTarget(infos, i); j < i && slices.ContainsFunc(infos[j:i], func(x stageInfo) bool { return slices.Contains(carrying, x.op) }) {
				add(RulePipelineProjectLate, Info, strings.Join(slices.Concat(si.drops, si.keeps, si.sets), ", "),
					fmt.Sprintf("stage %d (%s) could move before stage %d (%s): the stages between carry fields it drops", i, si.op, j, infos[j].op),
					Evidence{{"stage", i}, {"canMoveTo", j}, {"passes", opsOf(infos[j:i])}},
					fmt.Sprintf("move the %s before stage %d so fewer bytes pass through %s", si.op, j, opsOf(infos[j:i])))
			}
		}
		if si.lookup == nil || si.op != "$lookup" {
			continue
		}
		ev, err := lookupUnindexed(si.lookup, indexesOf)
		if err != nil {
			return nil, err
		}
		if ev != nil {
			add(RulePipelineLookupUnindexed, Warning, si.lookup.foreignField,
				fmt.Sprintf("stage %d ($lookup from %s) matches on %s, which no index of %s starts with: each input document scans %s",
					i, si.lookup.from, si.lookup.foreignField, si.lookup.from, si.lookup.from),
				append(Evidence{{"stage", i}, {"from", si.lookup.from}, {"foreignField", si.lookup.foreignField}}, ev...),
				fmt.Sprintf("create an index on %s {%s: 1}", si.lookup.from, si.lookup.foreignField))
		}
		if used, whole := lookupUse(infos, i); !whole && len(used) > 0 && len(used) <= s.th.LookupFields {
			add(RulePipelineLookupExtref, Info, strings.Join(used, ", "),
				fmt.Sprintf("stage %d ($lookup from %s) is read for %d field(s) only: %s", i, si.lookup.from, len(used), strings.Join(used, ", ")),
				Evidence{{"stage", i}, {"fieldsRead", len(used)}, {"threshold", s.th.LookupFields}},
				"copy these fields into the documents and keep them in sync with an extended reference (package extref); then drop the $lookup")
		}
	}
	return out, nil
}

func opsOf(infos []stageInfo) string {
	ops := make([]string, len(infos))
	for i, si := range infos {
		ops[i] = si.op
	}
	return strings.Join(ops, " ")
}

// matchTarget returns the earliest position the $match at i can move to
// without changing the results: past $sort; past projections and
// $addFields that do not write, drop or compute the fields it reads; past
// $lookup and $unwind that do not write them. Never past $limit, $skip,
// $group or stages it does not follow.
func matchTarget(infos []stageInfo, i int) int {
	m := infos[i].uses
	j := i
	for ; j > 0; j-- {
		prev := infos[j-1]
		ok := false
		switch prev.op {
		case "$sort":
			ok = true
		case "$project", "$unset", "$addFields", "$set", "$lookup", "$graphLookup", "$unwind":
			ok = !touchesAny(m, prev.sets) && !touchesAny(m, prev.drops)
			if prev.inclusion {
				ok = ok && !slices.Contains(m, "*") && allWithin(m, prev.keeps)
			}
		}
		if !ok {
			break
		}
	}
	return j
}

func allWithin(paths, roots []string) bool {
	for _, p := range paths {
		if !within(p, roots) {
			return false
		}
	}
	return true
}

// projectTarget returns the earliest position the projection at i can
// move to without changing the results: past $lookup, $graphLookup,
// $unwind, $sort, $addFields and $set stages that neither read nor write
// what it drops, and (for an inclusion projection) that read only fields
// it keeps and write only fields it keeps. Never past a $match, $limit or
// $skip: those belong before it, since they cut the documents it works
// on.
func projectTarget(infos []stageInfo, i int) int {
	pr := infos[i]
	j := i
	for ; j > 0; j-- {
		prev := infos[j-1]
		switch prev.op {
		case "$lookup", "$graphLookup", "$unwind", "$sort", "$addFields", "$set":
		default:
			return j
		}
		if touchesAny(pr.uses, prev.sets) || touchesAny(pr.drops, prev.uses) || touchesAny(pr.drops, prev.sets) {
			return j
		}
		if pr.inclusion && (slices.Contains(prev.uses, "*") || !allWithin(prev.uses, append(pr.keeps, pr.sets...)) || !allWithin(prev.sets, pr.keeps)) {
			return j
		}
	}
	return j
}

// lookupUnindexed checks the foreign field of a $lookup against the
// foreign collection's indexes: an index serves it when its first field
// is the foreign field and it is neither hidden, sparse nor partial. It
// returns nil evidence when served or when the lookup cannot be checked
// (another database, a pipeline without a plain join field).
func lookupUnindexed(li *lookupInfo, indexesOf indexLookup) (Evidence, error) {
	if li.from == "" || li.foreignField == "" {
		return nil, nil
	}
	specs, exists, err := indexesOf(li.from)
	if err != nil {
		return nil, err
	}
	for _, ix := range specs {
		if len(ix.Key) > 0 && ix.Key[0].Path == li.foreignField && !ix.Hidden && !ix.Sparse && ix.Partial == nil &&
			(ix.Key[0].Kind == "" || ix.Key[0].Kind == "hashed") {
			return nil, nil
		}
	}
	return Evidence{{"foreignCollectionExists", exists}, {"foreignIndexes", len(specs)}}, nil
}

// lookupUse returns the fields of the $lookup at i that later stages read
// ("customer.name" for as "customer"), and whether a stage reads the
// joined documents whole. It stops at a stage it does not follow.
func lookupUse(infos []stageInfo, i int) (used []string, whole bool) {
	as := infos[i].lookup.as
	for _, si := range infos[i+1:] {
		reads := append(append([]string{}, si.uses...), si.keeps...)
		for _, r := range reads {
			switch {
			case r == "*" || (r == as && si.op != "$unwind"):
				return used, true
			case strings.HasPrefix(r, as+"."):
				used = appendNew(used, r)
			}
		}
		if (slices.Contains(si.sets, as) && si.op != "$unwind") || unfollowed(si) {
			break
		}
	}
	return used, false
}

// unfollowed reports a stage whose output fields this analysis does not
// follow ($group, $replaceRoot, $facet, ...).
func unfollowed(si stageInfo) bool {
	switch si.op {
	case "$match", "$sort", "$project", "$unset", "$addFields", "$set", "$lookup", "$graphLookup", "$unwind", "$limit", "$skip":
		return false
	}
	return true
}
