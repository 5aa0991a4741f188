package bucket

import (
	"context"
	"iter"
	"math"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/internal/srverr"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// zeroTime is the BSON date a zero time.Time encodes to.
var zeroTime = bson.NewDateTimeFromTime(time.Time{})

// point is a measurement as the store writes it: its BSON document, its
// time and its values in the order of the settings' value fields.
type point struct {
	raw    bson.Raw
	at     bson.DateTime
	values []float64
}

// parse encodes a measurement and reads its time and values (see
// [settings.read]).
func (s *settings) parse(v any) (point, error) {
	data, err := bson.Marshal(v)
	if err != nil {
		return point{}, notADocument(v, err)
	}
	return s.read(data, make([]float64, len(s.valueFields)))
}

func notADocument(v any, err error) error {
	return errs.Invalid("measurement of type %T does not encode as a BSON document: %v", v, err)
}

// read reads the time and values of an encoded measurement, the values
// into values (one per value field), rejecting with
// [patterns.ErrInvalid] a measurement that has no time or a zero one, or
// lacks a value or holds one that is not a finite number (NaN and
// infinities would poison $min, $max and sums).
func (s *settings) read(raw bson.Raw, values []float64) (point, error) {
	p := point{raw: raw, values: values}
	var err error
	if p.at, err = timeOf(p.raw, s.timeField); err != nil {
		return point{}, err
	}
	for i, f := range s.valueFields {
		if p.values[i], err = valueOf(p.raw, f); err != nil {
			return point{}, err
		}
	}
	return p, nil
}

// encoder encodes many measurements into one buffer, one after the
// other: a batch then costs one encoder and a few buffer allocations, not
// an encoder and a buffer per measurement.
type encoder struct {
	out appender
	enc *bson.Encoder
}

// newEncoder returns an encoder whose buffer starts with room for size
// bytes.
func newEncoder(size int) *encoder {
	e := &encoder{out: appender{b: make([]byte, 0, size)}}
	e.enc = bson.NewEncoder(bson.NewDocumentWriter(&e.out))
	return e
}

// add encodes v (a pointer to a measurement) and returns its document,
// which stays valid: the buffer only grows by appending.
func (e *encoder) add(v any) (bson.Raw, error) {
	start := len(e.out.b)
	if err := e.enc.Encode(v); err != nil {
		return nil, err
	}
	end := len(e.out.b)
	return bson.Raw(e.out.b[start:end:end]), nil
}

// appender is an io.Writer that appends to b.
type appender struct{ b []byte }

func (a *appender) Write(p []byte) (int, error) {
	a.b = append(a.b, p...)
	return len(p), nil
}

// timeOf reads the time field of a measurement's document.
func timeOf(raw bson.Raw, field string) (bson.DateTime, error) {
	rv, err := raw.LookupErr(field)
	if err != nil {
		return 0, errs.Invalid("measurement has no time field %q", field)
	}
	dt, ok := rv.DateTimeOK()
	switch {
	case !ok:
		return 0, errs.Invalid("measurement's time field %q holds a BSON %s, not a date", field, rv.Type)
	case bson.DateTime(dt) == zeroTime:
		return 0, errs.Invalid("measurement's time field %q holds the zero time", field)
	}
	return bson.DateTime(dt), nil
}

// valueOf reads a value field of a measurement's document as a finite
// float64.
func valueOf(raw bson.Raw, field string) (float64, error) {
	rv, err := raw.LookupErr(field)
	if err != nil {
		return 0, errs.Invalid("measurement has no value field %q", field)
	}
	f, ok := number(rv)
	switch {
	case !ok:
		return 0, errs.Invalid("measurement's value field %q holds a BSON %s, not a double, int32 or int64", field, rv.Type)
	case math.IsNaN(f) || math.IsInf(f, 0):
		return 0, errs.Invalid("measurement's value field %q is %v; NaN and infinities would poison min, max and sum", field, f)
	}
	return f, nil
}

// number converts a double, int32 or int64 to float64.
func number(rv bson.RawValue) (float64, bool) {
	switch rv.Type {
	case bson.TypeDouble:
		return rv.Double(), true
	case bson.TypeInt32:
		return float64(rv.Int32()), true
	case bson.TypeInt64:
		return float64(rv.Int64()), true
	}
	return 0, false
}

// span summarises measurements: how many, their first and last times,
// and per value field their min, max and sum.
type span struct {
	n             int32
	first, last   bson.DateTime
	min, max, sum []float64 // per value field
}

// spanOf is the span of one measurement.
func spanOf(p *point) span {
	return span{n: 1, first: p.at, last: p.at, min: p.values, max: p.values, sum: p.values}
}

// checkTime rejects a zero time given at the API.
func checkTime(name string, t time.Time) error {
	if t.IsZero() {
		return errs.Invalid("%s is the zero time", name)
	}
	return nil
}

// read is the validated arguments of Range or Summaries: the series and
// the interval [from, to) as BSON dates.
type read struct {
	meta     bson.RawValue
	from, to bson.DateTime
}

// readSeq validates the arguments of Range or Summaries (op; check is the
// step's verdict, nil for Range) of the store st and returns the iterator
// body builds. Bad input yields one error wrapping [patterns.ErrInvalid],
// and an empty interval nothing; neither sends anything, and each
// iteration reports an operation op to st's hook, if it has one.
func readSeq[T any](ctx context.Context, st observer, op string, meta any, from, to time.Time, check error, body func(read) iter.Seq2[T, error]) iter.Seq2[T, error] {
	r, empty, err := newRead(meta, from, to)
	if err == nil {
		err = check
	}
	return validSeq(ctx, st, op, r, empty, err, body)
}

func newRead(meta any, from, to time.Time) (r read, empty bool, err error) {
	m, err := metaValue(meta)
	if err != nil {
		return read{}, false, err
	}
	r, empty, err = newWindow(from, to)
	r.meta = m
	return r, empty, err
}

// windowSeq is [readSeq] for a read of every series (SummariesBySeries):
// the read's meta is the zero value.
func windowSeq[T any](ctx context.Context, st observer, op string, from, to time.Time, body func(read) iter.Seq2[T, error]) iter.Seq2[T, error] {
	r, empty, err := newWindow(from, to)
	return validSeq(ctx, st, op, r, empty, err, body)
}

// validSeq is the iterator of a read op of st whose arguments gave r,
// empty and err: body(r), or, when err or empty, one that yields err
// (wrapped) or nothing, and reports each iteration to st's hook.
func validSeq[T any](ctx context.Context, st observer, op string, r read, empty bool, err error, body func(read) iter.Seq2[T, error]) iter.Seq2[T, error] {
	switch {
	case err != nil:
		err = pkg.Wrap(op, err)
	case !empty:
		return body(r)
	case !st.observed():
		return func(func(T, error) bool) {}
	}
	return func(yield func(T, error) bool) {
		_, o := st.start(ctx, op)
		defer o.Finish(&err)
		if err != nil {
			var zero T
			yield(zero, err)
		}
	}
}

// observer is a store whose operations report to its hook.
type observer interface {
	// start starts the operation name (see [obs.Start]).
	start(ctx context.Context, name string) (context.Context, *patterns.Operation)
	// observed reports whether the store has a hook.
	observed() bool
}

// observe returns what an iteration of the operation op yields to, and
// where it keeps the first error yielded, for "defer op.Finish(errp)"
// when the iteration starts: op ends with that error, or nil (or with a
// panic of the loop body). With no hook (a nil op) it returns yield
// itself and nil, at no cost.
func observe[T any](op *patterns.Operation, yield func(T, error) bool) (out func(T, error) bool, errp *error) {
	if op == nil {
		return yield, nil
	}
	it := &iteration[T]{yield: yield}
	return it.send, &it.err
}

// iteration is an iteration of a read, reported to its operation.
type iteration[T any] struct {
	yield func(T, error) bool
	err   error // the first error yielded
}

func (it *iteration[T]) send(v T, err error) bool {
	if err != nil && it.err == nil {
		it.err = err
	}
	return it.yield(v, err)
}

// newWindow validates the interval [from, to) of a read.
func newWindow(from, to time.Time) (r read, empty bool, err error) {
	if err := checkTime("from", from); err != nil {
		return read{}, false, err
	}
	if err := checkTime("to", to); err != nil {
		return read{}, false, err
	}
	r.from, r.to = bson.NewDateTimeFromTime(from), bson.NewDateTimeFromTime(to)
	if r.to < r.from {
		return read{}, false, errs.Invalid("to (%v) is before from (%v)", to, from)
	}
	return r, r.to == r.from, nil
}

// failed is the error a read yields: the server's error classified (see
// [srverr.Classify]) and prefixed with the package and the operation.
func failed(op string, err error) error { return pkg.Wrap(op, srverr.Classify(err)) }
