package resumetoken

// KeyString V1 canonical type bytes (src/mongo/db/storage/key_string).
// Values 0-9 and 246-255 are reserved for value encodings.
const (
	ctMinKey        = 10
	ctUndefined     = 15
	ctNullish       = 20
	ctNumeric       = 30
	ctStringLike    = 60
	ctObject        = 70
	ctArray         = 80
	ctBinData       = 90
	ctOID           = 100
	ctBoolFalse     = 110
	ctBoolTrue      = 111
	ctDate          = 120
	ctTimestamp     = 130
	ctRegEx         = 140
	ctDBRef         = 150
	ctCode          = 160
	ctCodeWithScope = 170
	ctMaxKey        = 240

	ctNumericNaN            = ctNumeric + 0
	ctNegativeLarge         = ctNumeric + 1 // <= -2**63, including -Inf
	ctNegative8ByteInt      = ctNumeric + 2
	ctNegative1ByteInt      = ctNumeric + 9
	ctNegativeSmall         = ctNumeric + 10 // (-1, 0)
	ctNumericZero           = ctNumeric + 11
	ctPositiveSmall         = ctNumeric + 12 // (0, 1)
	ctPositive1ByteInt      = ctNumeric + 13
	ctPositive8ByteInt      = ctNumeric + 20
	ctPositiveLarge         = ctNumeric + 21 // >= 2**63, including +Inf
	ksEnd              byte = 4              // end of key (inclusive discriminator)
	ksLess             byte = 1              // exclusive-before discriminator
	ksGreater          byte = 254            // exclusive-after discriminator
)

// BSON type bytes.
const (
	bsonDouble        = 0x01
	bsonString        = 0x02
	bsonDocument      = 0x03
	bsonArray         = 0x04
	bsonBinary        = 0x05
	bsonUndefined     = 0x06
	bsonObjectID      = 0x07
	bsonBool          = 0x08
	bsonDateTime      = 0x09
	bsonNull          = 0x0A
	bsonRegex         = 0x0B
	bsonDBPointer     = 0x0C
	bsonJavaScript    = 0x0D
	bsonSymbol        = 0x0E
	bsonCodeWithScope = 0x0F
	bsonInt32         = 0x10
	bsonTimestamp     = 0x11
	bsonInt64         = 0x12
	bsonDecimal128    = 0x13
	bsonMinKey        = 0xFF
	bsonMaxKey        = 0x7F
)

// genericCType is the type byte written before a field name inside an
// object: one value per BSON type, so fields order by (type, name, value).
func genericCType(t byte) (byte, bool) {
	switch t {
	case bsonMinKey:
		return ctMinKey, true
	case bsonNull:
		return ctNullish, true
	case bsonUndefined:
		return ctUndefined, true
	case bsonDouble, bsonInt32, bsonInt64, bsonDecimal128:
		return ctNumeric, true
	case bsonString, bsonSymbol:
		return ctStringLike, true
	case bsonDocument:
		return ctObject, true
	case bsonArray:
		return ctArray, true
	case bsonBinary:
		return ctBinData, true
	case bsonObjectID:
		return ctOID, true
	case bsonBool:
		return ctBoolFalse, true
	case bsonDateTime:
		return ctDate, true
	case bsonTimestamp:
		return ctTimestamp, true
	case bsonRegex:
		return ctRegEx, true
	case bsonDBPointer:
		return ctDBRef, true
	case bsonJavaScript:
		return ctCode, true
	case bsonCodeWithScope:
		return ctCodeWithScope, true
	case bsonMaxKey:
		return ctMaxKey, true
	}
	return 0, false
}
