package mql

import (
	"regexp"
	"strings"
	"sync"
)

var regexCache sync.Map // pattern+"/"+options -> *regexp.Regexp

// compileRegex translates a PCRE pattern with MongoDB options (i, m, s, x,
// u) into a Go regexp. Constructs that RE2 cannot express (look-around,
// back-references) produce error 51091 like an invalid pattern on the
// server.
func compileRegex(pattern, options string) (*regexp.Regexp, error) {
	key := options + "/" + pattern
	if re, ok := regexCache.Load(key); ok {
		return re.(*regexp.Regexp), nil
	}
	flags := ""
	extended := false
	for _, o := range options {
		switch o {
		case 'i', 'm', 's':
			if !strings.ContainsRune(flags, o) {
				flags += string(o)
			}
		case 'x':
			extended = true
		case 'u', 'l':
		default:
			return nil, errf(51108, "invalid flag in regex options: %c", o)
		}
	}
	p := pattern
	if extended {
		p = stripExtended(p)
	}
	if flags != "" {
		p = "(?" + flags + ")" + p
	}
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, errf(51091, "Regular expression is invalid: %v", err)
	}
	regexCache.Store(key, re)
	return re, nil
}

// stripExtended removes unescaped whitespace and #-comments outside
// character classes (PCRE_EXTENDED).
func stripExtended(p string) string {
	var b strings.Builder
	inClass := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '\\' && i+1 < len(p):
			b.WriteByte(c)
			b.WriteByte(p[i+1])
			i++
		case inClass:
			if c == ']' {
				inClass = false
			}
			b.WriteByte(c)
		case c == '[':
			inClass = true
			b.WriteByte(c)
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
		case c == '#':
			for i < len(p) && p[i] != '\n' {
				i++
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
