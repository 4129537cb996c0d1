package extjson

import (
	"bytes"
	"encoding/binary"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"
)

const hexDigits = "0123456789abcdef"

// double writes a double: canonical {"$numberDouble":"1.5"}, relaxed 1.5;
// non-finite values as {"$numberDouble":"Infinity"} in both modes.
func (w *walker) double(f float64) {
	var special string
	switch {
	case math.IsInf(f, 1):
		special = "Infinity"
	case math.IsInf(f, -1):
		special = "-Infinity"
	case math.IsNaN(f):
		special = "NaN"
	}
	if special != "" {
		w.dst = append(w.dst, `{"$numberDouble":"`...)
		w.dst = append(w.dst, special...)
		w.dst = append(w.dst, `"}`...)
		return
	}
	if w.canonical {
		w.dst = append(w.dst, `{"$numberDouble":"`...)
		w.dst = appendFloat(w.dst, f)
		w.dst = append(w.dst, `"}`...)
		return
	}
	w.dst = appendFloat(w.dst, f)
}

// appendFloat writes a finite double the driver's way: the shortest 'G'
// form that round-trips, with ".0" added when it has neither a point nor
// an exponent.
func appendFloat(dst []byte, f float64) []byte {
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, 'G', -1, 64)
	if bytes.IndexByte(dst[start:], 'E') < 0 && bytes.IndexByte(dst[start:], '.') < 0 {
		dst = append(dst, ".0"...)
	}
	return dst
}

// date writes a UTC datetime (milliseconds since the epoch): canonical,
// and relaxed outside the years 1970 through 9999, as
// {"$date":{"$numberLong":"ms"}}; relaxed otherwise as
// {"$date":"2006-01-02T15:04:05.999Z"}.
func (w *walker) date(ms int64) {
	var year, day int
	var month time.Month
	var t time.Time
	if !w.canonical {
		// The same conversion as the driver's, so that the year test
		// agrees for every input.
		t = time.Unix(ms/1e3, ms%1e3*1e6).UTC()
		year, month, day = t.Date()
	}
	if w.canonical || year < 1970 || year > 9999 {
		w.dst = append(w.dst, `{"$date":{"$numberLong":"`...)
		w.dst = strconv.AppendInt(w.dst, ms, 10)
		w.dst = append(w.dst, `"}}`...)
		return
	}
	w.dst = append(w.dst, `{"$date":"`...)
	w.dst = appendISODate(w.dst, t, year, month, day)
	w.dst = append(w.dst, `"}`...)
}

// appendISODate writes t (UTC, years 1970 through 9999, whose date is
// year, month, day) as t.Format("2006-01-02T15:04:05.999Z07:00") does:
// milliseconds with trailing zeros trimmed, no point when they are all
// zero.
func appendISODate(dst []byte, t time.Time, year int, month time.Month, day int) []byte {
	hour, minute, sec := t.Clock()
	dst = appendDigits(dst, year, 4)
	dst = append(dst, '-')
	dst = appendDigits(dst, int(month), 2)
	dst = append(dst, '-')
	dst = appendDigits(dst, day, 2)
	dst = append(dst, 'T')
	dst = appendDigits(dst, hour, 2)
	dst = append(dst, ':')
	dst = appendDigits(dst, minute, 2)
	dst = append(dst, ':')
	dst = appendDigits(dst, sec, 2)
	if ms := t.Nanosecond() / 1e6; ms != 0 {
		n := 3
		for ms%10 == 0 {
			ms /= 10
			n--
		}
		dst = append(dst, '.')
		dst = appendDigits(dst, ms, n)
	}
	return append(dst, 'Z')
}

// appendDigits writes v (non-negative, below 10^width) zero-padded to width.
func appendDigits(dst []byte, v, width int) []byte {
	var buf [4]byte
	for i := width - 1; i >= 0; i-- {
		buf[i] = byte('0' + v%10)
		v /= 10
	}
	return append(dst, buf[:width]...)
}

// safe holds true for the ASCII bytes a JSON string carries unescaped
// (encoding/json's safeSet: no HTML escaping).
var safe = func() (t [utf8.RuneSelf]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// plain8 reports whether none of the eight bytes of w needs escaping or
// UTF-8 decoding: each is at least 0x20, below 0x80 and neither '"' nor
// '\\'.
func plain8(w uint64) bool { return special8(w) == 0 }

// special8 is zero when none of the eight bytes of w needs escaping or
// UTF-8 decoding (see plain8), non-zero otherwise. Per byte b (ignoring
// borrows), b-0x20 has its top bit set when b < 0x20, b^'"'-1 when b is
// '"' and b^'\\'-1 when b is '\\'; from 0x80 up, b^'"'-1 has it unless b
// is 0xA2 and b^'\\'-1 unless b is 0xDC, so one of them always does; a
// plain byte sets none of the three. A borrow into a byte only comes
// from a lower byte whose own top bit is set, so it makes no plain word
// special and no special word plain. TestPlain8 checks every byte value
// in every position.
func special8(w uint64) uint64 {
	const quote, backslash = '"' * lsb, '\\' * lsb
	return ((w - 0x20*lsb) | ((w ^ quote) - lsb) | ((w ^ backslash) - lsb)) & msb
}

// plainPrefix returns how many bytes from the start of s are plain ASCII
// (see plain8), counted a word of eight at a time (four while it can), so
// maybe short of the first special byte by up to 7; all of s when it is
// plain.
func plainPrefix(s []byte) int {
	n := len(s)
	for len(s) >= 32 {
		w := s[:32:32]
		if special8(binary.LittleEndian.Uint64(w))|special8(binary.LittleEndian.Uint64(w[8:]))|
			special8(binary.LittleEndian.Uint64(w[16:]))|special8(binary.LittleEndian.Uint64(w[24:])) != 0 {
			break
		}
		s = s[32:]
	}
	for len(s) >= 8 && special8(binary.LittleEndian.Uint64(s)) == 0 {
		s = s[8:]
	}
	if len(s) > 0 && len(s) < 8 {
		// The tail (or a short string: most keys), padded with spaces
		// to one word.
		w := [8]byte{' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '}
		copy(w[:], s)
		if special8(binary.LittleEndian.Uint64(w[:])) == 0 {
			return n
		}
	}
	return n - len(s)
}

// cstring returns the offset of the NUL that ends the name at the start
// of s, or -1 when s holds none, and whether the name's bytes are all
// plain (see plain8), so that it is quoted as it is. A plain name (most
// are) is found in one pass, a word at a time.
func cstring(s []byte) (int, bool) {
	i := 0
	for i+8 <= len(s) && special8(binary.LittleEndian.Uint64(s[i:])) == 0 {
		i += 8
	}
	for ; i < len(s); i++ {
		b := s[i]
		if b == 0 {
			return i, true
		}
		if b >= utf8.RuneSelf || !safe[b] {
			break
		}
	}
	k := bytes.IndexByte(s[i:], 0)
	if k < 0 {
		return -1, false
	}
	return i + k, false
}

// appendString writes s as a quoted JSON string, escaped as the driver
// does: \" \\ \n \r \t \b \f, other control bytes as \u00XX, each invalid
// UTF-8 byte as \ufffd, and U+2028, U+2029 as \u2028, \u2029.
func appendString(dst, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		// Runs of plain ASCII (the common case: no quote, backslash,
		// control or non-ASCII byte) are skipped a word at a time.
		i += plainPrefix(s[i:])
		if i >= len(s) {
			break
		}
		b := s[i]
		if b < utf8.RuneSelf {
			if safe[b] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRune(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendOptions writes regular expression options as the driver does:
// sorted by code point (each invalid UTF-8 byte read as U+FFFD, which is
// then written as itself), then quoted like any string.
func appendOptions(dst, opts []byte) []byte {
	var buf [16]byte
	if len(opts) <= len(buf) && isASCII(opts) {
		s := buf[:len(opts)]
		copy(s, opts)
		slices.Sort(s)
		return appendString(dst, s)
	}
	rs := []rune(string(opts))
	slices.Sort(rs)
	return appendString(dst, []byte(string(rs)))
}

func isASCII(s []byte) bool {
	for _, b := range s {
		if b >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// appendDecimal writes a decimal128 (high and low 64 bits) as the driver's
// Decimal128.String does. Finite values whose coefficient fits in 64 bits
// (every price, quantity and amount in practice) are formatted here
// without allocating, following the specification's rule: plain notation
// when the exponent is at most 0 and the adjusted exponent at least -6,
// scientific otherwise. Anything else goes to the driver.
func appendDecimal(dst []byte, h, l uint64) []byte {
	if h>>61&3 == 3 || h&(1<<49-1) != 0 {
		// NaN, infinities, the 0b11 form, coefficients past 64 bits.
		return append(dst, bson.NewDecimal128(h, l).String()...)
	}
	exp := int(h>>49&(1<<14-1)) - 6176
	if h>>63 == 1 {
		dst = append(dst, '-')
	}
	var buf [20]byte
	c := strconv.AppendUint(buf[:0], l, 10)
	adjusted := exp + len(c) - 1
	switch {
	case exp == 0:
		return append(dst, c...)
	case exp < 0 && adjusted >= -6:
		point := len(c) + exp
		if point > 0 {
			dst = append(dst, c[:point]...)
			dst = append(dst, '.')
			return append(dst, c[point:]...)
		}
		dst = append(dst, '0', '.')
		for ; point < 0; point++ {
			dst = append(dst, '0')
		}
		return append(dst, c...)
	}
	dst = append(dst, c[0])
	if len(c) > 1 {
		dst = append(dst, '.')
		dst = append(dst, c[1:]...)
	}
	dst = append(dst, 'E')
	if adjusted >= 0 {
		dst = append(dst, '+')
	}
	return strconv.AppendInt(dst, int64(adjusted), 10)
}
