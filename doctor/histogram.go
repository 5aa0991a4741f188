package doctor

import "math/bits"

// histogram counts non-negative values in power-of-two buckets: bucket 0
// holds 0, bucket k (k >= 1) holds [2^(k-1), 2^k). It keeps the count,
// sum and maximum exactly, in constant memory however many values it sees.
type histogram struct {
	counts [64]int
	n      int
	sum    float64
	max    int64
}

func (h *histogram) add(v int64) {
	v = max(v, 0)
	h.counts[bucketOf(v)]++
	h.n++
	h.sum += float64(v)
	h.max = max(h.max, v)
}

// bucketOf returns the bucket that holds v >= 0.
func bucketOf(v int64) int { return bits.Len64(uint64(v)) }

// bounds returns the half-open range of bucket k.
func bounds(k int) (lo, hi int64) {
	if k == 0 {
		return 0, 1
	}
	return int64(1) << (k - 1), int64(1) << k
}

// distribution summarises the histogram; its buckets run from the first
// non-empty one to the last, empty ones in between included, so that a
// chart of them has a continuous axis.
func (h *histogram) distribution() Distribution {
	d := Distribution{Count: h.n, Max: h.max}
	if h.n == 0 {
		return d
	}
	d.Mean = ratio(h.sum / float64(h.n))
	first, last := -1, -1
	for k, c := range h.counts {
		if c > 0 {
			if first < 0 {
				first = k
			}
			last = k
		}
	}
	for k := first; k <= last; k++ {
		lo, hi := bounds(k)
		d.Buckets = append(d.Buckets, Bucket{Lo: lo, Hi: hi, Count: h.counts[k]})
	}
	return d
}
