package outlier

import (
	"fmt"

	"github.com/mongopatterns/mongopatterns/internal/check"
	"github.com/mongopatterns/mongopatterns/internal/errs"
)

// Config configures a [Repo]. Field names are BSON names, single fields
// (not dotted paths). The zero value of every optional field is documented
// beside it; [New] fills it in and validates the whole.
type Config struct {
	// Parent is the collection holding the parent documents. Required.
	Parent string
	// Field is the parent's array field embedding its first items, for
	// example "comments". Required.
	Field string
	// Threshold is N: how many items the parent embeds. Items beyond it go
	// to overflow documents. At least 1.
	Threshold int
	// Overflow is the collection holding the overflow documents; "" means
	// Parent + "_overflow".
	Overflow string
	// PerOverflow is M: the most items one overflow document holds. At
	// least 1.
	PerOverflow int
	// Flag is the parent's boolean field that is true once the parent has
	// overflowed; "" means "has_extra". It is named here only: every read
	// and write of the repository uses this one name.
	Flag string
	// Tail is the parent's field holding the seq of the newest overflow
	// document, a hint from which Append starts looking for room; "" means
	// "extra_tail". It is absent until the parent overflows.
	Tail string
	// ItemID is the field of an item that identifies it within its parent;
	// "" means "_id". Every item must have it (see [patterns.ValidateID] for
	// the values accepted). Append is retry-safe and Remove finds items by
	// this id.
	ItemID string
	// BatchSize is how many overflow documents [Repo.Items] fetches per
	// round trip; 0 means enough documents for about 1,000 items. It bounds
	// the memory of a streaming read.
	BatchSize int32
}

// Defaults of the optional [Config] fields.
const (
	DefaultFlag   = "has_extra"
	DefaultTail   = "extra_tail"
	DefaultItemID = "_id"
	// DefaultOverflowSuffix is appended to Config.Parent to name the
	// overflow collection when Config.Overflow is empty.
	DefaultOverflowSuffix = "_overflow"
	// itemsPerBatch is the number of items a default batch of Items holds.
	itemsPerBatch = 1000
)

// withDefaults returns c with its zero optional fields filled in, or an
// error wrapping [patterns.ErrInvalid] saying what is wrong.
func (c Config) withDefaults() (Config, error) {
	if c.Overflow == "" && c.Parent != "" {
		c.Overflow = c.Parent + DefaultOverflowSuffix
	}
	if c.Flag == "" {
		c.Flag = DefaultFlag
	}
	if c.Tail == "" {
		c.Tail = DefaultTail
	}
	if c.ItemID == "" {
		c.ItemID = DefaultItemID
	}
	if c.BatchSize == 0 && c.PerOverflow > 0 {
		c.BatchSize = int32(max(1, itemsPerBatch/min(c.PerOverflow, itemsPerBatch)))
	}
	if err := c.validate(); err != nil {
		return c, fmt.Errorf("outlier.New: %w", err)
	}
	return c, nil
}

func (c Config) validate() error {
	for _, coll := range []struct{ what, name string }{{"Parent", c.Parent}, {"Overflow", c.Overflow}} {
		if err := check.Collection(coll.name); err != nil {
			return fmt.Errorf("Config.%s: %w", coll.what, err)
		}
	}
	if c.Parent == c.Overflow {
		return errs.Invalid("Config.Overflow: %q is also the parent collection", c.Overflow)
	}
	fields := []struct{ what, name string }{{"Field", c.Field}, {"Flag", c.Flag}, {"Tail", c.Tail}}
	for i, f := range fields {
		if err := check.Field(f.name); err != nil {
			return fmt.Errorf("Config.%s: %w", f.what, err)
		}
		if f.name == "_id" {
			return errs.Invalid("Config.%s: %q is the parent's id", f.what, f.name)
		}
		for _, g := range fields[:i] {
			if g.name == f.name {
				return errs.Invalid("Config.%s and Config.%s are both %q", g.what, f.what, f.name)
			}
		}
	}
	if err := check.Field(c.ItemID); err != nil {
		return fmt.Errorf("Config.ItemID: %w", err)
	}
	switch {
	case c.Threshold < 1:
		return errs.Invalid("Config.Threshold: %d; the parent must embed at least 1 item", c.Threshold)
	case c.PerOverflow < 1:
		return errs.Invalid("Config.PerOverflow: %d; an overflow document must hold at least 1 item", c.PerOverflow)
	case c.BatchSize < 0:
		return errs.Invalid("Config.BatchSize: %d is negative", c.BatchSize)
	}
	return nil
}
