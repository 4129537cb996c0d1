package resumetoken

import (
	"cmp"
	"math"
	"math/big"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// randNumber returns a random int32, int64, double or exact-double decimal,
// spread over every KeyString numeric form.
func randNumber(r *rand.Rand) any {
	switch r.IntN(9) {
	case 0:
		return int32(r.Uint32())
	case 1:
		return int32(r.IntN(200) - 100)
	case 2:
		return int64(r.Uint64())
	case 3:
		return int64(r.IntN(1<<20) - 1<<19)
	case 4:
		return float64(r.IntN(2001)-1000) / 8 // small fractions
	case 5:
		return (r.Float64() - 0.5) * math.Pow(2, float64(r.IntN(140)-70))
	case 6:
		return math.Float64frombits(r.Uint64()&^(0x7FF<<52) | uint64(r.IntN(2046)+1)<<52) // any finite normal
	case 7:
		return []any{0.0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), 5e-324, -5e-324, math.MaxFloat64, int64(math.MinInt64)}[r.IntN(8)]
	default:
		// c * 10**e with c a multiple of 5**3 and e >= -3 is a dyadic rational.
		c := big.NewInt(int64(r.IntN(1<<20)-1<<19) * 125)
		d, ok := bson.ParseDecimal128FromBigInt(c, r.IntN(7)-3)
		if !ok {
			return int32(0)
		}
		return d
	}
}

func randValue(r *rand.Rand, depth int) any {
	n := 12
	if depth > 3 {
		n = 10 // no more nesting
	}
	switch r.IntN(n) {
	case 0, 1, 2:
		return randNumber(r)
	case 3:
		b := make([]byte, r.IntN(6))
		for i := range b {
			b[i] = byte(r.IntN(4)) // includes NUL bytes
		}
		return string(b)
	case 4:
		var o bson.ObjectID
		for i := range o {
			o[i] = byte(r.Uint32())
		}
		return o
	case 5:
		return r.IntN(2) == 0
	case 6:
		return bson.DateTime(r.Int64() - math.MaxInt64/2)
	case 7:
		return bson.Timestamp{T: r.Uint32(), I: r.Uint32()}
	case 8:
		b := make([]byte, r.IntN(20))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		// Not subtype 2: the bson package does not round-trip an empty one.
		return bson.Binary{Subtype: []byte{0, 1, 3, 4, 5, 0x80}[r.IntN(6)], Data: b}
	case 9:
		return []any{nil, bson.MinKey{}, bson.MaxKey{}, bson.Regex{Pattern: "p", Options: "i"}}[r.IntN(4)]
	case 10:
		return randDoc(r, depth+1)
	default:
		a := bson.A{}
		for range r.IntN(4) {
			a = append(a, randValue(r, depth+1))
		}
		return a
	}
}

func randDoc(r *rand.Rand, depth int) bson.D {
	d := bson.D{}
	for i := range r.IntN(4) {
		d = append(d, bson.E{Key: string(rune('a' + i)), Value: randValue(r, depth)})
	}
	return d
}

func randToken(r *rand.Rand, version int) Token {
	t := Token{
		ClusterTime: bson.Timestamp{T: uint32(r.IntN(4)), I: uint32(r.IntN(4))},
		Version:     version,
		TokenType:   TypeEvent,
	}
	if version >= 1 && r.IntN(3) == 0 {
		t.TokenType = TypeHighWaterMark
		return t
	}
	t.TxnOpIndex = r.IntN(3)
	if version >= 1 {
		t.FromInvalidate = r.IntN(4) == 0
	}
	if version < 2 || r.IntN(4) != 0 {
		t.UUID = make([]byte, 16)
		t.UUID[r.IntN(16)] = byte(r.IntN(3))
	}
	key := bson.D{{Key: "_id", Value: randValue(r, 0)}}
	switch {
	case version < 2:
		t.EventIdentifier = key
	case r.IntN(3) == 0:
		t.EventIdentifier = bson.D{{Key: "operationType", Value: "create"}, {Key: "operationDescription", Value: randDoc(r, 0)}}
	default:
		t.EventIdentifier = bson.D{{Key: "operationType", Value: "update"}, {Key: "documentKey", Value: key}}
	}
	if version == 2 && r.IntN(5) == 0 {
		f := r.IntN(5)
		t.FragmentNum = &f
	}
	return t
}

func TestPropertyRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		tok := randToken(r, r.IntN(3))
		if err := tok.Validate(); err != nil {
			t.Fatalf("#%d: generated token invalid: %v\n%+v", i, err, tok)
		}
		data, tb := tok.Encode()
		if strings.ToUpper(data) != data {
			t.Fatalf("#%d: _data not upper case: %s", i, data)
		}
		got, err := Decode(data, tb)
		if err != nil {
			t.Fatalf("#%d: Decode: %v\n%+v\n%s %x", i, err, tok, data, tb)
		}
		if !reflect.DeepEqual(got, tok) {
			t.Fatalf("#%d: round trip:\n got %+v\nwant %+v", i, got, tok)
		}
	}
}

// tupleCompare orders the fixed fields of two tokens of one version; it
// returns 0 when the order depends on the event identifier.
func tupleCompare(a, b Token) int {
	uuidKey := func(t Token) string {
		if t.UUID == nil {
			return "" // null sorts before BinData
		}
		return "\x01" + string(t.UUID)
	}
	return cmp.Or(
		cmp.Compare(a.ClusterTime.T, b.ClusterTime.T),
		cmp.Compare(a.ClusterTime.I, b.ClusterTime.I),
		cmp.Compare(a.TokenType, b.TokenType),
		cmp.Compare(a.TxnOpIndex, b.TxnOpIndex),
		boolCompare(a.FromInvalidate, b.FromInvalidate),
		strings.Compare(uuidKey(a), uuidKey(b)),
	)
}

func boolCompare(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

func TestPropertyCompare(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	checked := 0
	for range 5000 {
		v := 1 + r.IntN(2)
		a, b := randToken(r, v), randToken(r, v)
		want := tupleCompare(a, b)
		got := Compare(a, b)
		if got != -Compare(b, a) {
			t.Fatalf("Compare not antisymmetric")
		}
		if want == 0 {
			continue
		}
		checked++
		if got != want {
			da, _ := a.Encode()
			db, _ := b.Encode()
			t.Fatalf("Compare = %d, want %d\n%+v\n%+v\n%s\n%s", got, want, a, b, da, db)
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d comparisons checked", checked)
	}
}

// numRat returns the exact value of a number (nil for NaN), with ±Inf as
// ±2**2000.
func numRat(v any) *big.Rat {
	switch x := v.(type) {
	case int32:
		return new(big.Rat).SetInt64(int64(x))
	case int64:
		return new(big.Rat).SetInt64(x)
	case float64:
		if math.IsNaN(x) {
			return nil
		}
		if math.IsInf(x, 0) {
			r := new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(1), 2000))
			if x < 0 {
				r.Neg(r)
			}
			return r
		}
		return new(big.Rat).SetFloat64(x)
	case bson.Decimal128:
		c, e, err := x.BigInt()
		if err != nil {
			return nil
		}
		r := new(big.Rat).SetInt(c)
		p := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(e))), nil))
		if e >= 0 {
			return r.Mul(r, p)
		}
		return r.Quo(r, p)
	}
	panic("not a number")
}

// TestNumericOrder checks that KeyString preserves numeric order across
// types: the token of {_id: x} sorts like x.
func TestNumericOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	mk := func(v any) Token {
		return Token{Version: 1, TokenType: TypeEvent, UUID: testUUID, EventIdentifier: bson.D{{Key: "_id", Value: v}}}
	}
	for range 20000 {
		x, y := randNumber(r), randNumber(r)
		rx, ry := numRat(x), numRat(y)
		if rx == nil || ry == nil {
			continue
		}
		if got, want := Compare(mk(x), mk(y)), rx.Cmp(ry); got != want {
			dx, _ := mk(x).Encode()
			dy, _ := mk(y).Encode()
			t.Fatalf("Compare(%v (%T), %v (%T)) = %d, want %d\n%s\n%s", x, x, y, y, got, want, dx, dy)
		}
	}
}

func TestStringOrder(t *testing.T) {
	mk := func(s string) Token {
		return Token{Version: 1, TokenType: TypeEvent, UUID: testUUID, EventIdentifier: bson.D{{Key: "_id", Value: s}}}
	}
	strs := []string{"", "\x00", "\x00\x00", "\x01", "a", "a\x00", "a\x00b", "a\x01", "ab", "b", "\xff"}
	for i := range strs {
		for j := range strs {
			if got, want := Compare(mk(strs[i]), mk(strs[j])), strings.Compare(strs[i], strs[j]); got != want {
				t.Errorf("Compare(%q, %q) = %d, want %d", strs[i], strs[j], got, want)
			}
		}
	}
}
