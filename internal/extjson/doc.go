// Package extjson renders a raw BSON document as MongoDB Extended JSON
// (canonical or relaxed) in one pass over its bytes, without decoding it
// into Go values first.
//
// Guarantee: for every byte slice doc,
//
//	Append(dst, doc, canonical)
//
// succeeds exactly when the driver's
//
//	bson.MarshalExtJSON(bson.Raw(doc), canonical, false)
//
// succeeds, and then appends exactly the bytes the driver returns
// (go.mongodb.org/mongo-driver/v2 v2.10.0, the version the root module
// requires). Sinks rely on this: switching them from the driver's
// marshaller to this package changes no delivered byte, so receivers that
// hash, sign or de-duplicate bodies see nothing new. The tests hold the
// two to it on a table of every BSON type and on fuzzed input.
//
// Matching the driver includes its quirks, which this package keeps on
// purpose rather than fixing:
//
//   - Keys and strings are escaped like encoding/json without HTML
//     escaping; invalid UTF-8 bytes become \ufffd, U+2028 and U+2029 are
//     escaped. A DBPointer's namespace is written verbatim, unescaped.
//   - Doubles print in the shortest form that round-trips, with an
//     exponent ("1E+21", "1E-07") where strconv's 'G' format uses one and
//     ".0" added to integral values; relaxed mode writes non-finite
//     doubles as {"$numberDouble": ...}. Relaxed dates between the years
//     1970 and 9999 are ISO-8601 strings with trimmed milliseconds, other
//     dates {"$numberLong": ...}. Regex options are sorted.
//   - Lenient reading: bytes after the outer document's length are
//     ignored; array keys are not checked; strings may hold NUL bytes; the
//     code of a code-with-scope need not end in NUL (its last byte is
//     dropped); an old-style binary (subtype 2) is read by its inner
//     length, and inside nested documents the bytes that follow it start
//     right after that inner data, whatever its outer length says.
//
// Anything else the driver rejects is rejected here with an error matching
// ErrMalformed (a *MalformedError naming the byte offset and the field),
// and nothing panics on any input. Nesting depth is bounded only by the
// input's size: the walk keeps its own stack rather than recursing.
package extjson
