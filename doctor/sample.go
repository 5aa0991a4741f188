package doctor

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/internal/srverr"
)

// reader reads the documents a check looks at, by the method the options
// and the server allow, and remembers what the server refused so that it
// asks only once per check.
type reader struct {
	s settings
	// sampleRefused is the server's answer when it does not implement
	// $sample; later collections go straight to the first documents.
	sampleRefused error
	notes         []string
}

// serverAnswer returns the error as a command error when the server
// answered with one (an unknown command or stage, a missing feature,
// missing privileges), as opposed to a network or context error.
func serverAnswer(err error) (mongo.CommandError, bool) {
	return errors.AsType[mongo.CommandError](err)
}

// read calls visit with the documents of coll the sample holds, given the
// collection's document count. proj, if not nil, is an inclusion
// projection applied by the server. Its cost:
//
//   - Options.FullScan: one find over the whole collection (and its
//     getMores).
//   - count <= SampleSize: one find with a limit of SampleSize+1: the
//     whole collection, or, if it has grown past the count, its first
//     documents.
//   - otherwise: one aggregate [$sample] (and getMores). Where the server
//     does not implement $sample, one find with a limit instead, here and
//     for every later collection of the check; where $sample fails on
//     this collection (a memory limit, a privilege), one find with a limit
//     for this collection. The report's notes say which.
//
// A document the random cursor returns twice is visited once. The read
// stops at Options.SampleBytes.
func (r *reader) read(ctx context.Context, coll *mongo.Collection, count int64, proj bson.D, visit func(bson.Raw) error) (Sample, error) {
	n := r.s.SampleSize
	switch {
	case r.s.FullScan:
		sm, err := r.drain(ctx, SampleFullScan, n, visit, func() (*mongo.Cursor, error) {
			return coll.Find(ctx, bson.D{}, findOpts(proj, 0))
		})
		return sm.Sample, err
	case count <= int64(n):
		return r.first(ctx, coll, proj, SampleAll, visit)
	case r.sampleRefused == nil:
		sm, err := r.drain(ctx, SampleRandom, n, visit, func() (*mongo.Cursor, error) {
			return coll.Aggregate(ctx, samplePipeline(n, proj))
		})
		ce, refused := serverAnswer(err)
		if !refused || sm.Documents > 0 {
			return sm.Sample, err
		}
		if srverr.NotImplemented(ce) {
			r.sampleRefused = ce
			r.notes = append(r.notes, fmt.Sprintf(
				"$sample is not implemented by the server: %v; each sample is the first %d documents in natural order, not a random one", ce, n))
		} else {
			r.notes = append(r.notes, fmt.Sprintf(
				"%s: $sample failed: %v; the sample is the first %d documents in natural order, not a random one", coll.Name(), ce, n))
		}
	}
	return r.first(ctx, coll, proj, SampleFirst, visit)
}

// first reads the first SampleSize documents in natural order, asking for
// one more to tell whether that was all of them.
func (r *reader) first(ctx context.Context, coll *mongo.Collection, proj bson.D, method SampleMethod, visit func(bson.Raw) error) (Sample, error) {
	n := r.s.SampleSize
	sm, err := r.drain(ctx, method, n, visit, func() (*mongo.Cursor, error) {
		return coll.Find(ctx, bson.D{}, findOpts(proj, int64(n)+1))
	})
	if method == SampleAll && sm.more && !sm.Truncated {
		sm.Method = SampleFirst // the collection grew past its count
	}
	return sm.Sample, err
}

// samplePipeline is [{$sample: {size: n}}], then the projection if any.
func samplePipeline(n int, proj bson.D) mongo.Pipeline {
	p := mongo.Pipeline{{{Key: "$sample", Value: bson.D{{Key: "size", Value: n}}}}}
	if proj != nil {
		p = append(p, bson.D{{Key: "$project", Value: proj}})
	}
	return p
}

func findOpts(proj bson.D, limit int64) *options.FindOptionsBuilder {
	o := options.Find()
	if limit > 0 {
		o.SetLimit(limit)
	}
	if proj != nil {
		o.SetProjection(proj)
	}
	return o
}

// drained is a Sample and whether documents were left unread.
type drained struct {
	Sample
	more bool
}

// drain visits at most n distinct documents of the cursor open returns,
// and stops at the byte budget.
func (r *reader) drain(ctx context.Context, method SampleMethod, n int, visit func(bson.Raw) error, open func() (*mongo.Cursor, error)) (drained, error) {
	d := drained{Sample: Sample{Method: method}}
	cur, err := open()
	if err != nil {
		return d, err
	}
	defer cur.Close(context.WithoutCancel(ctx))
	seen := map[string]struct{}{}
	for cur.Next(ctx) {
		if method != SampleFullScan && d.Documents >= n {
			d.more = true
			break
		}
		if d.Bytes >= r.s.SampleBytes {
			d.Truncated, d.more = true, true
			break
		}
		if method == SampleRandom {
			id := cur.Current.Lookup("_id")
			k := string(append([]byte{byte(id.Type)}, id.Value...))
			if _, dup := seen[k]; dup {
				continue
			}
			seen[k] = struct{}{}
		}
		d.Documents++
		d.Bytes += int64(len(cur.Current))
		if err := visit(cur.Current); err != nil {
			return d, err
		}
	}
	return d, cur.Err()
}

// collStats is a collection's size as the server reports it.
type collStats struct {
	count, size, indexSize int64
	source                 string // "$collStats" or "estimatedDocumentCount"
}

// readCollStats asks the server for a collection's count and sizes: one
// aggregate [$collStats: {storageStats: {}}], summed over shards. Where
// the server refuses it, one count command (estimatedDocumentCount)
// instead, and the sizes are unknown.
func readCollStats(ctx context.Context, coll *mongo.Collection) (collStats, error) {
	st := collStats{source: "$collStats"}
	cur, err := coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$collStats", Value: bson.D{{Key: "storageStats", Value: bson.D{}}}}}})
	if err == nil {
		defer cur.Close(context.WithoutCancel(ctx))
		for cur.Next(ctx) {
			ss, ok := cur.Current.Lookup("storageStats").DocumentOK()
			if !ok {
				continue
			}
			st.count += number(ss.Lookup("count"))
			st.size += number(ss.Lookup("size"))
			st.indexSize += number(ss.Lookup("totalIndexSize"))
		}
		err = cur.Err()
	}
	if _, refused := serverAnswer(err); !refused {
		return st, err
	}
	n, err := coll.EstimatedDocumentCount(ctx)
	return collStats{count: n, source: "estimatedDocumentCount"}, err
}

// number reads an integer or double as an int64; 0 for anything else.
func number(v bson.RawValue) int64 {
	f, ok := v.AsFloat64OK()
	if !ok {
		return 0
	}
	return int64(f)
}
