package mql

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
)

// Conversion ($convert and the $toX shorthands) and date operators.

func init() {
	registerInternal("$convert", compileConvert)
	fixed("$toObjectId", 1, 1, func(a []any) (any, error) { return convertTo(a[0], "objectId") })
	fixed("$toDate", 1, 1, func(a []any) (any, error) { return convertTo(a[0], "date") })
	fixed("$toDecimal", 1, 1, func(a []any) (any, error) { return convertTo(a[0], "decimal") })

	for name, part := range map[string]func(time.Time) any{
		"$year":        func(t time.Time) any { return int32(t.Year()) },
		"$month":       func(t time.Time) any { return int32(t.Month()) },
		"$dayOfMonth":  func(t time.Time) any { return int32(t.Day()) },
		"$hour":        func(t time.Time) any { return int32(t.Hour()) },
		"$minute":      func(t time.Time) any { return int32(t.Minute()) },
		"$second":      func(t time.Time) any { return int32(t.Second()) },
		"$millisecond": func(t time.Time) any { return int32(t.Nanosecond() / 1e6) },
		"$dayOfWeek":   func(t time.Time) any { return int32(t.Weekday()) + 1 },
		"$dayOfYear":   func(t time.Time) any { return int32(t.YearDay()) },
		"$isoDayOfWeek": func(t time.Time) any {
			d := int32(t.Weekday())
			if d == 0 {
				d = 7
			}
			return d
		},
		"$isoWeek":     func(t time.Time) any { _, w := t.ISOWeek(); return int32(w) },
		"$isoWeekYear": func(t time.Time) any { y, _ := t.ISOWeek(); return int64(y) },
		"$week":        func(t time.Time) any { return int32(sundayWeek(t)) },
	} {
		registerInternal(name, compileDatePart(part))
	}
	registerInternal("$dateToString", compileDateToString)
}

var convertTypes = map[string]string{
	"double": "double", "string": "string", "objectId": "objectId", "bool": "bool", "date": "date",
	"int": "int", "long": "long", "decimal": "decimal",
}

func compileConvert(c *compiler, name string, arg any) (exprFn, error) {
	m, err := namedArgs(arg, []string{"input", "to", "onError", "onNull", "format", "base", "byteOrder"}, mongoerr.CodeFailedToParse, "$convert found an unknown argument: ")
	if err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errf(mongoerr.CodeFailedToParse, "$convert expects an object of named arguments but found: %s", typeName(arg))
	}
	inSpec, ok := m["input"]
	if !ok {
		return nil, errf(mongoerr.CodeFailedToParse, "Missing 'input' parameter to $convert")
	}
	toSpec, ok := m["to"]
	if !ok {
		return nil, errf(mongoerr.CodeFailedToParse, "Missing 'to' parameter to $convert")
	}
	fns := map[string]exprFn{}
	for k, spec := range map[string]any{"input": inSpec, "to": toSpec} {
		f, err := c.compile(spec)
		if err != nil {
			return nil, err
		}
		fns[k] = f
	}
	for _, k := range []string{"onError", "onNull"} {
		if spec, ok := m[k]; ok {
			f, err := c.compile(spec)
			if err != nil {
				return nil, err
			}
			fns[k] = f
		}
	}
	return func(ctx *evalCtx) (any, error) {
		in, err := fns["input"](ctx)
		if err != nil {
			return nil, err
		}
		to, err := fns["to"](ctx)
		if err != nil {
			return nil, err
		}
		if isNullish(to) {
			return nil, nil
		}
		var target string
		switch t := to.(type) {
		case string:
			tt, ok := convertTypes[t]
			if !ok {
				return nil, errf(mongoerr.CodeBadValue, "Unknown type name: %s", t)
			}
			target = tt
		default:
			n, ok := exactInt(t)
			if !ok {
				return nil, errf(mongoerr.CodeFailedToParse, "$convert's 'to' argument must be a string or number, but is %s", typeName(t))
			}
			tn, ok := typeNames[int(n)]
			if _, conv := convertTypes[tn]; !ok || !conv {
				return nil, errf(mongoerr.CodeBadValue, "In $convert, numeric value for 'to' does not correspond to a BSON type: %d", n)
			}
			target = tn
		}
		if isNullish(in) {
			if f := fns["onNull"]; f != nil {
				return f(ctx)
			}
			return nil, nil
		}
		out, err := convertTo(in, target)
		if err != nil {
			if f := fns["onError"]; f != nil {
				return f(ctx)
			}
			return nil, err
		}
		return out, nil
	}, nil
}

func convFail(from any, to string) error {
	return errf(mongoerr.CodeConversionFailure, "Unsupported conversion from %s to %s in $convert with no onError value", typeName(from), to)
}

// convertTo converts a non-null value to the named type like $convert.
func convertTo(v any, to string) (any, error) {
	if isNullish(v) {
		return nil, nil
	}
	switch to {
	case "string":
		return toStringValue(v, "$convert")
	case "int":
		return toIntOp("$convert", true)([]any{v})
	case "long":
		return toIntOp("$convert", false)([]any{v})
	case "double":
		return opToDouble([]any{v})
	case "bool":
		return Truthy(v), nil
	case "decimal":
		switch x := v.(type) {
		case bool:
			if x {
				return bson.ParseDecimal128("1")
			}
			return bson.ParseDecimal128("0")
		case int32:
			return bson.ParseDecimal128(strconv.FormatInt(int64(x), 10))
		case int64:
			return bson.ParseDecimal128(strconv.FormatInt(x, 10))
		case float64:
			return floatToDecimal(x), nil
		case bson.Decimal128:
			return x, nil
		case string:
			d, err := bson.ParseDecimal128(x)
			if err != nil {
				return nil, errf(mongoerr.CodeConversionFailure, "Failed to parse number '%s' in $convert with no onError value", x)
			}
			return d, nil
		case bson.DateTime:
			return bson.ParseDecimal128(strconv.FormatInt(int64(x), 10))
		}
		return nil, convFail(v, "decimal")
	case "objectId":
		switch x := v.(type) {
		case bson.ObjectID:
			return x, nil
		case string:
			id, err := bson.ObjectIDFromHex(x)
			if err != nil {
				return nil, errf(mongoerr.CodeConversionFailure, "Failed to parse objectId '%s' in $convert with no onError value: Invalid string length for parsing to OID, expected 24 but found %d", x, len(x))
			}
			return id, nil
		}
		return nil, convFail(v, "objectId")
	case "date":
		switch x := v.(type) {
		case bson.DateTime:
			return x, nil
		case bson.Timestamp:
			return bson.DateTime(int64(x.T) * 1000), nil
		case bson.ObjectID:
			return bson.NewDateTimeFromTime(x.Timestamp()), nil
		case int64:
			return bson.DateTime(x), nil
		case float64:
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, errf(mongoerr.CodeConversionFailure, "Attempt to convert NaN or infinity value to date in $convert with no onError value")
			}
			return bson.DateTime(int64(x)), nil
		case bson.Decimal128:
			f, _ := toFloat(x)
			return bson.DateTime(int64(f)), nil
		case string:
			t, err := parseISODate(x)
			if err != nil {
				return nil, errf(mongoerr.CodeConversionFailure, "Error parsing date string '%s'; in $convert with no onError value", x)
			}
			return bson.NewDateTimeFromTime(t), nil
		}
		return nil, convFail(v, "date")
	}
	return nil, convFail(v, to)
}

func parseISODate(s string) (time.Time, error) {
	for _, layout := range []string{
		time.RFC3339Nano, "2006-01-02T15:04:05.000Z0700", "2006-01-02T15:04:05Z0700",
		"2006-01-02T15:04:05.000", "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02",
	} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("cannot parse %q", s)
}

// dateOperand converts a date-like value to a time in the given zone.
func dateOperand(name string, v any, loc *time.Location) (time.Time, bool, error) {
	var t time.Time
	switch x := v.(type) {
	case nil, missingT, bson.Undefined:
		return t, false, nil
	case bson.DateTime:
		t = x.Time()
	case bson.Timestamp:
		t = time.Unix(int64(x.T), 0)
	case bson.ObjectID:
		t = x.Timestamp()
	default:
		return t, false, errf(16006, "can't convert from BSON type %s to Date", typeName(v))
	}
	return t.In(loc), true, nil
}

// parseTimezone accepts UTC/GMT, "+hh:mm"/"-hhmm"/"+hh" offsets and Olson
// names (when the zone database is available).
func parseTimezone(v any) (*time.Location, error) {
	s, ok := v.(string)
	if !ok {
		return nil, errf(40517, "timezone must evaluate to a string, found %s", typeName(v))
	}
	if s == "UTC" || s == "GMT" || s == "Z" {
		return time.UTC, nil
	}
	if len(s) > 0 && (s[0] == '+' || s[0] == '-') {
		digits := strings.ReplaceAll(s[1:], ":", "")
		if len(digits) == 2 {
			digits += "00"
		}
		if len(digits) == 4 && allDigits(digits) {
			h, _ := strconv.Atoi(digits[:2])
			m, _ := strconv.Atoi(digits[2:])
			off := h*3600 + m*60
			if s[0] == '-' {
				off = -off
			}
			return time.FixedZone(s, off), nil
		}
	}
	loc, err := time.LoadLocation(s)
	if err != nil {
		return nil, errf(40485, "unrecognized time zone identifier: \"%s\"", s)
	}
	return loc, nil
}

func compileDatePart(part func(time.Time) any) opCompiler {
	return func(c *compiler, name string, arg any) (exprFn, error) {
		dateSpec, tzSpec := arg, any(nil)
		if a, ok := arg.(bson.A); ok {
			if len(a) != 1 {
				return nil, errf(40536, "%s accepts exactly one argument if given an array, but was given %d", name, len(a))
			}
			dateSpec = normalize(a[0])
		}
		if d, ok := arg.(bson.D); ok && len(d) > 0 && d[0].Key == "date" {
			m, err := namedArgs(d, []string{"date", "timezone"}, 40535, "unrecognized option to "+name+": ")
			if err != nil {
				return nil, err
			}
			dateSpec, tzSpec = m["date"], m["timezone"]
		}
		df, err := c.compile(dateSpec)
		if err != nil {
			return nil, err
		}
		var tzf exprFn
		if tzSpec != nil {
			if tzf, err = c.compile(tzSpec); err != nil {
				return nil, err
			}
		}
		return func(ctx *evalCtx) (any, error) {
			loc := time.UTC
			if tzf != nil {
				tz, err := tzf(ctx)
				if err != nil {
					return nil, err
				}
				if isNullish(tz) {
					return nil, nil
				}
				if loc, err = parseTimezone(tz); err != nil {
					return nil, err
				}
			}
			v, err := df(ctx)
			if err != nil {
				return nil, err
			}
			t, ok, err := dateOperand(name, v, loc)
			if err != nil || !ok {
				return nil, err
			}
			return part(t), nil
		}, nil
	}
}

// sundayWeek is the $week number: weeks start on Sunday; days before the
// first Sunday of the year are in week 0.
func sundayWeek(t time.Time) int {
	yd := t.YearDay() - 1
	wd := int(t.Weekday())
	return (yd - wd + 7) / 7
}

func compileDateToString(c *compiler, name string, arg any) (exprFn, error) {
	m, err := namedArgs(arg, []string{"date", "format", "timezone", "onNull"}, 18534, "Unrecognized argument to $dateToString: ")
	if err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errf(18629, "$dateToString only supports an object as its argument")
	}
	dateSpec, ok := m["date"]
	if !ok {
		return nil, errf(18628, "Missing 'date' parameter to $dateToString")
	}
	fns := map[string]exprFn{}
	for k, spec := range map[string]any{"date": dateSpec, "format": m["format"], "timezone": m["timezone"], "onNull": m["onNull"]} {
		if _, present := m[k]; !present {
			continue
		}
		f, err := c.compile(spec)
		if err != nil {
			return nil, err
		}
		fns[k] = f
	}
	return func(ctx *evalCtx) (any, error) {
		loc := time.UTC
		if f := fns["timezone"]; f != nil {
			tz, err := f(ctx)
			if err != nil {
				return nil, err
			}
			if isNullish(tz) {
				return nil, nil
			}
			if loc, err = parseTimezone(tz); err != nil {
				return nil, err
			}
		}
		format := "%Y-%m-%dT%H:%M:%S.%LZ"
		if f := fns["format"]; f != nil {
			fv, err := f(ctx)
			if err != nil {
				return nil, err
			}
			if isNullish(fv) {
				return nil, nil
			}
			s, ok := fv.(string)
			if !ok {
				return nil, errf(18533, "$dateToString requires that 'format' be a string, found: %s with value %s", typeName(fv), describe(fv))
			}
			format = s
		} else if loc != time.UTC {
			format = "%Y-%m-%dT%H:%M:%S.%L"
		}
		v, err := fns["date"](ctx)
		if err != nil {
			return nil, err
		}
		if isNullish(v) {
			if f := fns["onNull"]; f != nil {
				return f(ctx)
			}
			return nil, nil
		}
		t, _, err := dateOperand(name, v, loc)
		if err != nil {
			return nil, err
		}
		return formatDateSpec(t, format)
	}, nil
}

func formatDateSpec(t time.Time, format string) (any, error) {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		ch := format[i]
		if ch != '%' {
			b.WriteByte(ch)
			continue
		}
		if i+1 >= len(format) {
			return nil, errf(18535, "Unmatched '%%' at end of format string")
		}
		i++
		switch format[i] {
		case 'Y':
			fmt.Fprintf(&b, "%04d", t.Year())
		case 'm':
			fmt.Fprintf(&b, "%02d", int(t.Month()))
		case 'd':
			fmt.Fprintf(&b, "%02d", t.Day())
		case 'H':
			fmt.Fprintf(&b, "%02d", t.Hour())
		case 'M':
			fmt.Fprintf(&b, "%02d", t.Minute())
		case 'S':
			fmt.Fprintf(&b, "%02d", t.Second())
		case 'L':
			fmt.Fprintf(&b, "%03d", t.Nanosecond()/1e6)
		case 'j':
			fmt.Fprintf(&b, "%03d", t.YearDay())
		case 'w':
			fmt.Fprintf(&b, "%d", int(t.Weekday())+1)
		case 'u':
			d := int(t.Weekday())
			if d == 0 {
				d = 7
			}
			fmt.Fprintf(&b, "%d", d)
		case 'U':
			fmt.Fprintf(&b, "%02d", sundayWeek(t))
		case 'V':
			_, w := t.ISOWeek()
			fmt.Fprintf(&b, "%02d", w)
		case 'G':
			y, _ := t.ISOWeek()
			fmt.Fprintf(&b, "%04d", y)
		case 'z':
			_, off := t.Zone()
			sign := '+'
			if off < 0 {
				sign, off = '-', -off
			}
			fmt.Fprintf(&b, "%c%02d%02d", sign, off/3600, off%3600/60)
		case 'Z':
			_, off := t.Zone()
			fmt.Fprintf(&b, "%d", off/60)
		case 'b':
			b.WriteString(t.Month().String()[:3])
		case 'B':
			b.WriteString(t.Month().String())
		case '%':
			b.WriteByte('%')
		default:
			return nil, errf(18536, "Invalid format character '%%%c' in format string", format[i])
		}
	}
	return b.String(), nil
}
