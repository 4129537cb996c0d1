package extjson

import (
	"bytes"
	"math"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// A corpusCase is a document with its Extended JSON in both modes, as
// this test states it (from the Extended JSON specification and the
// driver's writer) and as the driver must agree.
type corpusCase struct {
	name               string
	doc                []byte
	relaxed, canonical string
}

// same is a case whose two modes render alike.
func same(name string, d []byte, want string) corpusCase { return corpusCase{name, d, want, want} }

func modes(name string, d []byte, relaxed, canonical string) corpusCase {
	return corpusCase{name, d, relaxed, canonical}
}

const oid = "56e1fc72e0c917e9c4714161"

// corpus covers every BSON type and the edge cases of each.
func corpus() []corpusCase {
	uuid := "\x73\xff\xd2\x64\x44\xb3\x4c\x69\x90\xe8\xe7\xd1\xdf\xc0\x35\xd4"
	return []corpusCase{
		// Documents, keys and arrays.
		same("empty document", doc(), `{}`),
		same("empty nested document", doc(eDoc("a", doc())), `{"a":{}}`),
		same("key order kept", doc(eNull("z"), eNull("a"), eNull("m")), `{"z":null,"a":null,"m":null}`),
		same("duplicate keys kept", doc(eBool("a", true), eBool("a", false)), `{"a":true,"a":false}`),
		same("empty key", doc(eNull("")), `{"":null}`),
		same("key escapes", doc(eNull("q\"b\\n\nt\t\x01")), `{"q\"b\\n\nt\t\u0001":null}`),
		same("key invalid UTF-8", doc(eNull("a\xffb")), `{"a\ufffdb":null}`),
		modes("key looks like a wrapper", doc(eInt32("$oid", 1)), `{"$oid":1}`, `{"$oid":{"$numberInt":"1"}}`),
		same("key non-ASCII", doc(eNull("café")), `{"café":null}`),
		modes("deep nesting",
			doc(eDoc("a", doc(eDoc("b", doc(eArray("c", arr(eInt32("", 1), eDoc("", doc(eArray("d", arr())))))))))),
			`{"a":{"b":{"c":[1,{"d":[]}]}}}`,
			`{"a":{"b":{"c":[{"$numberInt":"1"},{"d":[]}]}}}`),
		same("empty array", doc(eArray("a", arr())), `{"a":[]}`),
		modes("mixed array",
			doc(eArray("a", arr(eInt32("", 1), eString("", "x"), eBool("", true), eNull(""), eDoc("", doc()), eArray("", arr()), eDouble("", 2.5)))),
			`{"a":[1,"x",true,null,{},[],2.5]}`,
			`{"a":[{"$numberInt":"1"},"x",true,null,{},[],{"$numberDouble":"2.5"}]}`),
		same("nested arrays", doc(eArray("a", arr(eArray("", arr(eNull(""), eNull(""))), eArray("", arr())))), `{"a":[[null,null],[]]}`),

		// Doubles.
		modes("double 1.0", doc(eDouble("d", 1)), `{"d":1.0}`, `{"d":{"$numberDouble":"1.0"}}`),
		modes("double -1.0", doc(eDouble("d", -1)), `{"d":-1.0}`, `{"d":{"$numberDouble":"-1.0"}}`),
		modes("double 0.0", doc(eDouble("d", 0)), `{"d":0.0}`, `{"d":{"$numberDouble":"0.0"}}`),
		modes("double -0.0", doc(eDouble("d", math.Copysign(0, -1))), `{"d":-0.0}`, `{"d":{"$numberDouble":"-0.0"}}`),
		modes("double 1.5", doc(eDouble("d", 1.5)), `{"d":1.5}`, `{"d":{"$numberDouble":"1.5"}}`),
		modes("double 0.1", doc(eDouble("d", 0.1)), `{"d":0.1}`, `{"d":{"$numberDouble":"0.1"}}`),
		modes("double 123456", doc(eDouble("d", 123456)), `{"d":123456.0}`, `{"d":{"$numberDouble":"123456.0"}}`),
		modes("double 1234567 takes an exponent", doc(eDouble("d", 1234567)), `{"d":1.234567E+06}`, `{"d":{"$numberDouble":"1.234567E+06"}}`),
		modes("double 1e21", doc(eDouble("d", 1e21)), `{"d":1E+21}`, `{"d":{"$numberDouble":"1E+21"}}`),
		modes("double 2^53", doc(eDouble("d", 1<<53)), `{"d":9.007199254740992E+15}`, `{"d":{"$numberDouble":"9.007199254740992E+15"}}`),
		modes("double -1.2345678921232E+18", doc(eDouble("d", -1.2345678921232e18)), `{"d":-1.2345678921232E+18}`, `{"d":{"$numberDouble":"-1.2345678921232E+18"}}`),
		modes("double 0.0001", doc(eDouble("d", 0.0001)), `{"d":0.0001}`, `{"d":{"$numberDouble":"0.0001"}}`),
		modes("double 1e-5", doc(eDouble("d", 1e-5)), `{"d":1E-05}`, `{"d":{"$numberDouble":"1E-05"}}`),
		modes("double 1.0001220703125E-43", doc(eDouble("d", 1.0001220703125e-43)), `{"d":1.0001220703125E-43}`, `{"d":{"$numberDouble":"1.0001220703125E-43"}}`),
		modes("double max", doc(eDouble("d", math.MaxFloat64)), `{"d":1.7976931348623157E+308}`, `{"d":{"$numberDouble":"1.7976931348623157E+308"}}`),
		modes("double smallest denormal", doc(eDouble("d", 5e-324)), `{"d":5E-324}`, `{"d":{"$numberDouble":"5E-324"}}`),
		same("double NaN", doc(eDouble("d", math.NaN())), `{"d":{"$numberDouble":"NaN"}}`),
		same("double NaN with payload", doc(eDoubleBits("d", 0x7ff800000000000f)), `{"d":{"$numberDouble":"NaN"}}`),
		same("double negative NaN", doc(eDoubleBits("d", 0xfff8000000000000)), `{"d":{"$numberDouble":"NaN"}}`),
		same("double signaling NaN", doc(eDoubleBits("d", 0x7ff0000000000001)), `{"d":{"$numberDouble":"NaN"}}`),
		same("double +Inf", doc(eDouble("d", math.Inf(1))), `{"d":{"$numberDouble":"Infinity"}}`),
		same("double -Inf", doc(eDouble("d", math.Inf(-1))), `{"d":{"$numberDouble":"-Infinity"}}`),

		// Strings.
		same("string empty", doc(eString("s", "")), `{"s":""}`),
		same("string plain", doc(eString("s", "hello, world")), `{"s":"hello, world"}`),
		same("string escapes", doc(eString("s", "q\"b\\n\nr\rt\tb\bf\f/")), `{"s":"q\"b\\n\nr\rt\tb\bf\f/"}`),
		same("string control bytes", doc(eString("s", "\x00\x01\x1f\x7f")), "{\"s\":\"\\u0000\\u0001\\u001f\x7f\"}"),
		same("string HTML not escaped", doc(eString("s", "<b>&'</b>")), `{"s":"<b>&'</b>"}`),
		same("string non-ASCII", doc(eString("s", "café ☕ 😀")), `{"s":"café ☕ 😀"}`),
		same("string line and paragraph separators", doc(eString("s", "a\u2028b\u2029")), `{"s":"a\u2028b\u2029"}`),
		same("string invalid byte", doc(eString("s", "a\xffb")), `{"s":"a\ufffdb"}`),
		same("string truncated sequence", doc(eString("s", "\xe2\x82")), `{"s":"\ufffd\ufffd"}`),
		same("string surrogate half", doc(eString("s", "\xed\xa0\x80")), `{"s":"\ufffd\ufffd\ufffd"}`),
		same("string overlong NUL", doc(eString("s", "\xc0\x80")), `{"s":"\ufffd\ufffd"}`),
		same("string literal U+FFFD", doc(eString("s", "\uFFFD")), "{\"s\":\"\uFFFD\"}"),

		// Binary.
		same("binary empty", doc(eBinary("b", 0, "")), `{"b":{"$binary":{"base64":"","subType":"00"}}}`),
		same("binary generic", doc(eBinary("b", 0, "hello")), `{"b":{"$binary":{"base64":"aGVsbG8=","subType":"00"}}}`),
		same("binary function", doc(eBinary("b", 1, "\x00\x01")), `{"b":{"$binary":{"base64":"AAE=","subType":"01"}}}`),
		same("binary old", doc(eOldBinary("b", "old")), `{"b":{"$binary":{"base64":"b2xk","subType":"02"}}}`),
		modes("binary old in an array", doc(eArray("a", arr(eOldBinary("", "old"), eInt32("", 0)))),
			`{"a":[{"$binary":{"base64":"b2xk","subType":"02"}},0]}`,
			`{"a":[{"$binary":{"base64":"b2xk","subType":"02"}},{"$numberInt":"0"}]}`),
		same("binary old UUID", doc(eBinary("b", 3, uuid)), `{"b":{"$binary":{"base64":"c//SZESzTGmQ6OfR38A11A==","subType":"03"}}}`),
		same("binary UUID stays $binary", doc(eBinary("b", 4, uuid)), `{"b":{"$binary":{"base64":"c//SZESzTGmQ6OfR38A11A==","subType":"04"}}}`),
		same("binary MD5", doc(eBinary("b", 5, uuid)), `{"b":{"$binary":{"base64":"c//SZESzTGmQ6OfR38A11A==","subType":"05"}}}`),
		same("binary encrypted", doc(eBinary("b", 6, "x")), `{"b":{"$binary":{"base64":"eA==","subType":"06"}}}`),
		same("binary column", doc(eBinary("b", 7, "xy")), `{"b":{"$binary":{"base64":"eHk=","subType":"07"}}}`),
		same("binary sensitive", doc(eBinary("b", 8, "xyz")), `{"b":{"$binary":{"base64":"eHl6","subType":"08"}}}`),
		same("binary vector", doc(eBinary("b", 9, "\x03\x00\x7f\x07")), `{"b":{"$binary":{"base64":"AwB/Bw==","subType":"09"}}}`),
		same("binary user defined", doc(eBinary("b", 0x80, "\xff")), `{"b":{"$binary":{"base64":"/w==","subType":"80"}}}`),
		same("binary subtype ff", doc(eBinary("b", 0xff, "+/")), `{"b":{"$binary":{"base64":"Ky8=","subType":"ff"}}}`),

		same("undefined", doc(eUndefined("u")), `{"u":{"$undefined":true}}`),
		same("ObjectId", doc(eOID("o", oid)), `{"o":{"$oid":"`+oid+`"}}`),
		same("ObjectId zero", doc(eOID("o", "000000000000000000000000")), `{"o":{"$oid":"000000000000000000000000"}}`),
		same("boolean true", doc(eBool("b", true)), `{"b":true}`),
		same("boolean false", doc(eBool("b", false)), `{"b":false}`),

		// Dates: relaxed is ISO-8601 from 1970 through 9999 only.
		modes("date epoch", doc(eDate("t", 0)), `{"t":{"$date":"1970-01-01T00:00:00Z"}}`, `{"t":{"$date":{"$numberLong":"0"}}}`),
		modes("date millis", doc(eDate("t", 1356351330501)), `{"t":{"$date":"2012-12-24T12:15:30.501Z"}}`, `{"t":{"$date":{"$numberLong":"1356351330501"}}}`),
		modes("date millis trimmed .5", doc(eDate("t", 1356351330500)), `{"t":{"$date":"2012-12-24T12:15:30.5Z"}}`, `{"t":{"$date":{"$numberLong":"1356351330500"}}}`),
		modes("date millis trimmed .05", doc(eDate("t", 1356351330050)), `{"t":{"$date":"2012-12-24T12:15:30.05Z"}}`, `{"t":{"$date":{"$numberLong":"1356351330050"}}}`),
		modes("date millis .001", doc(eDate("t", 1356351330001)), `{"t":{"$date":"2012-12-24T12:15:30.001Z"}}`, `{"t":{"$date":{"$numberLong":"1356351330001"}}}`),
		modes("date before 1970", doc(eDate("t", -1)), `{"t":{"$date":{"$numberLong":"-1"}}}`, `{"t":{"$date":{"$numberLong":"-1"}}}`),
		modes("date 1960", doc(eDate("t", -284643869501)), `{"t":{"$date":{"$numberLong":"-284643869501"}}}`, `{"t":{"$date":{"$numberLong":"-284643869501"}}}`),
		modes("date year 1", doc(eDate("t", -62135596800000)), `{"t":{"$date":{"$numberLong":"-62135596800000"}}}`, `{"t":{"$date":{"$numberLong":"-62135596800000"}}}`),
		modes("date last of 9999", doc(eDate("t", 253402300799999)), `{"t":{"$date":"9999-12-31T23:59:59.999Z"}}`, `{"t":{"$date":{"$numberLong":"253402300799999"}}}`),
		modes("date year 10000", doc(eDate("t", 253402300800000)), `{"t":{"$date":{"$numberLong":"253402300800000"}}}`, `{"t":{"$date":{"$numberLong":"253402300800000"}}}`),
		same("date max", doc(eDate("t", math.MaxInt64)), `{"t":{"$date":{"$numberLong":"9223372036854775807"}}}`),
		same("date min", doc(eDate("t", math.MinInt64)), `{"t":{"$date":{"$numberLong":"-9223372036854775808"}}}`),

		same("null", doc(eNull("n")), `{"n":null}`),

		// Regular expressions: options sorted by code point.
		same("regex", doc(eRegex("r", "abc", "im")), `{"r":{"$regularExpression":{"pattern":"abc","options":"im"}}}`),
		same("regex options sorted", doc(eRegex("r", "abc", "xusmli")), `{"r":{"$regularExpression":{"pattern":"abc","options":"ilmsux"}}}`),
		same("regex empty", doc(eRegex("r", "", "")), `{"r":{"$regularExpression":{"pattern":"","options":""}}}`),
		same("regex escapes", doc(eRegex("r", "a/b\"c\\d\n", "\"")), `{"r":{"$regularExpression":{"pattern":"a/b\"c\\d\n","options":"\""}}}`),
		same("regex long options", doc(eRegex("r", "x", "zyxwvutsrqponmlkjihg")), `{"r":{"$regularExpression":{"pattern":"x","options":"ghijklmnopqrstuvwxyz"}}}`),
		// Sorting reads an invalid byte as U+FFFD, then writes that rune as
		// itself rather than as \ufffd.
		same("regex options non-ASCII", doc(eRegex("r", "x", "\xffaé")), "{\"r\":{\"$regularExpression\":{\"pattern\":\"x\",\"options\":\"aé\uFFFD\"}}}"),

		// Deprecated types.
		same("DBPointer", doc(eDBPointer("p", "db.coll", oid)), `{"p":{"$dbPointer":{"$ref":"db.coll","$id":{"$oid":"`+oid+`"}}}}`),
		same("DBPointer namespace verbatim", doc(eDBPointer("p", "a\"b\nc\xff", oid)), "{\"p\":{\"$dbPointer\":{\"$ref\":\"a\"b\nc\xff\",\"$id\":{\"$oid\":\""+oid+"\"}}}}"),
		same("code", doc(eCode("c", `function() { return "x"; }`)), `{"c":{"$code":"function() { return \"x\"; }"}}`),
		same("symbol", doc(eSymbol("y", "sym\x01")), `{"y":{"$symbol":"sym\u0001"}}`),
		modes("code with scope", doc(eCWS("w", "f(x)", doc(eInt32("x", 1)))),
			`{"w":{"$code":"f(x)","$scope":{"x":1}}}`,
			`{"w":{"$code":"f(x)","$scope":{"x":{"$numberInt":"1"}}}}`),
		same("code with empty scope", doc(eCWS("w", "f", doc())), `{"w":{"$code":"f","$scope":{}}}`),
		modes("code with scope nested", doc(eArray("a", arr(eCWS("", "g", doc(eCWS("inner", "h\"", doc(eArray("z", arr()))))), eInt64("", 2)))),
			`{"a":[{"$code":"g","$scope":{"inner":{"$code":"h\"","$scope":{"z":[]}}}},2]}`,
			`{"a":[{"$code":"g","$scope":{"inner":{"$code":"h\"","$scope":{"z":[]}}}},{"$numberLong":"2"}]}`),

		// Integers.
		modes("int32 zero", doc(eInt32("i", 0)), `{"i":0}`, `{"i":{"$numberInt":"0"}}`),
		modes("int32 -1", doc(eInt32("i", -1)), `{"i":-1}`, `{"i":{"$numberInt":"-1"}}`),
		modes("int32 max", doc(eInt32("i", math.MaxInt32)), `{"i":2147483647}`, `{"i":{"$numberInt":"2147483647"}}`),
		modes("int32 min", doc(eInt32("i", math.MinInt32)), `{"i":-2147483648}`, `{"i":{"$numberInt":"-2147483648"}}`),
		modes("int64 zero", doc(eInt64("l", 0)), `{"l":0}`, `{"l":{"$numberLong":"0"}}`),
		modes("int64 max", doc(eInt64("l", math.MaxInt64)), `{"l":9223372036854775807}`, `{"l":{"$numberLong":"9223372036854775807"}}`),
		modes("int64 min", doc(eInt64("l", math.MinInt64)), `{"l":-9223372036854775808}`, `{"l":{"$numberLong":"-9223372036854775808"}}`),

		same("timestamp", doc(eTimestamp("ts", 123456789, 42)), `{"ts":{"$timestamp":{"t":123456789,"i":42}}}`),
		same("timestamp max", doc(eTimestamp("ts", math.MaxUint32, math.MaxUint32)), `{"ts":{"$timestamp":{"t":4294967295,"i":4294967295}}}`),
		same("timestamp zero", doc(eTimestamp("ts", 0, 0)), `{"ts":{"$timestamp":{"t":0,"i":0}}}`),

		// Decimal128, always as its string.
		same("decimal 1.0", doc(eDecimal("n", "1.0")), `{"n":{"$numberDecimal":"1.0"}}`),
		same("decimal -0", doc(eDecimal("n", "-0")), `{"n":{"$numberDecimal":"-0"}}`),
		same("decimal NaN", doc(eDecimal("n", "NaN")), `{"n":{"$numberDecimal":"NaN"}}`),
		same("decimal Infinity", doc(eDecimal("n", "Infinity")), `{"n":{"$numberDecimal":"Infinity"}}`),
		same("decimal -Infinity", doc(eDecimal("n", "-Infinity")), `{"n":{"$numberDecimal":"-Infinity"}}`),
		same("decimal exponent", doc(eDecimal("n", "1.234E+5")), `{"n":{"$numberDecimal":"1.234E+5"}}`),
		same("decimal small", doc(eDecimal("n", "0.000001234")), `{"n":{"$numberDecimal":"0.000001234"}}`),
		same("decimal smaller", doc(eDecimal("n", "1.234E-7")), `{"n":{"$numberDecimal":"1.234E-7"}}`),
		same("decimal 34 digits", doc(eDecimal("n", "9999999999999999999999999999999999")), `{"n":{"$numberDecimal":"9999999999999999999999999999999999"}}`),
		same("decimal min exponent", doc(eDecimal("n", "0E-6176")), `{"n":{"$numberDecimal":"0E-6176"}}`),
		// The driver prints a coefficient above 10^34-1 as it is; the
		// specification would print 0. This package follows the driver.
		same("decimal non-canonical coefficient", doc(eDecimalBits("n", 0x3041ED09BEAD87C0, 0x378D8E6400000000)), `{"n":{"$numberDecimal":"10000000000000000000000000000000000"}}`),

		same("min key", doc(eMinKey("m")), `{"m":{"$minKey":1}}`),
		same("max key", doc(eMaxKey("M")), `{"M":{"$maxKey":1}}`),

		modes("every type together", doc(
			eDouble("dbl", 2.5), eString("str", "s"), eDoc("doc", doc(eNull("x"))), eArray("arr", arr(eInt32("", 1))),
			eBinary("bin", 4, uuid), eUndefined("und"), eOID("oid", oid), eBool("bool", true), eDate("date", 1),
			eNull("null"), eRegex("re", "^a", "i"), eDBPointer("ptr", "d.c", oid), eCode("code", "c"), eSymbol("sym", "y"),
			eCWS("cws", "c", doc(eInt64("v", 5))), eInt32("i32", 7), eTimestamp("ts", 1, 2), eInt64("i64", 8),
			eDecimal("dec", "19.99"), eMinKey("min"), eMaxKey("max")),
			`{"dbl":2.5,"str":"s","doc":{"x":null},"arr":[1],"bin":{"$binary":{"base64":"c//SZESzTGmQ6OfR38A11A==","subType":"04"}},`+
				`"und":{"$undefined":true},"oid":{"$oid":"`+oid+`"},"bool":true,"date":{"$date":"1970-01-01T00:00:00.001Z"},`+
				`"null":null,"re":{"$regularExpression":{"pattern":"^a","options":"i"}},"ptr":{"$dbPointer":{"$ref":"d.c","$id":{"$oid":"`+oid+`"}}},`+
				`"code":{"$code":"c"},"sym":{"$symbol":"y"},"cws":{"$code":"c","$scope":{"v":5}},"i32":7,"ts":{"$timestamp":{"t":1,"i":2}},`+
				`"i64":8,"dec":{"$numberDecimal":"19.99"},"min":{"$minKey":1},"max":{"$maxKey":1}}`,
			`{"dbl":{"$numberDouble":"2.5"},"str":"s","doc":{"x":null},"arr":[{"$numberInt":"1"}],"bin":{"$binary":{"base64":"c//SZESzTGmQ6OfR38A11A==","subType":"04"}},`+
				`"und":{"$undefined":true},"oid":{"$oid":"`+oid+`"},"bool":true,"date":{"$date":{"$numberLong":"1"}},`+
				`"null":null,"re":{"$regularExpression":{"pattern":"^a","options":"i"}},"ptr":{"$dbPointer":{"$ref":"d.c","$id":{"$oid":"`+oid+`"}}},`+
				`"code":{"$code":"c"},"sym":{"$symbol":"y"},"cws":{"$code":"c","$scope":{"v":{"$numberLong":"5"}}},"i32":{"$numberInt":"7"},"ts":{"$timestamp":{"t":1,"i":2}},`+
				`"i64":{"$numberLong":"8"},"dec":{"$numberDecimal":"19.99"},"min":{"$minKey":1},"max":{"$maxKey":1}}`),
	}
}

// TestCorpus checks every case against the rendering this test states and
// against the driver's, in both modes.
func TestCorpus(t *testing.T) {
	for _, c := range corpus() {
		t.Run(c.name, func(t *testing.T) {
			for _, m := range []struct {
				canonical bool
				want      string
			}{{false, c.relaxed}, {true, c.canonical}} {
				drv, err := driver(c.doc, m.canonical)
				if err != nil {
					t.Fatalf("canonical=%v: the driver rejects the case: %v", m.canonical, err)
				}
				if string(drv) != m.want {
					t.Errorf("canonical=%v: the driver renders\n%s\nthe case says\n%s", m.canonical, drv, m.want)
				}
				got, err := Marshal(c.doc, m.canonical)
				if err != nil {
					t.Fatalf("canonical=%v: Marshal: %v", m.canonical, err)
				}
				if string(got) != m.want {
					t.Errorf("canonical=%v: Marshal renders\n%s\nwant\n%s", m.canonical, got, m.want)
				}
			}
		})
	}
}

// TestCorpusCoversEveryType fails when a BSON type is missing from the
// corpus, so the table cannot silently lose one.
func TestCorpusCoversEveryType(t *testing.T) {
	seen := map[bson.Type]bool{}
	var walk func(d bson.Raw)
	walk = func(d bson.Raw) {
		elems, err := d.Elements()
		if err != nil {
			t.Fatalf("corpus document does not parse: %v", err)
		}
		for _, e := range elems {
			v := e.Value()
			seen[v.Type] = true
			switch v.Type {
			case bson.TypeEmbeddedDocument, bson.TypeArray:
				walk(v.Value[:len(v.Value):len(v.Value)])
			case bson.TypeCodeWithScope:
				_, scope := v.CodeWithScope()
				walk(scope)
			}
		}
	}
	for _, c := range corpus() {
		walk(c.doc)
	}
	all := []bson.Type{
		bson.TypeDouble, bson.TypeString, bson.TypeEmbeddedDocument, bson.TypeArray, bson.TypeBinary,
		bson.TypeUndefined, bson.TypeObjectID, bson.TypeBoolean, bson.TypeDateTime, bson.TypeNull,
		bson.TypeRegex, bson.TypeDBPointer, bson.TypeJavaScript, bson.TypeSymbol, bson.TypeCodeWithScope,
		bson.TypeInt32, bson.TypeTimestamp, bson.TypeInt64, bson.TypeDecimal128, bson.TypeMinKey, bson.TypeMaxKey,
	}
	for _, ty := range all {
		if !seen[ty] {
			t.Errorf("no corpus case holds a %v", ty)
		}
	}
}

// TestAppendKeepsPrefix checks Append extends dst and leaves what was in
// it, and that a failed Append returns dst as it was.
func TestAppendKeepsPrefix(t *testing.T) {
	dst := []byte("line: ")
	got, err := Append(dst, doc(eInt32("a", 1)), false)
	if err != nil || string(got) != `line: {"a":1}` {
		t.Fatalf("Append = %q, %v", got, err)
	}
	got, err = Append(got, []byte{5, 0, 0, 0, 1}, false)
	if err == nil || string(got) != `line: {"a":1}` {
		t.Fatalf("Append of malformed input = %q, %v; want the buffer unchanged and an error", got, err)
	}
	if !bytes.HasPrefix(got, dst) {
		t.Fatal("prefix lost")
	}
}
