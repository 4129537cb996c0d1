package resumetoken

import (
	"encoding/binary"
	"math"
	"math/bits"
)

var (
	// tiniestDoubleWith2BitDCM is 2**-255: smaller magnitudes are scaled.
	tiniestDoubleWith2BitDCM = math.Ldexp(1, -255)
	tinyUpshift              = math.Ldexp(1, 256)
	tinyDownshift            = math.Ldexp(1, -256)
	minLargeDouble           = math.Ldexp(1, 63)
	pow256                   = [8]float64{1, 1 << 8, 1 << 16, 1 << 24, 1 << 32, 1 << 40, 1 << 48, 1 << 56}
)

func appendU64BE(dst []byte, v uint64, invert bool) []byte {
	if invert {
		v = ^v
	}
	return binary.BigEndian.AppendUint64(dst, v)
}

// appendInteger encodes an int32 or int64 value (type bits are the caller's).
func appendInteger(dst []byte, n int64) []byte {
	if n == math.MinInt64 {
		// -2**63 has no positive int64 magnitude; it is encoded as a double.
		return appendLargeDouble(dst, float64(n))
	}
	if n == 0 {
		return append(dst, ctNumericZero)
	}
	neg := n < 0
	mag := uint64(n)
	if neg {
		mag = uint64(-n)
	}
	return appendPreshifted(dst, mag<<1, neg)
}

// appendPreshifted writes an integer part already shifted left by one (the
// low bit says whether a fraction follows), in the fewest big-endian bytes.
func appendPreshifted(dst []byte, v uint64, neg bool) []byte {
	n := (64 - bits.LeadingZeros64(v) + 7) / 8
	if neg {
		dst = append(dst, byte(ctNegative1ByteInt-(n-1)))
		v = ^v
	} else {
		dst = append(dst, byte(ctPositive1ByteInt+(n-1)))
	}
	for i := n - 1; i >= 0; i-- {
		dst = append(dst, byte(v>>(8*i)))
	}
	return dst
}

// appendDouble encodes a double (type bits are the caller's), with the
// decimal continuation marker "equal to double".
func appendDouble(dst []byte, num float64) []byte {
	neg := num < 0
	mag := math.Abs(num)
	if !(mag >= 1.0) {
		switch {
		case mag > 0:
			return appendSmallDouble(dst, num)
		case num == 0:
			return append(dst, ctNumericZero)
		default: // NaN
			return append(dst, ctNumericNaN)
		}
	}
	if mag >= minLargeDouble {
		return appendLargeDouble(dst, num)
	}
	ip := uint64(mag)
	if float64(ip) == mag {
		return appendPreshifted(dst, ip<<1, neg)
	}
	fb := bits.LeadingZeros64(ip<<1) / 8
	if neg {
		dst = append(dst, byte(ctNegative8ByteInt+fb))
	} else {
		dst = append(dst, byte(ctPositive8ByteInt-fb))
	}
	enc := uint64(mag * pow256[fb])
	enc += (ip + 1) << (fb * 8)
	return appendU64BE(dst, enc, neg)
}

func appendSmallDouble(dst []byte, num float64) []byte {
	neg := num < 0
	mag := math.Abs(num)
	if neg {
		dst = append(dst, ctNegativeSmall)
	} else {
		dst = append(dst, ctPositiveSmall)
	}
	var enc uint64
	if mag >= tiniestDoubleWith2BitDCM {
		enc = math.Float64bits(mag) << 2 // prefix 0b11, DCM 0
	} else {
		enc = math.Float64bits(mag*tinyUpshift) << 1
		enc += 1 << 62 // prefix 0b01
	}
	return appendU64BE(dst, enc, neg)
}

func appendLargeDouble(dst []byte, num float64) []byte {
	if num > 0 {
		dst = append(dst, ctPositiveLarge)
	} else {
		dst = append(dst, ctNegativeLarge)
	}
	enc := math.Float64bits(num)
	if math.IsInf(num, 0) {
		enc = ^uint64(0)
	} else {
		enc <<= 1
		enc &^= 1 << 63
	}
	return appendU64BE(dst, enc, num < 0)
}

// readNumber decodes the numeric value whose ctype byte has been read and
// appends it to dst as a BSON element named key.
func (d *decoder) readNumber(ctype byte, dst []byte, key string) ([]byte, error) {
	switch {
	case ctype == ctNumericNaN:
		t, err := d.tb.readNumeric()
		if err != nil {
			return nil, err
		}
		switch t {
		case tbDouble:
			return appendDoubleElem(dst, key, math.NaN()), nil
		case tbDecimal:
			return appendDecimalElem(dst, key, 0x7C00000000000000, 0), nil
		}
		return nil, ksErr(50819, "Invalid type bits for numeric NaN")

	case ctype == ctNumericZero:
		z, err := d.tb.readZero()
		if err != nil {
			return nil, err
		}
		switch z {
		case tbDouble:
			return appendDoubleElem(dst, key, 0), nil
		case tbInt:
			return appendInt32Elem(dst, key, 0), nil
		case tbLong:
			return appendInt64Elem(dst, key, 0), nil
		case tbNegativeDoubleZero:
			return appendDoubleElem(dst, key, math.Copysign(0, -1)), nil
		}
		if z < tbDecimalZero0xxx || z > tbDecimalZero5xxx {
			return nil, ksErr(50846, "Invalid numeric zero decimal.")
		}
		low12, err := d.tb.bits(12)
		if err != nil {
			return nil, err
		}
		which := uint32(z-tbDecimalZero0xxx)<<12 | low12
		neg := which > decMaxBiasedExponent
		exp := which
		if neg {
			exp -= decMaxBiasedExponent + 1
		}
		hi := uint64(exp) << 49
		if neg {
			hi |= 1 << 63
		}
		return appendDecimalElem(dst, key, hi, 0), nil

	case ctype == ctNegativeLarge || ctype == ctPositiveLarge:
		neg := ctype == ctNegativeLarge
		t, err := d.tb.readNumeric()
		if err != nil {
			return nil, err
		}
		enc, err := d.u64(neg)
		if err != nil {
			return nil, err
		}
		var bin float64
		hasContinuation := false
		switch {
		case enc&(1<<63) == 0:
			hasContinuation = enc&1 != 0
			bin = math.Float64frombits(enc>>1 | 1<<62)
			if neg {
				bin = -bin
			}
		case enc == ^uint64(0):
			bin = math.Inf(1)
			if neg {
				bin = math.Inf(-1)
			}
		default:
			if t != tbDecimal {
				return nil, ksErr(50818, "Invalid type bits for decimal number.")
			}
			return nil, newErr(codeUnsupported, "decimal128 values outside the double range are not supported")
		}
		switch t {
		case tbDouble:
			return appendDoubleElem(dst, key, bin), nil
		case tbLong:
			if bin != -minLargeDouble {
				return nil, ksErr(50821, "Unexpected value for large number.")
			}
			return appendInt64Elem(dst, key, math.MinInt64), nil
		case tbDecimal:
			if math.IsInf(bin, 0) {
				return appendDecimalElem(dst, key, decInfHigh(neg), 0), nil
			}
			if hasContinuation {
				return nil, newErr(codeUnsupported, "decimal128 values with a decimal continuation are not supported")
			}
			return d.exactDecimal(dst, key, bin)
		}
		return nil, ksErr(50826, "Unexpected type of large number.")

	case ctype == ctNegativeSmall || ctype == ctPositiveSmall:
		neg := ctype == ctNegativeSmall
		t, err := d.tb.readNumeric()
		if err != nil {
			return nil, err
		}
		enc, err := d.u64(neg)
		if err != nil {
			return nil, err
		}
		sign := func(f float64) float64 {
			if neg {
				return -f
			}
			return f
		}
		switch enc >> 62 {
		case 0:
			return nil, newErr(codeUnsupported, "decimal128 values below the double range are not supported")
		case 1, 2:
			hasContinuation := enc&1 != 0
			scaled := math.Float64frombits((enc - 1<<62) >> 1)
			if t == tbDouble {
				if hasContinuation {
					return nil, ksErr(50822, "Unexpected decimal continuation.")
				}
				return appendDoubleElem(dst, key, sign(scaled*tinyDownshift)), nil
			}
			if t != tbDecimal || !hasContinuation {
				return nil, ksErr(50823, "Expected decimal continuation.")
			}
			return nil, newErr(codeUnsupported, "decimal128 values with a decimal continuation are not supported")
		default:
			dcm := enc & 3
			bin := math.Float64frombits(enc >> 2)
			if t == tbDouble {
				if dcm != 0 {
					return nil, ksErr(50824, "Decimal contuation mismatch.")
				}
				return appendDoubleElem(dst, key, sign(bin)), nil
			}
			if t != tbDecimal {
				return nil, ksErr(50825, "Unexpected type for small number, expected decimal.")
			}
			if dcm != 0 {
				return nil, newErr(codeUnsupported, "decimal128 values not exactly equal to a double are not supported")
			}
			return d.exactDecimal(dst, key, sign(bin))
		}

	default: // 1- to 8-byte integers, possibly with a fraction
		neg := ctype <= ctNegative1ByteInt
		var n int
		if neg {
			n = int(ctNegative1ByteInt-ctype) + 1
		} else {
			n = int(ctype-ctPositive1ByteInt) + 1
		}
		t, err := d.tb.readNumeric()
		if err != nil {
			return nil, err
		}
		var encInt uint64
		for range n {
			b, err := d.byte1()
			if err != nil {
				return nil, err
			}
			if neg {
				b = ^b
			}
			encInt = encInt<<8 | uint64(b)
		}
		ip := int64(encInt >> 1)
		if encInt&1 == 0 {
			if neg {
				ip = -ip
			}
			switch t {
			case tbDouble:
				return appendDoubleElem(dst, key, float64(ip)), nil
			case tbInt:
				return appendInt32Elem(dst, key, int32(ip)), nil // truncates, like the server
			case tbLong:
				return appendInt64Elem(dst, key, ip), nil
			default:
				return d.exactDecimal(dst, key, float64(ip))
			}
		}
		fracBytes := 8 - n
		encFrac := uint64(ip)
		for range fracBytes {
			b, err := d.byte1()
			if err != nil {
				return nil, err
			}
			if neg {
				b = ^b
			}
			encFrac = encFrac<<8 | uint64(b)
		}
		bin := float64(encFrac&^3) / pow256[fracBytes]
		if neg {
			bin = -bin
		}
		switch t {
		case tbDouble:
			return appendDoubleElem(dst, key, bin), nil
		case tbDecimal:
			if fracBytes == 0 || encFrac&3 != 0 {
				return nil, newErr(codeUnsupported, "decimal128 values not exactly equal to a double are not supported")
			}
			return d.exactDecimal(dst, key, bin)
		}
		return nil, ksErr(50810, "Expected type Decimal.")
	}
}
