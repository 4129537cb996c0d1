package mql

import (
	"cmp"
	"strings"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"
	"golang.org/x/text/collate"
	"golang.org/x/text/language"

	"github.com/ferry-io/ferry/mongoerr"
)

// Collation is a parsed collation document: locale-aware string comparison
// by the Unicode Collation Algorithm with CLDR's tailorings
// (golang.org/x/text/collate), which is also what MongoDB's ICU collations
// implement. It is immutable and safe for concurrent use.
//
// Supported: any locale the CLDR tables know (en, en_US, fr, de, ...),
// strength 1 (base letters: "a" = "A" = "á"), 2 (diacritics count, case
// does not) and 3 (the default), numericOrdering, and the default values of
// every other field. caseLevel, caseFirst other than "off", alternate
// "shifted", backwards and strength 4 and 5 are refused with
// NotImplemented (238) rather than approximated.
//
// A nil *Collation is the simple (binary) collation.
type Collation struct {
	spec bson.D
	mu   sync.Mutex
	c    *collate.Collator
}

// CodeNotImplemented is MongoDB's NotImplemented error code.
const CodeNotImplemented = 238

var localeMatcher = language.NewMatcher(collate.Supported())

// ParseCollation parses a command's collation field. It returns nil for
// the simple collation ({locale: "simple"}) and for a nil or empty
// document.
func ParseCollation(v any) (*Collation, error) {
	if v == nil {
		return nil, nil
	}
	d, ok := normalize(v).(bson.D)
	if !ok {
		return nil, errf(mongoerr.CodeTypeMismatch, "BSON field 'collation' is the wrong type '%s', expected type 'object'", typeName(v))
	}
	var locale string
	hasLocale := false
	strength := int64(3)
	var opts []collate.Option
	for _, e := range d {
		val := normalize(e.Value)
		switch e.Key {
		case "locale":
			s, ok := val.(string)
			if !ok {
				return nil, errf(mongoerr.CodeTypeMismatch, "BSON field 'collation.locale' is the wrong type '%s', expected type 'string'", typeName(val))
			}
			locale, hasLocale = s, true
		case "strength":
			n, ok := exactInt64(val)
			if !ok || n < 1 || n > 5 {
				return nil, errf(mongoerr.CodeBadValue, "Field 'strength' must be an integer 1 through 5. Got: %s", describe(val))
			}
			strength = n
		case "numericOrdering":
			b, ok := val.(bool)
			if !ok {
				return nil, errf(mongoerr.CodeTypeMismatch, "BSON field 'collation.numericOrdering' is the wrong type '%s', expected type 'bool'", typeName(val))
			}
			if b {
				opts = append(opts, collate.Numeric)
			}
		case "normalization":
			// Inputs are always normalized by the implementation, which
			// gives the results normalization: true would.
			if _, ok := val.(bool); !ok {
				return nil, errf(mongoerr.CodeTypeMismatch, "BSON field 'collation.normalization' is the wrong type '%s', expected type 'bool'", typeName(val))
			}
		case "caseLevel", "backwards":
			b, ok := val.(bool)
			if !ok {
				return nil, errf(mongoerr.CodeTypeMismatch, "BSON field 'collation.%s' is the wrong type '%s', expected type 'bool'", e.Key, typeName(val))
			}
			if b {
				return nil, errf(CodeNotImplemented, "collation %s: true is not supported by mongotest", e.Key)
			}
		case "caseFirst":
			s, _ := val.(string)
			switch s {
			case "off":
			case "upper", "lower":
				return nil, errf(CodeNotImplemented, "collation caseFirst: %q is not supported by mongotest", s)
			default:
				return nil, errf(mongoerr.CodeBadValue, "Field 'caseFirst' must be one of 'upper', 'lower' or 'off'. Got: %s", describe(val))
			}
		case "alternate":
			s, _ := val.(string)
			switch s {
			case "non-ignorable":
			case "shifted":
				return nil, errf(CodeNotImplemented, "collation alternate: \"shifted\" is not supported by mongotest")
			default:
				return nil, errf(mongoerr.CodeBadValue, "Field 'alternate' must be one of 'non-ignorable' or 'shifted'. Got: %s", describe(val))
			}
		case "maxVariable":
			// Only alternate: "shifted" reads it.
			s, _ := val.(string)
			if s != "punct" && s != "space" {
				return nil, errf(mongoerr.CodeBadValue, "Field 'maxVariable' must be one of 'punct' or 'space'. Got: %s", describe(val))
			}
		case "version":
		default:
			return nil, errf(mongoerr.CodeIDLUnknownField, "BSON field 'collation.%s' is an unknown field.", e.Key)
		}
	}
	if !hasLocale {
		if len(d) == 0 {
			return nil, nil
		}
		return nil, errf(mongoerr.CodeIDLFailedToParse, "BSON field 'collation.locale' is missing but a required field")
	}
	if locale == "simple" {
		if len(d) > 1 {
			return nil, errf(mongoerr.CodeBadValue, "If 'locale' is set to 'simple', no other fields may be set")
		}
		return nil, nil
	}
	tag, err := language.Parse(strings.ReplaceAll(locale, "_", "-"))
	if err != nil || locale == "" {
		return nil, errf(mongoerr.CodeBadValue, "Field 'locale' is invalid in: %s", describe(d))
	}
	if _, _, conf := localeMatcher.Match(tag); conf == language.No {
		return nil, errf(mongoerr.CodeBadValue, "Field 'locale' is invalid in: %s", describe(d))
	}
	switch strength {
	case 1:
		opts = append(opts, collate.IgnoreCase, collate.IgnoreDiacritics, collate.IgnoreWidth)
	case 2:
		opts = append(opts, collate.IgnoreCase, collate.IgnoreWidth)
	case 3:
	default:
		return nil, errf(CodeNotImplemented, "collation strength %d is not supported by mongotest (1, 2 and 3 are)", strength)
	}
	return &Collation{spec: d, c: collate.New(tag, opts...)}, nil
}

// compareStrings compares two strings under the collation.
func (c *Collation) compareStrings(a, b string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.c.CompareString(a, b)
}

// CompareCollated is Compare with strings (at any depth) compared under c;
// a nil c is Compare.
func CompareCollated(a, b any, c *Collation) int {
	if c == nil {
		return Compare(a, b)
	}
	ra, rb := typeRank(a), typeRank(b)
	if ra != rb {
		return cmp.Compare(ra, rb)
	}
	switch ra {
	case rankString:
		return c.compareStrings(stringOf(a), stringOf(b))
	case rankObject:
		da, _ := asDoc(a)
		db, _ := asDoc(b)
		n := min(len(da), len(db))
		for i := 0; i < n; i++ {
			ra, rb := typeRank(da[i].Value), typeRank(db[i].Value)
			if ra != rb {
				return cmp.Compare(ra, rb)
			}
			if k := strings.Compare(da[i].Key, db[i].Key); k != 0 {
				return k
			}
			if k := CompareCollated(da[i].Value, db[i].Value, c); k != 0 {
				return k
			}
		}
		return cmp.Compare(len(da), len(db))
	case rankArray:
		aa, _ := asArray(a)
		ab, _ := asArray(b)
		n := min(len(aa), len(ab))
		for i := 0; i < n; i++ {
			if k := CompareCollated(aa[i], ab[i], c); k != 0 {
				return k
			}
		}
		return cmp.Compare(len(aa), len(ab))
	}
	return compareSameRank(ra, a, b)
}

// collationOf returns the collation of an evaluation, nil when simple.
func collationOf(vars *Vars) *Collation {
	if vars == nil {
		return nil
	}
	return vars.Collation
}

// collationRefused is the error of a collation-sensitive operation that
// mongotest does not implement under a non-simple collation.
func collationRefused(what string) error {
	return errf(CodeNotImplemented, "%s with a non-simple collation is not supported by mongotest", what)
}

// collationSensitive lists the expression operators that compare strings
// but do not implement collations: under a non-simple collation they fail
// with NotImplemented instead of comparing bytewise.
var collationSensitive = map[string]bool{
	"$setEquals": true, "$setIntersection": true, "$setUnion": true, "$setDifference": true,
	"$setIsSubset": true, "$indexOfArray": true, "$max": true, "$min": true, "$sortArray": true,
	"$maxN": true, "$minN": true, "$topN": true, "$bottomN": true, "$top": true, "$bottom": true,
}

// fixedCtx is fixed for an operator that needs the evaluation context
// (for its collation).
func fixedCtx(name string, minArgs, maxArgs int, fn func(ctx *evalCtx, args []any) (any, error)) {
	registerInternal(name, func(c *compiler, name string, arg any) (exprFn, error) {
		args, err := c.compileArgs(name, arg, minArgs, maxArgs)
		if err != nil {
			return nil, err
		}
		return func(ctx *evalCtx) (any, error) {
			vals, err := evalArgs(ctx, args)
			if err != nil {
				return nil, err
			}
			return fn(ctx, vals)
		}, nil
	})
}

// sortKey returns the collation key of s: two strings have equal keys
// exactly when they compare equal under c.
func (c *Collation) sortKey(s string) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	var buf collate.Buffer
	return append([]byte(nil), c.c.KeyFromString(&buf, s)...)
}
