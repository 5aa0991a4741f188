package outlier

// Attack on 926b57a/b17ff68: the raw parts (bsoncore.Array, bson.Raw) of
// Append's push and Update's one-command update inside a bson.D whose _id
// is the caller's value, encoded by the driver with the database's
// registry and the client's BSONOptions.

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// atk61Encode encodes v as the driver's marshal does (mongo/mongo.go
// getEncoder): an Encoder with the client's BSONOptions and the
// database's registry.
func atk61Encode(t *testing.T, v any, reg *bson.Registry, o *options.BSONOptions) bson.Raw {
	t.Helper()
	buf := new(bytes.Buffer)
	enc := bson.NewEncoder(bson.NewDocumentWriter(buf))
	if o != nil {
		if o.ErrorOnInlineDuplicates {
			enc.ErrorOnInlineDuplicates()
		}
		if o.IntMinSize {
			enc.IntMinSize()
		}
		if o.NilByteSliceAsEmpty {
			enc.NilByteSliceAsEmpty()
		}
		if o.NilMapAsEmpty {
			enc.NilMapAsEmpty()
		}
		if o.NilSliceAsEmpty {
			enc.NilSliceAsEmpty()
		}
		if o.OmitZeroStruct {
			enc.OmitZeroStruct()
		}
		if o.OmitEmpty {
			enc.OmitEmpty()
		}
		if o.StringifyMapKeysWithFmt {
			enc.StringifyMapKeysWithFmt()
		}
		if o.UseJSONStructTags {
			enc.UseJSONStructTags()
		}
	}
	if reg != nil {
		enc.SetRegistry(reg)
	}
	require.NoError(t, enc.Encode(v))
	return buf.Bytes()
}

// atk61Registries are the registries an application may give its client
// or database: the driver's three constructors, the UUID one of
// attack60, and one whose bool and int encoders are the application's
// (a Go bool as int32, a Go int as int64 always).
func atk61Registries() map[string]*bson.Registry {
	odd := bson.NewRegistry()
	odd.RegisterTypeEncoder(reflect.TypeOf(true), bson.ValueEncoderFunc(func(_ bson.EncodeContext, vw bson.ValueWriter, v reflect.Value) error {
		if v.Bool() {
			return vw.WriteInt32(1)
		}
		return vw.WriteInt32(0)
	}))
	odd.RegisterTypeEncoder(reflect.TypeOf(0), bson.ValueEncoderFunc(func(_ bson.EncodeContext, vw bson.ValueWriter, v reflect.Value) error {
		return vw.WriteInt64(v.Int())
	}))
	return map[string]*bson.Registry{
		"default": nil, "NewRegistry": bson.NewRegistry(), "Mgo": bson.NewMgoRegistry(),
		"RespectNilMgo": bson.NewRespectNilValuesMgoRegistry(), "uuid": atk60Registry(), "odd bool/int": odd,
	}
}

var atk61Options = []*options.BSONOptions{
	nil,
	{IntMinSize: true, NilSliceAsEmpty: true, NilByteSliceAsEmpty: true, NilMapAsEmpty: true, OmitEmpty: true, OmitZeroStruct: true, StringifyMapKeysWithFmt: true, UseJSONStructTags: true},
	{OmitEmpty: true},
}

// TestAttack61RawPartsUnderRegistries: whatever the registry and the
// BSONOptions, the parts built as bytes reach the server as the bytes
// the default registry gives of the bson.D 926b57a~1 built; the parent id
// is the registry's. Logged: where 926b57a~1's bson.D encoded otherwise.
func TestAttack61RawPartsUnderRegistries(t *testing.T) {
	r, a, b := commandsRepo(t)
	items := []item{a, b}
	for name, reg := range atk61Registries() {
		for oi, o := range atk61Options {
			for _, p := range []plan{{serverSizeLimit: true, arrayFilters: true}, {}} {
				for _, n := range []int{5, unread, 0, r.cfg.Cap - 2} {
					if n == unread && !p.serverSizeLimit {
						continue
					}
					for _, its := range [][]item{items[:1], items} {
						msg := fmt.Sprintf("registry %s, options %d, plan %+v, n %d, %d items", name, oi, p, n, len(its))
						f, u := r.pushParentCommand(p, "p", n, its)
						require.Equal(t, atk61Encode(t, r.refPushFilter(p, "p", n, its), nil, nil), atk61Encode(t, f, reg, o), msg)
						require.Equal(t, atk61Encode(t, r.refPushUpdate(its), nil, nil), atk61Encode(t, u, reg, o), msg)
						if old := atk61Encode(t, r.refPushFilter(p, "p", n, its), reg, o); !bytes.Equal(old, atk61Encode(t, f, reg, o)) {
							t.Logf("%s: 926b57a~1's filter encoded otherwise: %s", msg, old)
						}
					}
				}
			}
			nf, nu, af := r.updateParentNative("p", a)
			wf, wu, waf := r.refUpdateNative("p", a)
			require.Equal(t, atk61Encode(t, wf, nil, nil), atk61Encode(t, nf, reg, o), name)
			require.Equal(t, atk61Encode(t, wu, nil, nil), atk61Encode(t, nu, reg, o), name)
			require.Equal(t, atk61Encode(t, waf[0], nil, nil), atk61Encode(t, af[0], reg, o), name)
		}
	}
}

// TestAttack61AppendUpdateUnderClientOptions: a repository on a client
// with the mgo registry and every BSONOption on stores each item once, in
// order, in the parent and past Cap in overflow, and Update replaces it
// there, as on the default client; Caps of 1 and 2 with Appends of more
// items than Cap (Cap - len(items) < 0 is never sent).
func TestAttack61AppendUpdateUnderClientOptions(t *testing.T) {
	ctx := context.Background()
	name := mongotest.DB(t).Name()
	for oi, o := range atk61Options[1:] {
		for _, regName := range []string{"Mgo", "RespectNilMgo"} {
			reg := atk61Registries()[regName]
			c := mongotest.Connect(t, mongotest.URI(), nil, func(co *options.ClientOptions) {
				co.SetRegistry(reg)
				co.SetBSONOptions(o)
			})
			db := c.Database(name)
			for _, cp := range []int{1, 2, 4} {
				t.Run(fmt.Sprintf("%s/options%d/cap%d", regName, oi, cp), func(t *testing.T) {
					cfg := Config{Parents: fmt.Sprintf("p_%s_%d_%d", regName, oi, cp), Overflow: fmt.Sprintf("o_%s_%d_%d", regName, oi, cp), Field: "comments", Cap: cp, OverflowCap: 2}
					r, err := New[post, comment](db, cfg)
					require.NoError(t, err)
					require.NoError(t, patterns.EnsureIndexes(ctx, r.Indexes()...))
					_, err = r.Insert(ctx, post{ID: 7})
					require.NoError(t, err)
					var want []comment
					for k, batch := range []int{1, 3, 2, 1} {
						cs := comments(fmt.Sprintf("b%d-", k), 0, batch)
						require.NoError(t, r.Append(ctx, uint64(7), cs...))
						want = append(want, cs...)
					}
					require.NoError(t, r.Append(ctx, 7, want[:3]...), "again: stored once")
					want[0].Text = "first"
					want[len(want)-1].Text = "last"
					require.NoError(t, r.Update(ctx, int64(7), want[0]))
					require.NoError(t, r.Update(ctx, uint32(7), want[len(want)-1]))
					_, got, err := r.Get(ctx, 7)
					require.NoError(t, err)
					require.Equal(t, want, got)
					n, err := r.Count(ctx, 7)
					require.NoError(t, err)
					require.Equal(t, len(want), n)
				})
			}
		}
	}
}
