package resumetoken

import (
	"encoding/binary"

	"github.com/ferry-io/ferry/mongoerr"
)

// KeyString type bits: the information that KeyString drops to keep equal
// values of different BSON types comparing equal (int32 5, int64 5 and double
// 5.0 share one encoding). Bits are packed from the low bit of each byte up.
//
// Per value: string 0 / symbol 1 (one bit); number int32 00, int64 01,
// double 10, decimal 11 + 6 exponent bits (two bits, high first); zero as a
// number, except -0.0 (11000) and decimal zeros (11010..11111 + 12 bits).
const (
	tbInt     = 0
	tbLong    = 1
	tbDouble  = 2
	tbDecimal = 3

	tbSpecialZeroPrefix  = 3
	tbV1NegativeDouble0  = 0x18
	tbDecimalZero0xxx    = 0x1a
	tbDecimalZero5xxx    = 0x1f
	tbNegativeDoubleZero = 0xff // internal marker returned by readZero

	tbMaxShortBytes        = 127
	tbStoredDecimalExpBits = 6
)

type typeBitsWriter struct {
	data    []byte
	nbits   int
	nonZero bool
}

func (w *typeBitsWriter) bit(b uint8) {
	if w.nbits%8 == 0 {
		w.data = append(w.data, 0)
	}
	if b != 0 {
		w.data[len(w.data)-1] |= 1 << (w.nbits % 8)
		w.nonZero = true
	}
	w.nbits++
}

func (w *typeBitsWriter) bits(v uint32, n int) {
	for i := n - 1; i >= 0; i-- {
		w.bit(uint8(v>>i) & 1)
	}
}

// encoded returns the serialized type bits, or nil when every bit is zero.
func (w *typeBitsWriter) encoded() []byte {
	if !w.nonZero {
		return nil
	}
	n := len(w.data)
	switch {
	case n == 1 && w.data[0]&0x80 == 0:
		return []byte{w.data[0]}
	case n <= tbMaxShortBytes:
		return append([]byte{0x80 | byte(n)}, w.data...)
	default:
		out := []byte{0x80, 0, 0, 0, 0}
		binary.LittleEndian.PutUint32(out[1:], uint32(n))
		return append(out, w.data...)
	}
}

type typeBitsReader struct {
	data    []byte
	cur     int
	allZero bool
}

// newTypeBitsReader parses serialized type bits; empty means all zeros.
func newTypeBitsReader(b []byte) (*typeBitsReader, error) {
	if len(b) == 0 || b[0] == 0 {
		return &typeBitsReader{allZero: true}, nil
	}
	first := b[0]
	switch {
	case first < 0x80:
		return &typeBitsReader{data: b[:1]}, nil
	case first > 0x80:
		n := int(first & 0x7f)
		if len(b)-1 < n {
			return nil, ksErr(mongoerr.CodeOverflow, "type bits declare %d bytes, have %d", n, len(b)-1)
		}
		return &typeBitsReader{data: b[1 : 1+n]}, nil
	default:
		if len(b) < 5 {
			return nil, ksErr(mongoerr.CodeOverflow, "truncated long type bits size")
		}
		n := binary.LittleEndian.Uint32(b[1:])
		if n <= tbMaxShortBytes {
			return nil, ksErr(50910, "Invalid overlong encoding.")
		}
		if uint64(len(b)-5) < uint64(n) {
			return nil, ksErr(mongoerr.CodeOverflow, "type bits declare %d bytes, have %d", n, len(b)-5)
		}
		return &typeBitsReader{data: b[5 : 5+int(n)]}, nil
	}
}

func (r *typeBitsReader) bit() (uint8, error) {
	if r.allZero {
		return 0, nil
	}
	i := r.cur / 8
	if i >= len(r.data) {
		return 0, ksErr(50615, "Invalid size byte(s).")
	}
	b := (r.data[i] >> (r.cur % 8)) & 1
	r.cur++
	return b, nil
}

func (r *typeBitsReader) bits(n int) (uint32, error) {
	var v uint32
	for range n {
		b, err := r.bit()
		if err != nil {
			return 0, err
		}
		v = v<<1 | uint32(b)
	}
	return v, nil
}

func (r *typeBitsReader) readNumeric() (uint8, error) {
	v, err := r.bits(2)
	return uint8(v), err
}

// readZero returns tbInt, tbLong, tbDouble, tbNegativeDoubleZero or a
// decimal-zero prefix (tbDecimalZero0xxx..tbDecimalZero5xxx, or the unused
// 0x19).
func (r *typeBitsReader) readZero() (uint8, error) {
	v, err := r.readNumeric()
	if err != nil || v != tbSpecialZeroPrefix {
		return v, err
	}
	rest, err := r.bits(3)
	if err != nil {
		return 0, err
	}
	v = v<<3 | uint8(rest)
	if v == tbV1NegativeDouble0 {
		return tbNegativeDoubleZero, nil
	}
	return v, nil
}
