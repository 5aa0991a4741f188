package validation_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
	"github.com/mongopatterns/mongopatterns/validation"
)

// atom is a Go type of one driver rule with values of it.
type atom struct {
	t       reflect.Type
	samples []any
}

// atoms are the types of the driver's rules without tags or settings
// (driverRules), each with its samples.
func atoms() []atom {
	var out []atom
	for _, r := range driverRules() {
		if r.tag == "" && r.enc == nil && r.at == "" {
			out = append(out, atom{r.typ, r.samples})
		}
	}
	return out
}

// genType is a random Go type built from the atoms: slices, arrays,
// pointers, maps and structs of them (with random omitempty and minsize
// tags), and a generator of random values of it.
type genType struct {
	t   reflect.Type
	gen func(r *rand.Rand) reflect.Value
}

func randType(r *rand.Rand, as []atom, depth int) genType {
	k := r.IntN(12)
	if depth >= 2 {
		k = 0
	}
	sub := func() genType { return randType(r, as, depth+1) }
	switch k {
	case 6:
		e := sub()
		t := reflect.SliceOf(e.t)
		return genType{t, func(r *rand.Rand) reflect.Value {
			if r.IntN(4) == 0 {
				return reflect.Zero(t)
			}
			s := reflect.MakeSlice(t, 0, 2)
			for range r.IntN(3) {
				s = reflect.Append(s, e.gen(r))
			}
			return s
		}}
	case 7:
		e := sub()
		t := reflect.PointerTo(e.t)
		return genType{t, func(r *rand.Rand) reflect.Value {
			if r.IntN(3) == 0 {
				return reflect.Zero(t)
			}
			p := reflect.New(e.t)
			p.Elem().Set(e.gen(r))
			return p
		}}
	case 8:
		e := sub()
		t := reflect.MapOf(reflect.TypeFor[string](), e.t)
		return genType{t, func(r *rand.Rand) reflect.Value {
			if r.IntN(4) == 0 {
				return reflect.Zero(t)
			}
			m := reflect.MakeMap(t)
			for i := range r.IntN(3) {
				m.SetMapIndex(reflect.ValueOf(fmt.Sprintf("k%d", i)), e.gen(r))
			}
			return m
		}}
	case 9:
		return randStruct(r, as, depth+1, 1+r.IntN(3))
	case 10:
		e := sub()
		t := reflect.ArrayOf(2, e.t)
		return genType{t, func(r *rand.Rand) reflect.Value {
			a := reflect.New(t).Elem()
			for i := range 2 {
				a.Index(i).Set(e.gen(r))
			}
			return a
		}}
	}
	a := as[r.IntN(len(as))]
	return genType{a.t, func(r *rand.Rand) reflect.Value {
		s := a.samples[r.IntN(len(a.samples))]
		if s == nil {
			return reflect.Zero(a.t)
		}
		return reflect.ValueOf(s)
	}}
}

func randStruct(r *rand.Rand, as []atom, depth, n int) genType {
	fields := make([]reflect.StructField, n)
	gens := make([]func(*rand.Rand) reflect.Value, n)
	for i := range fields {
		g := randType(r, as, depth)
		tag := fmt.Sprintf("f%d", i)
		if r.IntN(3) == 0 {
			tag += ",omitempty"
		}
		if r.IntN(4) == 0 {
			tag += ",minsize"
		}
		fields[i] = reflect.StructField{Name: fmt.Sprintf("F%d", i), Type: g.t, Tag: reflect.StructTag(`bson:"` + tag + `"`)}
		gens[i] = g.gen
	}
	t := reflect.StructOf(fields)
	return genType{t, func(r *rand.Rand) reflect.Value {
		v := reflect.New(t).Elem()
		for i, g := range gens {
			v.Field(i).Set(g(r))
		}
		return v
	}}
}

// TestDifferential: random types built from the driver's rules, random
// values of them encoded by bson.Marshal: every encoded value passes
// Validate, and, where the server enforces validators, the server under
// Apply's validator accepts it; each document with one top-level field
// removed or replaced by a value of another rule gets the same verdict
// from Validate and from the server.
func TestDifferential(t *testing.T) {
	as := atoms()
	r := rand.New(rand.NewPCG(32, 7))
	server := mongotest.Server().Has(patterns.FeatureValidators)
	ctx := context.Background()
	var p validation.Plan
	if server {
		p = validation.PlanFor(mongotest.Server())
	}
	db := mongotest.DB(t)
	types, perType := mongotest.Scale(60, 30), 8
	var applied, skipped, mutants, refused int
	for i := range types {
		g := randStruct(r, as, 0, 1+r.IntN(5))
		v, err := validation.ForType(g.t)
		require.NoError(t, err, "%s", g.t)
		var docs []bson.Raw
		for range perType {
			raw, err := bson.Marshal(g.gen(r).Interface())
			require.NoError(t, err, "%s", g.t)
			require.Nil(t, v.Validate(raw), "%s: %s", g.t, bson.Raw(raw))
			docs = append(docs, raw)
		}
		if !server {
			continue
		}
		name := fmt.Sprintf("t%d", i)
		err = validation.ApplyPlan(ctx, db, name, v, "", "", p)
		if errors.Is(err, patterns.ErrUnsupported) {
			skipped++ // no portable form: checked by the tests of what Portable refuses
			continue
		}
		require.NoError(t, err, "%s", g.t)
		applied++
		coll := db.Collection(name)
		for _, raw := range docs {
			_, err := coll.InsertOne(ctx, raw)
			require.NoError(t, err, "%s: the server refuses the driver's %s", g.t, raw)
			// One field removed or replaced by a value of another rule.
			var d bson.D
			require.NoError(t, bson.Unmarshal(raw, &d))
			k := r.IntN(len(d))
			if r.IntN(3) == 0 {
				d = append(d[:k:k], d[k+1:]...)
			} else {
				a := as[r.IntN(len(as))]
				d[k].Value = a.samples[r.IntN(len(a.samples))]
			}
			d = append(d, bson.E{Key: "_id", Value: bson.NewObjectID()})
			mutant, err := bson.Marshal(d)
			require.NoError(t, err)
			fe := v.Validate(mutant)
			_, err = coll.InsertOne(ctx, mutant)
			require.Equal(t, fe == nil, err == nil, "%s: %s: Validate says %v, the server %v", g.t, bson.Raw(mutant), fe, err)
			mutants++
			if fe != nil {
				refused++
			}
		}
	}
	mongotest.Detail(t, "%d types: %d applied, %d without a portable form; %d mutants, %d refused by both", types, applied, skipped, mutants, refused)
}
