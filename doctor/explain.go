package doctor

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// planReading is what an explain reply says about how the server would
// run a query.
type planReading struct {
	// Readable: the reply holds a plan in one of the forms below, and
	// the plan says whether the query reads an index or the whole
	// collection.
	Readable bool
	// Form names the form read: "winningPlan" (MongoDB's stage tree),
	// "PostgreSQL plan" (FerretDB 2.x: nodes with a "Node Type"),
	// "SQLite plan" (FerretDB 1.x: EXPLAIN QUERY PLAN lines); empty when
	// the reply holds none of them.
	Form string
	// Scan: the plan reads the whole collection (COLLSCAN, "Seq Scan",
	// SQLite "SCAN t" without an index).
	Scan bool
	// Indexes names the indexes the plan reads, where the form says.
	Indexes []string
	// Text is the plan in one line, as read: "FETCH > IXSCAN status_1";
	// for a reply that is not Readable, what it holds and why it cannot
	// say.
	Text string
}

// explainFind asks the server how it would run a find: one explain
// command at queryPlanner verbosity, which plans the query without
// running it (never executionStats: that would run it on user data).
func explainFind(ctx context.Context, db *mongo.Database, q Query) (bson.Raw, error) {
	find := bson.D{{Key: "find", Value: q.Collection}, {Key: "filter", Value: nonNil(q.Filter)}}
	if len(q.Sort) > 0 {
		find = append(find, bson.E{Key: "sort", Value: q.Sort})
	}
	return db.RunCommand(ctx, bson.D{{Key: "explain", Value: find}, {Key: "verbosity", Value: "queryPlanner"}}).Raw()
}

func nonNil(d bson.D) bson.D {
	if d == nil {
		return bson.D{}
	}
	return d
}

// readPlan reads an explain reply. It recognises what the server answered,
// not which server it is:
//
//   - MongoDB: queryPlanner.winningPlan, a tree of stages (inputStage,
//     inputStages; winningPlan.queryPlan for the slot-based engine;
//     winningPlan.shards[].winningPlan on a sharded cluster). COLLSCAN is a
//     collection scan; IXSCAN, COUNT_SCAN, DISTINCT_SCAN, EXPRESS_IXSCAN
//     and IDHACK read an index.
//   - FerretDB 2.x: PostgreSQL's plan under queryPlanner, nodes with a
//     "Node Type": "Seq Scan" is a collection scan; "Index Scan", "Index
//     Only Scan" and "Bitmap Index Scan" read the index named by "Index
//     Name".
//   - FerretDB 1.x (SQLite): queryPlanner.Plan, lines of SQLite's EXPLAIN
//     QUERY PLAN ("id=2 parent=0 notused=0 detail=SCAN c_e60c2c52"):
//     "SEARCH t USING INDEX i" reads an index; "SCAN t USING INDEX i"
//     reads all of an index, a scan. A plan that names no index ("SCAN t"
//     alone) is not readable: it is the plan of the SQL statement the
//     server built, which reads SCAN for every filter, a lookup by _id
//     included, so it cannot tell a query an index serves from one none
//     does.
//
// Anything else is not readable, and the rule says so instead of guessing.
func readPlan(reply bson.Raw) planReading {
	qp, err := reply.LookupErr("queryPlanner")
	if err != nil || qp.Type != bson.TypeEmbeddedDocument {
		return planReading{Text: "the reply has no queryPlanner"}
	}
	doc := qp.Document()
	if wp, err := doc.LookupErr("winningPlan"); err == nil && wp.Type == bson.TypeEmbeddedDocument {
		r := planReading{Readable: true, Form: "winningPlan"}
		var stages []string
		readStages(wp.Document(), &r, &stages)
		r.Text = strings.Join(stages, " > ")
		return r
	}
	var pg planReading
	var pgNodes []string
	readPostgres(qp, &pg, &pgNodes)
	if len(pgNodes) > 0 {
		pg.Readable, pg.Form, pg.Text = true, "PostgreSQL plan", strings.Join(pgNodes, " > ")
		return pg
	}
	if plan, err := doc.LookupErr("Plan"); err == nil && plan.Type == bson.TypeArray {
		if r, ok := readSQLite(plan.Array()); ok {
			return r
		}
	}
	keys := []string{}
	if elems, err := doc.Elements(); err == nil {
		for _, e := range elems {
			keys = append(keys, e.Key())
		}
	}
	return planReading{Text: fmt.Sprintf("queryPlanner holds no plan this package can read (keys: %s)", strings.Join(keys, ", "))}
}

// indexStages are the MongoDB stages that read an index.
var indexStages = []string{"IXSCAN", "COUNT_SCAN", "DISTINCT_SCAN", "EXPRESS_IXSCAN", "IDHACK"}

// readStages walks a MongoDB stage tree depth first.
func readStages(stage bson.Raw, r *planReading, out *[]string) {
	if qp, err := stage.LookupErr("queryPlan"); err == nil && qp.Type == bson.TypeEmbeddedDocument {
		readStages(qp.Document(), r, out)
		return
	}
	if shards, err := stage.LookupErr("shards"); err == nil && shards.Type == bson.TypeArray {
		vals, _ := shards.Array().Values()
		for _, s := range vals {
			if d, ok := s.DocumentOK(); ok {
				if wp, err := d.LookupErr("winningPlan"); err == nil && wp.Type == bson.TypeEmbeddedDocument {
					readStages(wp.Document(), r, out)
				}
			}
		}
	}
	name, _ := stage.Lookup("stage").StringValueOK()
	if name != "" {
		label := name
		switch {
		case name == "COLLSCAN":
			r.Scan = true
		case name == "IDHACK":
			r.Indexes = appendNew(r.Indexes, "_id_")
		case slices.Contains(indexStages, name):
			if ix, ok := stage.Lookup("indexName").StringValueOK(); ok {
				r.Indexes = appendNew(r.Indexes, ix)
				label += " " + ix
			}
		}
		*out = append(*out, label)
	}
	if in, err := stage.LookupErr("inputStage"); err == nil && in.Type == bson.TypeEmbeddedDocument {
		readStages(in.Document(), r, out)
	}
	if ins, err := stage.LookupErr("inputStages"); err == nil && ins.Type == bson.TypeArray {
		vals, _ := ins.Array().Values()
		for _, v := range vals {
			if d, ok := v.DocumentOK(); ok {
				readStages(d, r, out)
			}
		}
	}
}

// readPostgres finds PostgreSQL plan nodes anywhere under v.
func readPostgres(v bson.RawValue, r *planReading, out *[]string) {
	switch v.Type {
	case bson.TypeEmbeddedDocument:
		d := v.Document()
		if nt, ok := d.Lookup("Node Type").StringValueOK(); ok {
			label := nt
			switch nt {
			case "Seq Scan":
				r.Scan = true
			case "Index Scan", "Index Only Scan", "Bitmap Index Scan":
				if ix, ok := d.Lookup("Index Name").StringValueOK(); ok {
					r.Indexes = appendNew(r.Indexes, ix)
					label += " " + ix
				}
			}
			*out = append(*out, label)
		}
		elems, _ := d.Elements()
		for _, e := range elems {
			if e.Key() != "Node Type" {
				readPostgres(e.Value(), r, out)
			}
		}
	case bson.TypeArray:
		vals, _ := v.Array().Values()
		for _, x := range vals {
			readPostgres(x, r, out)
		}
	}
}

// readSQLite reads FerretDB 1.x's SQLite plan lines.
func readSQLite(lines bson.RawArray) (planReading, bool) {
	vals, err := lines.Values()
	if err != nil || len(vals) == 0 {
		return planReading{}, false
	}
	r := planReading{Readable: true, Form: "SQLite plan"}
	var details []string
	for _, v := range vals {
		s, ok := v.StringValueOK()
		if !ok {
			return planReading{}, false
		}
		detail := s
		if _, after, found := strings.Cut(s, "detail="); found {
			detail = after
		}
		details = append(details, detail)
		switch {
		case strings.HasPrefix(detail, "SCAN "):
			r.Scan = true
		case strings.HasPrefix(detail, "SEARCH "):
		default:
			continue
		}
		if _, after, found := strings.Cut(detail, "USING "); found {
			after = strings.TrimPrefix(after, "COVERING ")
			if ix, ok := strings.CutPrefix(after, "INDEX "); ok {
				r.Indexes = appendNew(r.Indexes, strings.Fields(ix)[0])
			}
		}
	}
	r.Text = strings.Join(details, "; ")
	if len(r.Indexes) == 0 {
		return planReading{Form: r.Form, Text: fmt.Sprintf(
			"SQLite's plan %q names no index, and that form reads SCAN for a lookup by _id too: it cannot say whether an index serves the query", r.Text)}, true
	}
	return r, true
}
