package mql

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// missingT is the value of a field that does not exist. It is distinct from
// null inside expression evaluation (MongoDB's "missing" / EOO) and never
// appears in an output document.
type missingT struct{}

var missing any = missingT{}

// IsMissing reports whether v is the "missing" marker used by expressions.
func IsMissing(v any) bool {
	_, ok := v.(missingT)
	return ok
}

// normalize converts Go native values that callers (and tests) commonly use
// into the types bson.Unmarshal produces, recursively: int → int32 or int64
// (as the driver encodes it), float32 → float64, time.Time → bson.DateTime,
// []any → bson.A, maps → bson.D (keys sorted), bson.Null → nil, []byte →
// generic binary, bson.Raw → bson.D.
func normalize(v any) any {
	if !needsNorm(v) {
		return v
	}
	switch t := v.(type) {
	case bson.D:
		out := make(bson.D, len(t))
		for i, e := range t {
			out[i] = bson.E{Key: e.Key, Value: normalize(e.Value)}
		}
		return out
	case bson.A:
		out := make(bson.A, len(t))
		for i, e := range t {
			out[i] = normalize(e)
		}
		return out
	case int:
		if t >= math.MinInt32 && t <= math.MaxInt32 {
			return int32(t)
		}
		return int64(t)
	case int8:
		return int32(t)
	case int16:
		return int32(t)
	case uint8:
		return int32(t)
	case uint16:
		return int32(t)
	case uint32:
		return int64(t)
	case uint:
		if uint64(t) <= math.MaxInt64 {
			return int64(t)
		}
		return float64(t)
	case uint64:
		if t <= math.MaxInt64 {
			return int64(t)
		}
		return float64(t)
	case float32:
		return float64(t)
	case time.Time:
		return bson.NewDateTimeFromTime(t)
	case bson.Null:
		return nil
	case []byte:
		return bson.Binary{Subtype: 0, Data: t}
	case []any:
		return normalize(bson.A(t))
	case []bson.D:
		a := make(bson.A, len(t))
		for i := range t {
			a[i] = normalize(t[i])
		}
		return a
	case []string:
		a := make(bson.A, len(t))
		for i := range t {
			a[i] = t[i]
		}
		return a
	case bson.M:
		return normalize(map[string]any(t))
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		d := make(bson.D, len(keys))
		for i, k := range keys {
			d[i] = bson.E{Key: k, Value: normalize(t[k])}
		}
		return d
	case bson.Raw:
		var d bson.D
		if err := bson.Unmarshal(t, &d); err != nil {
			return v
		}
		return d
	case *bson.D:
		if t == nil {
			return nil
		}
		return normalize(*t)
	}
	return v
}

// needsNorm reports whether normalize would change v.
func needsNorm(v any) bool {
	switch t := v.(type) {
	case nil, int32, int64, float64, string, bool, bson.ObjectID, bson.DateTime,
		bson.Timestamp, bson.Binary, bson.Regex, bson.Decimal128, bson.MinKey,
		bson.MaxKey, bson.Undefined, bson.Symbol, bson.JavaScript, bson.DBPointer,
		bson.CodeWithScope, missingT:
		return false
	case bson.D:
		for _, e := range t {
			if needsNorm(e.Value) {
				return true
			}
		}
		return false
	case bson.A:
		for _, e := range t {
			if needsNorm(e) {
				return true
			}
		}
		return false
	}
	return true
}

// Canonical type ranks (MongoDB's canonicalizeBSONType order).
const (
	rankMinKey = iota
	rankUndefined
	rankNull
	rankNumber
	rankString
	rankObject
	rankArray
	rankBinary
	rankObjectID
	rankBool
	rankDate
	rankTimestamp
	rankRegex
	rankDBPointer
	rankJavaScript
	rankCodeWithScope
	rankMaxKey
	rankUnknown
)

// TypeOrder is the rank of v's type in the BSON comparison order (Compare
// orders values by it first): equal for every number type, for strings
// and symbols, and for dates and time.Time.
func TypeOrder(v any) int { return typeRank(v) }

func typeRank(v any) int {
	switch v.(type) {
	case nil, bson.Null:
		return rankNull
	case int32, int64, float64, bson.Decimal128, int, int8, int16, uint8, uint16, uint32, uint, uint64, float32:
		return rankNumber
	case string, bson.Symbol:
		return rankString
	case bson.D, bson.M, map[string]any:
		return rankObject
	case bson.A, []any:
		return rankArray
	case bson.Binary, []byte:
		return rankBinary
	case bson.ObjectID:
		return rankObjectID
	case bool:
		return rankBool
	case bson.DateTime, time.Time:
		return rankDate
	case bson.Timestamp:
		return rankTimestamp
	case bson.Regex:
		return rankRegex
	case bson.MinKey:
		return rankMinKey
	case bson.MaxKey:
		return rankMaxKey
	case bson.Undefined, missingT:
		return rankUndefined
	case bson.DBPointer:
		return rankDBPointer
	case bson.JavaScript:
		return rankJavaScript
	case bson.CodeWithScope:
		return rankCodeWithScope
	}
	return rankUnknown
}

// BSON type numbers and aliases as used by $type.
const (
	typeDouble     = 1
	typeString     = 2
	typeObject     = 3
	typeArray      = 4
	typeBinary     = 5
	typeUndefined  = 6
	typeObjectID   = 7
	typeBool       = 8
	typeDate       = 9
	typeNull       = 10
	typeRegex      = 11
	typeDBPointer  = 12
	typeJavaScript = 13
	typeSymbol     = 14
	typeCodeWScope = 15
	typeInt        = 16
	typeTimestamp  = 17
	typeLong       = 18
	typeDecimal    = 19
	typeMinKey     = -1
	typeMaxKey     = 127
	typeMissing    = 0 // not a BSON type: the field does not exist
)

var typeNumByAlias = map[string]int{
	"double": typeDouble, "string": typeString, "object": typeObject, "array": typeArray,
	"binData": typeBinary, "undefined": typeUndefined, "objectId": typeObjectID, "bool": typeBool,
	"date": typeDate, "null": typeNull, "regex": typeRegex, "dbPointer": typeDBPointer,
	"javascript": typeJavaScript, "symbol": typeSymbol, "javascriptWithScope": typeCodeWScope,
	"int": typeInt, "timestamp": typeTimestamp, "long": typeLong, "decimal": typeDecimal,
	"minKey": typeMinKey, "maxKey": typeMaxKey,
}

var typeNames = func() map[int]string {
	m := make(map[int]string, len(typeNumByAlias))
	for k, v := range typeNumByAlias {
		m[v] = k
	}
	m[typeMissing] = "missing"
	return m
}()

// bsonType returns the BSON type number of v (0 for missing).
func bsonType(v any) int {
	switch v.(type) {
	case float64, float32:
		return typeDouble
	case string:
		return typeString
	case bson.D, bson.M, map[string]any:
		return typeObject
	case bson.A, []any:
		return typeArray
	case bson.Binary, []byte:
		return typeBinary
	case bson.Undefined:
		return typeUndefined
	case bson.ObjectID:
		return typeObjectID
	case bool:
		return typeBool
	case bson.DateTime, time.Time:
		return typeDate
	case nil, bson.Null:
		return typeNull
	case bson.Regex:
		return typeRegex
	case bson.DBPointer:
		return typeDBPointer
	case bson.JavaScript:
		return typeJavaScript
	case bson.Symbol:
		return typeSymbol
	case bson.CodeWithScope:
		return typeCodeWScope
	case int32, int8, int16, uint8, uint16:
		return typeInt
	case bson.Timestamp:
		return typeTimestamp
	case int64, uint32, uint64, uint:
		return typeLong
	case int:
		n := normalize(v)
		if _, ok := n.(int32); ok {
			return typeInt
		}
		return typeLong
	case bson.Decimal128:
		return typeDecimal
	case bson.MinKey:
		return typeMinKey
	case bson.MaxKey:
		return typeMaxKey
	case missingT:
		return typeMissing
	}
	return typeMissing
}

// isNumber reports whether v is a BSON number.
func isNumber(v any) bool {
	switch v.(type) {
	case int32, int64, float64, bson.Decimal128, int:
		return true
	}
	return false
}

// isNullish reports null, undefined or missing.
func isNullish(v any) bool {
	switch v.(type) {
	case nil, bson.Null, bson.Undefined, missingT:
		return true
	}
	return false
}

// asDoc returns v as a document if it is one.
func asDoc(v any) (bson.D, bool) {
	switch t := v.(type) {
	case bson.D:
		return t, true
	case bson.M, map[string]any, *bson.D, bson.Raw:
		d, ok := normalize(t).(bson.D)
		return d, ok
	}
	return nil, false
}

// asArray returns v as an array if it is one.
func asArray(v any) (bson.A, bool) {
	switch t := v.(type) {
	case bson.A:
		return t, true
	case []any:
		return bson.A(t), true
	}
	return nil, false
}

// describe renders a value for error messages, close to MongoDB's output.
func describe(v any) string {
	switch t := v.(type) {
	case missingT:
		return "MISSING"
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("%q", t)
	case bson.D:
		var b strings.Builder
		b.WriteString("{ ")
		for i, e := range t {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(e.Key)
			b.WriteString(": ")
			b.WriteString(describe(e.Value))
		}
		if len(t) == 0 {
			return "{}"
		}
		b.WriteString(" }")
		return b.String()
	case bson.A:
		var b strings.Builder
		b.WriteString("[ ")
		for i, e := range t {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(describe(e))
		}
		if len(t) == 0 {
			return "[]"
		}
		b.WriteString(" ]")
		return b.String()
	case float64:
		if t == math.Trunc(t) && math.Abs(t) < 1e15 {
			return fmt.Sprintf("%.1f", t)
		}
		return fmt.Sprint(t)
	case bson.ObjectID:
		return "ObjectId('" + t.Hex() + "')"
	case bson.DateTime:
		return "new Date(" + fmt.Sprint(int64(t)) + ")"
	case bson.Timestamp:
		return fmt.Sprintf("Timestamp(%d, %d)", t.T, t.I)
	case bson.Regex:
		return "/" + t.Pattern + "/" + t.Options
	case bson.Decimal128:
		return "NumberDecimal(\"" + t.String() + "\")"
	case bson.MinKey:
		return "MinKey"
	case bson.MaxKey:
		return "MaxKey"
	case bson.Undefined:
		return "undefined"
	}
	return fmt.Sprint(v)
}
