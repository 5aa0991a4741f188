package outlier

import (
	"fmt"
	"math"

	"github.com/mongopatterns/mongopatterns/internal/check"
	"github.com/mongopatterns/mongopatterns/internal/errs"
	"github.com/mongopatterns/mongopatterns/patterns"
)

// Config configures a [Repo]. Field names are BSON names, single fields
// (not dotted paths). The zero value of every optional field means its
// default, given beside it; [New] fills the defaults in and validates the
// whole.
type Config struct {
	// Parents is the collection of the parent documents. Required.
	Parents string
	// Field is the parent's array field that embeds its first items, for
	// example "comments". Required.
	Field string
	// Cap is N: how many items the parent embeds. Items beyond it go to
	// overflow documents. At least 1. A parent closes earlier when the
	// next item would take it past 16 MiB.
	Cap int
	// Overflow is the collection of the overflow documents; "" means
	// Parents followed by [DefaultOverflowSuffix].
	Overflow string
	// OverflowCap is M: the most items one overflow document holds. At
	// least 1. A document also stops taking items before 16 MiB.
	OverflowCap int
	// FlagField is the parent's boolean field that is true once the parent
	// has overflowed; "" means [DefaultFlagField]. It is named here only:
	// every read and write of the repository uses this one name.
	FlagField string
	// TailField is the parent's int64 field holding the seq of the newest
	// overflow document, a hint from which Append starts looking for room;
	// "" means [DefaultTailField]. It is 0 until the parent overflows.
	TailField string
	// IDField is the field of an item that identifies it within its
	// parent; "" means [DefaultIDField]. Every item must have it (see
	// [patterns.ValidateID] for the values accepted). Append is retry-safe
	// and Remove finds items by this id.
	IDField string
	// BatchSize is how many overflow documents [Repo.Items] fetches per
	// round trip, at most [math.MaxInt32]; 0 means as many as hold
	// [DefaultBatchItems] items (DefaultBatchItems/OverflowCap, at least
	// 1). It bounds the memory of a streaming read.
	BatchSize int

	// Hook, when set, observes every operation of the repository (see
	// [patterns.Hook]); nil reports nothing and costs nothing.
	Hook patterns.Hook
}

// Defaults of the optional [Config] fields.
const (
	// DefaultFlagField is the default of Config.FlagField.
	DefaultFlagField = "has_extra"
	// DefaultTailField is the default of Config.TailField.
	DefaultTailField = "extra_tail"
	// DefaultIDField is the default of Config.IDField.
	DefaultIDField = "_id"
	// DefaultOverflowSuffix follows Config.Parents in the name of the
	// overflow collection when Config.Overflow is empty.
	DefaultOverflowSuffix = "_overflow"
	// DefaultBatchItems is the number of items that a default batch of
	// [Repo.Items] holds when the overflow documents are full: Config.BatchSize
	// 0 means DefaultBatchItems/OverflowCap documents (at least 1).
	DefaultBatchItems = 1000
)

// normalize returns c with its zero optional fields filled in, or an
// error wrapping [patterns.ErrInvalid] that names the field at fault.
func (c Config) normalize() (Config, error) {
	if c.Overflow == "" && c.Parents != "" {
		c.Overflow = c.Parents + DefaultOverflowSuffix
	}
	if c.FlagField == "" {
		c.FlagField = DefaultFlagField
	}
	if c.TailField == "" {
		c.TailField = DefaultTailField
	}
	if c.IDField == "" {
		c.IDField = DefaultIDField
	}
	if c.BatchSize == 0 && c.OverflowCap > 0 {
		c.BatchSize = max(1, DefaultBatchItems/c.OverflowCap)
	}
	for _, coll := range []struct{ name, value string }{{"Parents", c.Parents}, {"Overflow", c.Overflow}} {
		if err := check.Collection(coll.value); err != nil {
			return c, fmt.Errorf("config.%s: %w", coll.name, err)
		}
	}
	if c.Parents == c.Overflow {
		return c, fmt.Errorf("config.Overflow: %w", errs.Invalid("%q is also the parents' collection", c.Overflow))
	}
	fields := []struct{ name, value string }{{"Field", c.Field}, {"FlagField", c.FlagField}, {"TailField", c.TailField}}
	for i, f := range fields {
		if err := check.Field(f.value); err != nil {
			return c, fmt.Errorf("config.%s: %w", f.name, err)
		}
		if f.value == "_id" {
			return c, fmt.Errorf("config.%s: %w", f.name, errs.Invalid("%q is the parent's id", f.value))
		}
		for _, g := range fields[:i] {
			if g.value == f.value {
				return c, fmt.Errorf("config: %w", errs.Invalid("%s and %s are both %q", g.name, f.name, f.value))
			}
		}
	}
	if err := check.Field(c.IDField); err != nil {
		return c, fmt.Errorf("config.IDField: %w", err)
	}
	switch {
	case c.Cap < 1:
		return c, fmt.Errorf("config.Cap: %w", errs.Invalid("%d; the parent must embed at least 1 item", c.Cap))
	case c.OverflowCap < 1:
		return c, fmt.Errorf("config.OverflowCap: %w", errs.Invalid("%d; an overflow document must hold at least 1 item", c.OverflowCap))
	case c.BatchSize < 0 || c.BatchSize > math.MaxInt32:
		return c, fmt.Errorf("config.BatchSize: %w", errs.Invalid("%d; want 1 to %d overflow documents per round trip, or 0 for the default", c.BatchSize, math.MaxInt32))
	}
	return c, nil
}
