package doctor

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/shard"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// The rules of a sharded deployment, for the indexes a repository declares
// ([Options].Indexes), checked against the shard keys the cluster holds.
const (
	// RuleShardKeyUniqueIndex: a declared unique index that the
	// collection's shard key does not prefix, which mongos refuses to
	// build (code 67, CannotCreateIndex).
	RuleShardKeyUniqueIndex = "shard-key-unique-index"
	// RuleShardKeyDeclaredQueries: a declared index whose queries (each
	// names its first field) the collection's shard key sends to every
	// shard. A TTL index serves no query (each shard deletes its own
	// expired documents), and an index whose patterns.Index.EveryShard
	// says its queries read the whole collection by design is not
	// reported either.
	RuleShardKeyDeclaredQueries = "shard-key-declared-queries"
)

// sharding checks the declared indexes against the shard keys of the
// database's collections, time-series ones included (under the key
// shardCollection took), on a mongos only: one find on
// config.collections.
func (c *checker) sharding(ctx context.Context, srv *patterns.Server) error {
	if srv.Topology != patterns.Sharded || len(c.s.Indexes) == 0 {
		return nil
	}
	filter := bson.D{{Key: "_id", Value: bson.Regex{Pattern: "^" + regexp.QuoteMeta(c.db.Name()+".")}}}
	cur, err := c.db.Client().Database("config").Collection("collections").Find(ctx, filter)
	if err != nil {
		return fmt.Errorf("config.collections: %w", err)
	}
	var docs []bson.Raw
	if err := cur.All(ctx, &docs); err != nil {
		return fmt.Errorf("config.collections: %w", err)
	}
	keys, err := shardKeysOf(c.db.Name(), docs)
	if err != nil {
		return fmt.Errorf("config.collections: %w", err)
	}
	fs, err := shardingFindings(shard.Cluster{Version: srv.Version, Keys: keys}, c.db.Name(), c.s.Indexes)
	c.addAll(fs)
	return err
}

// shardKeysOf reads the shard keys of database db's collections from the
// documents of config.collections ({_id: "<db>.<collection>", key: {...},
// dropped: <bool>, unsplittable: <bool>}, as a mongos answers). A dropped
// collection, and one MongoDB 8.0 tracks unsharded (unsplittable: true,
// key {_id: 1}: moved by moveCollection or unshardCollection, on one
// shard), has no shard key. A sharded time-series collection is listed as
// its buckets collection (system.buckets.<name>, with timeseriesFields),
// sharded on the buckets' fields: its key is given back under the
// collection's name, as shardCollection took it (bucketKey).
func shardKeysOf(db string, docs []bson.Raw) (map[string]shard.Key, error) {
	keys := map[string]shard.Key{}
	for _, doc := range docs {
		var d struct {
			ID           string      `bson:"_id"`
			Key          bson.D      `bson:"key"`
			Dropped      bool        `bson:"dropped"`
			Unsplittable bool        `bson:"unsplittable"`
			TimeSeries   *timeSeries `bson:"timeseriesFields"`
		}
		if err := bson.Unmarshal(doc, &d); err != nil {
			return nil, err
		}
		coll, ok := strings.CutPrefix(d.ID, db+".")
		if !ok || d.Dropped || d.Unsplittable {
			continue
		}
		if d.TimeSeries != nil {
			coll = strings.TrimPrefix(coll, "system.buckets.")
			d.Key = bucketKey(d.Key, *d.TimeSeries)
		}
		k, err := shard.ParseKey(d.Key)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d.ID, err)
		}
		keys[coll] = k
	}
	return keys, nil
}

// bucketKey returns the shard key of a time-series collection as
// shardCollection took it, from the key of its buckets collection
// (mongodb/mongo timeseries createBucketsShardKeySpecFromTimeseriesShardKeySpec:
// the metaField, and fields inside it, are the buckets' meta and fields
// inside it; the timeField is control.min.<timeField>).
func bucketKey(key bson.D, ts timeSeries) bson.D {
	out := make(bson.D, len(key))
	for i, e := range key {
		out[i] = e
		switch rest, ok := strings.CutPrefix(e.Key, "meta"); {
		case e.Key == "control.min."+ts.TimeField:
			out[i].Key = ts.TimeField
		case ok && ts.MetaField != "" && (rest == "" || strings.HasPrefix(rest, ".")):
			out[i].Key = ts.MetaField + rest
		}
	}
	return out
}

// shardingFindings routes, for each declared index of database db on a
// sharded collection, its createIndexes and the query on its first field
// (internal/shard decides both).
func shardingFindings(cluster shard.Cluster, db string, declared []patterns.Index) ([]Finding, error) {
	var out []Finding
	for i, ix := range declared {
		if ix.Collection == nil {
			return out, fmt.Errorf("index %d has no collection: %w", i, patterns.ErrInvalid)
		}
		coll := ix.Collection.Name()
		key := cluster.Keys[coll]
		if key == nil || ix.Collection.Database().Name() != db {
			continue
		}
		w, err := wantOf(ix.Model)
		if err != nil {
			return out, fmt.Errorf("index %d on %s: %w", i, coll, err)
		}
		spec := bson.D{{Key: "key", Value: keyDoc(w.key)}, {Key: "name", Value: w.name()}}
		if w.opts.Unique != nil && *w.opts.Unique {
			spec = append(spec, bson.E{Key: "unique", Value: true})
		}
		cmd, err := bson.Marshal(bson.D{{Key: "createIndexes", Value: coll}, {Key: "indexes", Value: bson.A{spec}}})
		if err != nil {
			return out, err
		}
		r, err := cluster.Route(cmd)
		if err != nil {
			return out, err
		}
		evidence := Evidence{{"shardKey", key.String()}, {"indexKey", keyString(w.key)}}
		if r.Target == shard.Refused {
			out = append(out, Finding{Rule: RuleShardKeyUniqueIndex, Severity: Critical, Collection: coll, Index: w.name(),
				Message:  fmt.Sprintf("the unique index %s %s is not prefixed by the shard key %s: mongos refuses to build it (code %d)", w.name(), keyString(w.key), key, r.Code),
				Evidence: append(evidence, Measure{"code", int(r.Code)}),
				Remedy:   "reshard the collection on a key that prefixes the unique index (each package's Sharding section gives one), or make the uniqueness part of the shard key"})
			continue
		}
		if ix.EveryShard != "" || w.opts.ExpireAfterSeconds != nil {
			continue
		}
		first := w.key[0].Path
		q := key.Filter(bson.D{{Key: first, Value: 0}})
		if q.Target == shard.EveryShard {
			out = append(out, Finding{Rule: RuleShardKeyDeclaredQueries, Severity: Warning, Collection: coll, Field: first, Index: w.name(),
				Message:  fmt.Sprintf("the queries index %s serves name %s, which the shard key %s does not start with: each goes to every shard", w.name(), first, key),
				Evidence: append(evidence, Measure{"route", q.Why}),
				Remedy:   "shard the collection on the key its package's Sharding section recommends, whose queries go to one shard; if those queries are still frequent, consider a key that starts with " + first + ", unless the package warns against it (a field every write changes, or one that grows with time)"})
		}
	}
	return out, nil
}

// keyDoc returns an index key as createIndexes takes it.
func keyDoc(key []keyField) bson.D {
	d := make(bson.D, len(key))
	for i, k := range key {
		var v any = k.Dir
		if k.Kind != "" {
			v = k.Kind
		}
		d[i] = bson.E{Key: k.Path, Value: v}
	}
	return d
}
