package outlier

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/mongotest"
)

// E is a bson.E, shorter.
func E(k string, v any) bson.E { return bson.E{Key: k, Value: v} }

// requireEncodes requires a command built (in part) as bytes to encode,
// byte for byte, as want does.
func requireEncodes(t *testing.T, want bson.D, got any, msgAndArgs ...any) {
	t.Helper()
	w, err := bson.Marshal(want)
	require.NoError(t, err)
	g, err := bson.Marshal(got)
	require.NoError(t, err)
	require.Equal(t, bson.Raw(w), bson.Raw(g), msgAndArgs...)
}

// commandsRepo is a repository with an IDField other than _id, and two
// items, for TestCommands.
func commandsRepo(t *testing.T) (r *Repo[bson.Raw, bson.Raw], a, b item) {
	cfg := valid()
	cfg.IDField = "cid"
	r, err := New[bson.Raw, bson.Raw](offline, cfg)
	require.NoError(t, err)
	a = item{raw: bson.Raw{5, 0, 0, 0, 0}, id: rawValue(t, "a")}
	b = item{raw: bson.Raw{7, 0, 0, 0, 10, 0, 0}, id: rawValue(t, int32(2))} // {"": null}
	return r, a, b
}

// TestCommands pins the documents the repository sends whatever its plan:
// a change to any of them is a change of behaviour and must show here.
func TestCommands(t *testing.T) {
	r, a, b := commandsRepo(t)
	items := []item{a, b}

	require.Equal(t, bson.D{E("_id", 7)}, parentFilter(7))
	require.Equal(t, "comments.49", r.elementPath(49))
	require.Equal(t, "comments.5000", r.elementPath(5000), "past the paths built once")
	pushUpdate := func(items []item) bson.Raw {
		_, update := r.pushParentCommand(plan{}, 7, 5, items)
		return update
	}
	requireEncodes(t, bson.D{
		E("$push", bson.D{E("comments", bson.D{E("$each", bson.A{a.raw, b.raw})})}),
		E("$set", bson.D{E("has_extra", false), E("extra_tail", int64(0))}),
	}, pushUpdate(items))
	requireEncodes(t, bson.D{
		E("$push", bson.D{E("comments", a.raw)}),
		E("$set", bson.D{E("has_extra", false), E("extra_tail", int64(0))}),
	}, pushUpdate(items[:1]), "one item: no $each")
	require.Equal(t, bson.D{
		E("$set", bson.D{E("has_extra", true)}),
		E("$max", bson.D{E("extra_tail", int64(3))}),
	}, r.closeUpdate(3))
	none := E("$nor", bson.A{bson.D{E("comments.cid", bson.D{E("$in", bson.A{a.id, b.id})})}})
	require.Equal(t, bson.D{E("_id", 7), E("has_extra", true), none}, r.closeFilter(7, readClosed, items),
		"the close of a parent read closed: while it is closed and holds none of the items")
	require.Equal(t, bson.D{E("_id", 7), E("comments", bson.D{E("$size", 3)}), none}, r.closeFilter(7, 3, items),
		"the close of a parent read open with 3 items: while it holds exactly 3, none of them the items")
	require.Equal(t, bson.D{E("_id", 7), E("comments", bson.D{E("$size", 0)}), none}, r.closeFilter(7, 0, items),
		"the close of a parent read open and empty (full in bytes): while it is still empty")
	require.Equal(t, bson.D{E("parent", 7), E("_id", bson.D{E("$in", []bson.RawValue{a.id})})},
		leftoversFilter(7, []bson.RawValue{a.id}), "the documents found left over, by _id")

	require.Equal(t, bson.D{E("_id", 7), E("comments", nil)}, r.newArrayFilter(7))
	require.Equal(t, bson.D{E("$set", bson.D{E("comments", bson.A{})})}, r.newArrayUpdate())

	require.Equal(t, bson.D{E("$or", bson.A{
		bson.D{E("parent", 7), E("seq", bson.D{E("$gte", int64(2))})},
		bson.D{E("parent", 7), E("items.cid", bson.D{E("$in", bson.A{a.id, b.id})})},
	})}, r.overflowQuery(7, 2, items))
	require.Equal(t, bson.D{E("seq", 1), E("count", 1), E("bytes", 1), E("items.cid", 1)}, r.overflowQueryProjection())
	require.Equal(t, bson.D{
		E("parent", 7), E("seq", int64(4)),
		E("count", bson.D{E("$lte", int64(18))}),
		E("bytes", bson.D{E("$lte", int64(1000-30))}),
		E("$nor", bson.A{bson.D{E("items.cid", bson.D{E("$in", bson.A{a.id, b.id})})}}),
	}, r.pushOverflowFilter(7, 4, items, 30, 1000))
	require.Equal(t, bson.D{
		E("$inc", bson.D{E("count", int64(2)), E("bytes", int64(30))}),
		E("$push", bson.D{E("items", bson.D{E("$each", bson.A{a.raw, b.raw})})}),
	}, pushOverflowUpdate(items, 30))
	require.Equal(t, bson.D{
		E("$inc", bson.D{E("count", int64(1)), E("bytes", int64(30))}),
		E("$push", bson.D{E("items", a.raw)}),
	}, pushOverflowUpdate(items[:1], 30))

	require.Equal(t, bson.D{E("parent", 7)}, overflowFilter(7))
	require.Equal(t, bson.D{E("seq", 1)}, overflowOrder)
	require.Equal(t, bson.D{E("_id", 0), E("items", 1)}, overflowItemsProjection)
	require.Equal(t, bson.D{E("comments", 1), E("has_extra", 1)}, r.embeddedProjection())
	require.Equal(t, bson.D{E("comments.cid", 1), E("has_extra", 1)}, r.countProjection())
	require.Equal(t, mongo.Pipeline{
		bson.D{E("$match", bson.D{E("parent", 7)})},
		bson.D{E("$group", bson.D{E("_id", nil), E("n", bson.D{E("$sum", "$count")})})},
	}, countPipeline(7))

	require.Equal(t, bson.D{E("parent", 7), E("seq", bson.D{E("$gte", int64(3))})}, overflowPageFilter(7, 3))
	require.Equal(t, bson.D{E("_id", 0), E("seq", 1), E("items", 1)}, overflowPageProjection)
	require.Equal(t, bson.D{E("has_extra", 1)}, r.flagProjection())

	require.Equal(t, bson.D{E("seq", 1), E("bytes", 1), E("items", 1)}, holderUpdateProjection)

	ix := r.Indexes()
	require.Len(t, ix, 2)
	require.Equal(t, "posts_overflow", ix[0].Collection.Name())
	require.Equal(t, bson.D{E("parent", 1), E("seq", 1)}, ix[0].Model.Keys)
	var io options.IndexOptions
	for _, set := range ix[0].Model.Options.List() {
		require.NoError(t, set(&io))
	}
	require.True(t, *io.Unique)
	require.Equal(t, bson.D{E("parent", 1), E("items.cid", 1)}, ix[1].Model.Keys)
	require.Nil(t, ix[1].Model.Options)
}

// TestCommandsPerPlan pins, for the plan of every known server, the
// documents that differ between plans: what Append reads of a parent, and
// how Remove removes an item.
func TestCommandsPerPlan(t *testing.T) {
	r, a, b := commandsRepo(t)
	for name, srv := range mongotest.KnownServers() {
		t.Run(name, func(t *testing.T) {
			p := planFor(srv)
			// Two items pushed into a parent read with 5 (Cap is 50).
			nor := E("$nor", bson.A{bson.D{E("comments.cid", bson.D{E("$in", bson.A{a.id, b.id})})}})
			pushFilter := func(n int) bson.D {
				filter, _ := r.pushParentCommand(p, 7, n, []item{a, b})
				return filter
			}
			if p.serverSizeLimit {
				// Room for 2, whatever was read (the server checks the
				// size): no element at index 48, or, where an item's
				// field "48" makes that path exist, the 5 read.
				requireEncodes(t, bson.D{
					E("_id", 7),
					E("has_extra", bson.D{E("$ne", true)}),
					E("comments", bson.D{E("$type", "array")}),
					E("$or", bson.A{
						bson.D{E("comments.48", bson.D{E("$exists", false)})},
						bson.D{E("comments", bson.D{E("$size", 5)})},
					}),
					nor,
				}, pushFilter(5))
				requireEncodes(t, bson.D{
					E("_id", 7),
					E("has_extra", bson.D{E("$ne", true)}),
					E("comments", bson.D{E("$type", "array")}),
					E("comments.48", bson.D{E("$exists", false)}),
					nor,
				}, pushFilter(unread), "the push before any read")
			} else {
				requireEncodes(t, bson.D{
					E("_id", 7),
					E("has_extra", bson.D{E("$ne", true)}),
					E("comments", bson.D{E("$size", 5)}), // exactly the 5 read, whose size Append checked
					nor,
				}, pushFilter(5))
			}
			if p.serverSizeLimit {
				require.Equal(t, bson.D{E("has_extra", 1), E("extra_tail", 1), E("comments.cid", 1)}, r.stateProjection(p),
					"the flag, the tail hint and the ids: the server checks the size")
			} else {
				require.Nil(t, r.stateProjection(p), "the whole parent, to size the push")
			}
			old := rawValue(t, bson.D{E("cid", "a")})
			if p.arrayFilters {
				filter, update, af := r.updateParentNative(7, a)
				requireEncodes(t, bson.D{E("_id", 7), E("$or", bson.A{bson.D{E("comments.cid", a.id)}, bson.D{E("has_extra", true)}}),
					E("comments", bson.D{E("$ne", a.raw)}), E("comments.0", bson.D{E("$exists", true)})}, filter,
					"the item or the flag, no element stored as given, and an element (FerretDB 2.7 writes [null] into an empty array)")
				requireEncodes(t, bson.D{E("$set", bson.D{E("comments.$[e]", a.raw)})}, update)
				require.Len(t, af, 1, "Update: in the parent by id, in one command")
				requireEncodes(t, bson.D{E("e.cid", a.id)}, af[0].(bson.Raw))
			}
			if p.serverSizeLimit {
				require.Equal(t, bson.D{E("comments", 1), E("has_extra", 1)}, r.updateProjection(p), "Update: the array and the flag")
			} else {
				require.Nil(t, r.updateProjection(p), "Update: the whole parent, to size the write")
			}
			// Update's write of the element it read, old: by its value
			// where the server has arrayFilters; elsewhere by its index,
			// with the size read (Field.<i> also reads the field "<i>" of
			// any element: attack_updategap_test.go).
			oldItem := rawValue(t, bson.D{E("cid", "a"), E("text", "old")})
			parentUpdate, parentAF := r.updateParentUpdate(p, 1, old, a)
			overflowUpdate, overflowAF := updateOverflowUpdate(p, 4, oldItem, a, -3)
			if p.arrayFilters {
				byValue := []any{bson.D{E("e", bson.D{E("$eq", old)})}}
				require.Equal(t, bson.D{E("_id", 7), E("comments", bson.D{E("$eq", old)})}, r.updateParentFilter(p, 7, 1, old, 3),
					"the element as read, anywhere in the array")
				require.Equal(t, bson.D{E("$set", bson.D{E("comments.$[e]", a.raw)})}, parentUpdate)
				require.Equal(t, byValue, parentAF, "every element equal to the one read")
				require.Equal(t, bson.D{
					E("parent", 7), E("seq", int64(2)), E("items", bson.D{E("$eq", oldItem)}),
					E("bytes", bson.D{E("$lte", int64(1000-30))}),
				}, updateOverflowFilter(p, 7, 2, 4, 5, oldItem, 30, 1000), "a growing item: room for it")
				require.Equal(t, bson.D{E("parent", 7), E("seq", int64(2)), E("items", bson.D{E("$eq", oldItem)})},
					updateOverflowFilter(p, 7, 2, 4, 5, oldItem, -3, 1000), "a shrinking one: none needed")
				require.Equal(t, bson.D{
					E("$set", bson.D{E("items.$[e]", a.raw)}),
					E("$inc", bson.D{E("bytes", int64(-3))}),
				}, overflowUpdate)
				require.Equal(t, []any{bson.D{E("e", bson.D{E("$eq", oldItem)})}}, overflowAF)
			} else {
				require.Equal(t, bson.D{E("_id", 7), E("comments.1", old), E("comments", bson.D{E("$size", 3)})},
					r.updateParentFilter(p, 7, 1, old, 3), "the element at its index, in the array as read")
				require.Equal(t, bson.D{E("$set", bson.D{E("comments.1", a.raw)})}, parentUpdate)
				require.Nil(t, parentAF)
				require.Equal(t, bson.D{
					E("parent", 7), E("seq", int64(2)), E("items.4", oldItem), E("items", bson.D{E("$size", 5)}),
					E("bytes", bson.D{E("$lte", int64(1000-30))}),
				}, updateOverflowFilter(p, 7, 2, 4, 5, oldItem, 30, 1000), "a growing item: room for it")
				require.Equal(t, bson.D{E("parent", 7), E("seq", int64(2)), E("items.4", oldItem), E("items", bson.D{E("$size", 5)})},
					updateOverflowFilter(p, 7, 2, 4, 5, oldItem, -3, 1000), "a shrinking one: none needed")
				require.Equal(t, bson.D{
					E("$set", bson.D{E("items.4", a.raw)}),
					E("$inc", bson.D{E("bytes", int64(-3))}),
				}, overflowUpdate)
				require.Nil(t, overflowAF)
			}
			elems := bson.A{a.raw}
			if p.pullByCondition {
				filter, update := r.removeParentNative(7, "a")
				require.Equal(t, bson.D{E("_id", 7), E("$or", bson.A{bson.D{E("comments.cid", "a")}, bson.D{E("has_extra", true)}})}, filter,
					"the item, or the flag that says to look in overflow")
				require.Equal(t, bson.D{E("$pull", bson.D{E("comments", bson.D{E("cid", "a")})})}, update)
			} else {
				require.Equal(t, bson.D{E("comments", 1), E("has_extra", 1)}, r.embeddedProjection(), "Remove: the array, and the flag that says to look in overflow")
				filter, update := r.removeParentPortable(7, elems)
				require.Equal(t, bson.D{E("_id", 7), E("comments", bson.D{E("$all", elems)})}, filter, "the elements as read")
				require.Equal(t, bson.D{E("$pullAll", bson.D{E("comments", elems)})}, update)
			}
			if p.pipelineUpdates {
				filter, update := r.removeOverflowNative(7, "a")
				require.Equal(t, bson.D{E("parent", 7), E("items.cid", "a")}, filter)
				copies := func(op string) bson.D {
					return bson.D{E("$filter", bson.D{
						E("input", "$items"),
						E("cond", bson.D{E(op, bson.A{"$$this.cid", bson.D{E("$literal", "a")}})}),
					})}
				}
				require.Equal(t, mongo.Pipeline{bson.D{E("$set", bson.D{
					E("count", bson.D{E("$subtract", bson.A{"$count", bson.D{E("$size", copies("$eq"))}})}),
					E("items", copies("$ne")),
				})}}, update, "the count goes down by the copies pulled")
				return
			}
			require.Equal(t, bson.D{E("parent", 7), E("items.cid", "a")}, r.holderFilter(7, "a"))
			require.Equal(t, bson.D{E("items", 1)}, holderProjection)
			filter, update := r.removeOverflowPortable("doc", elems)
			require.Equal(t, bson.D{E("_id", "doc"), E("items", bson.D{E("$all", elems)})}, filter, "the elements as read")
			require.Equal(t, bson.D{
				E("$pullAll", bson.D{E("items", elems)}),
				E("$inc", bson.D{E("count", int64(-1))}),
			}, update)
		})
	}
}

func TestSameKey(t *testing.T) {
	want := bson.D{{Key: "parent", Value: 1}, {Key: "seq", Value: 1}}
	for _, tc := range []struct {
		key  bson.D
		same bool
	}{
		{bson.D{{Key: "parent", Value: int32(1)}, {Key: "seq", Value: int32(1)}}, true},
		{bson.D{{Key: "parent", Value: 1.0}, {Key: "seq", Value: int64(1)}}, true},
		{bson.D{{Key: "parent", Value: 1}, {Key: "seq", Value: -1}}, false},
		{bson.D{{Key: "seq", Value: 1}, {Key: "parent", Value: 1}}, false},
		{bson.D{{Key: "parent", Value: 1}}, false},
		{bson.D{{Key: "parent", Value: 1}, {Key: "seq", Value: "hashed"}}, false},
	} {
		raw, err := bson.Marshal(tc.key)
		require.NoError(t, err)
		require.Equal(t, tc.same, sameKey(raw, want), "%v", tc.key)
	}
}
