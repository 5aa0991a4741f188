package validation

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"

	"github.com/mongopatterns/mongopatterns/internal/errs"
)

// pcre compiles the pattern re, which the server matches with PCRE
// (without multi-line, UTF-8), into a Go regexp that matches the same
// strings on the syntax both share. Where they read it differently, re
// is rewritten for Go:
//
//   - $ matches at the end or before a final newline in PCRE, only at the
//     end in Go: a final $ becomes \n?\z; a $ with more of the pattern
//     after it is refused.
//
//   - \s includes the vertical tab in PCRE (since 8.34, as Perl 5.18),
//     not in Go: it becomes [[:space:]] (\S [[:^space:]]).
//
//   - \v is vertical whitespace in PCRE, the vertical tab alone in Go: it
//     becomes the PCRE class.
//
//   - a multi-line ^ ((?m)) does not match after a newline that ends the
//     subject in PCRE, and does in Go: one with nothing after it that
//     consumes a character ((?m)^$, (?m)\n^) is refused.
//
// What Go's regexp does not compile (lookaround, backreferences, \Z, \h,
// possessive quantifiers) is refused.
func pcre(re string) (*regexp.Regexp, error) {
	tree, err := syntax.Parse(spaces(re), syntax.Perl)
	if err != nil {
		return nil, err
	}
	if err := dollars(tree, true); err != nil {
		return nil, err
	}
	if err := carets(tree, false); err != nil {
		return nil, err
	}
	return regexp.Compile(tree.String())
}

// verticals is PCRE's \v (UTF-8 mode) as the items of a Go class.
const verticals = `\n\x0B\f\r\x{85}\x{2028}\x{2029}`

// spaces rewrites \s, \S and \v as PCRE reads them, in and out of
// character classes, leaving \Q...\E and other escapes as they are.
func spaces(re string) string {
	var out strings.Builder
	inClass := false
	for i := 0; i < len(re); i++ {
		c := re[i]
		switch {
		case c == '\\' && i+1 < len(re):
			next := re[i+1]
			i++
			switch {
			case next == 'Q':
				end := strings.Index(re[i+1:], `\E`)
				if end < 0 {
					out.WriteString(re[i-1:])
					return out.String()
				}
				out.WriteString(re[i-1 : i+1+end+2])
				i += end + 2
			case next == 's' && inClass:
				out.WriteString("[:space:]")
			case next == 's':
				out.WriteString("[[:space:]]")
			case next == 'S' && inClass:
				out.WriteString("[:^space:]")
			case next == 'S':
				out.WriteString("[[:^space:]]")
			case next == 'v' && inClass:
				out.WriteString(verticals)
			case next == 'v':
				out.WriteString("[" + verticals + "]")
			default:
				out.WriteByte('\\')
				out.WriteByte(next)
			}
		case c == '[' && inClass && strings.HasPrefix(re[i:], "[:"):
			end := strings.Index(re[i+2:], ":]")
			if end < 0 {
				out.WriteByte(c)
				continue
			}
			out.WriteString(re[i : i+2+end+2])
			i += 2 + end + 1
		case c == '[' && !inClass:
			inClass = true
			out.WriteByte(c)
			// A ] right after [ or [^ is a literal.
			if strings.HasPrefix(re[i+1:], "^]") {
				out.WriteString("^]")
				i += 2
			} else if strings.HasPrefix(re[i+1:], "]") {
				out.WriteString("]")
				i++
			}
		case c == ']' && inClass:
			inClass = false
			out.WriteByte(c)
		default:
			out.WriteByte(c)
		}
	}
	return out.String()
}

// dollars rewrites each $ (end of text, not \z) of re as PCRE reads it;
// final: nothing that consumes input can follow re.
func dollars(re *syntax.Regexp, final bool) error {
	switch re.Op {
	case syntax.OpEndText:
		if re.Flags&syntax.WasDollar == 0 {
			return nil
		}
		if !final {
			return fmt.Errorf("a $ with more of the pattern after it means different things in PCRE and Go's regexp: use \\z")
		}
		newline := &syntax.Regexp{Op: syntax.OpLiteral, Rune: []rune{'\n'}, Flags: re.Flags &^ syntax.WasDollar}
		end := &syntax.Regexp{Op: syntax.OpEndText, Flags: re.Flags &^ syntax.WasDollar}
		*re = syntax.Regexp{Op: syntax.OpConcat, Flags: end.Flags, Sub: []*syntax.Regexp{
			{Op: syntax.OpQuest, Flags: end.Flags, Sub: []*syntax.Regexp{newline}}, end,
		}}
	case syntax.OpConcat:
		for i, sub := range re.Sub {
			if err := dollars(sub, final && i == len(re.Sub)-1); err != nil {
				return err
			}
		}
	case syntax.OpAlternate, syntax.OpCapture, syntax.OpQuest:
		for _, sub := range re.Sub {
			if err := dollars(sub, final); err != nil {
				return err
			}
		}
	default:
		for _, sub := range re.Sub {
			if err := dollars(sub, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// carets refuses a multi-line ^ that may stand at the end of the subject:
// PCRE's does not match after a newline that ends the subject, Go's does.
// One followed by something that consumes a character cannot stand there,
// so both read it alike. consumed: what follows re in the pattern must
// consume a character.
func carets(re *syntax.Regexp, consumed bool) error {
	switch re.Op {
	case syntax.OpBeginLine:
		if !consumed {
			return fmt.Errorf("a multi-line ^ with nothing that consumes a character after it means different things in PCRE and Go's regexp after a final newline: put what follows it in the pattern, or match the line with more than ^")
		}
	case syntax.OpConcat:
		for i, sub := range re.Sub {
			after := consumed || slices.ContainsFunc(re.Sub[i+1:], consumes)
			if err := carets(sub, after); err != nil {
				return err
			}
		}
	default:
		for _, sub := range re.Sub {
			if err := carets(sub, consumed); err != nil {
				return err
			}
		}
	}
	return nil
}

// consumes reports whether every match of re consumes a character.
func consumes(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpLiteral:
		return len(re.Rune) > 0
	case syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return true
	case syntax.OpConcat:
		return slices.ContainsFunc(re.Sub, consumes)
	case syntax.OpAlternate:
		return !slices.ContainsFunc(re.Sub, func(s *syntax.Regexp) bool { return !consumes(s) })
	case syntax.OpCapture, syntax.OpPlus:
		return consumes(re.Sub[0])
	case syntax.OpRepeat:
		return re.Min > 0 && consumes(re.Sub[0])
	}
	return false
}

// compilePattern is pcre with For's error.
func compilePattern(re string) (*regexp.Regexp, error) {
	r, err := pcre(re)
	if err != nil {
		return nil, errs.Invalid("pattern %q: %v", re, err)
	}
	return r, nil
}
