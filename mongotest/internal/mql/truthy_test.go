package mql

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func TestTruthy(t *testing.T) {
	dec := func(s string) bson.Decimal128 {
		d, err := bson.ParseDecimal128(s)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	falsy := []any{nil, missingT{}, bson.Null{}, bson.Undefined{}, false, int32(0), int64(0), 0, 0.0,
		dec("0"), dec("-0"), dec("0.000")}
	truthy := []any{true, int32(1), int64(-1), 2, 0.5, dec("1"), dec("-0.01"), "", "false", bson.D{}, bson.A{},
		bson.ObjectID{}, bson.Binary{}}
	for _, v := range falsy {
		if Truthy(v) {
			t.Errorf("Truthy(%#v) = true, want false", v)
		}
	}
	for _, v := range truthy {
		if !Truthy(v) {
			t.Errorf("Truthy(%#v) = false, want true", v)
		}
	}
}
