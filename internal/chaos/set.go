package chaos

import (
	"fmt"
	"strings"
)

// Set is a set of small non-negative ints (the values a history wrote),
// comparable with ==, as porcupine's default Equal needs of a model's
// state. The zero value is empty.
type Set string

// Add returns s with v.
func (s Set) Add(v int) Set {
	b := []byte(s)
	for len(b) <= v/8 {
		b = append(b, 0)
	}
	b[v/8] |= 1 << (v % 8)
	return Set(b)
}

// Has reports whether v is in s.
func (s Set) Has(v int) bool { return v >= 0 && v/8 < len(s) && s[v/8]&(1<<(v%8)) != 0 }

func (s Set) String() string {
	var out []string
	for v := range 8 * len(s) {
		if s.Has(v) {
			out = append(out, fmt.Sprint(v))
		}
	}
	return "{" + strings.Join(out, " ") + "}"
}
