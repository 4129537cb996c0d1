package wire

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongotest/internal/specdata"
)

// More documents for the decoder's differential tests: random ones of
// every BSON type, MongoDB's unified spec test files as BSON, and every
// one-byte corruption of them.

// genDoc returns a random document: up to 8 fields of random types,
// nested up to depth levels.
func genDoc(r *rand.Rand, depth int) bson.D {
	d := make(bson.D, r.IntN(9))
	for i := range d {
		d[i] = bson.E{Key: genKey(r), Value: genValue(r, depth)}
	}
	return d
}

func genKey(r *rand.Rand) string {
	switch r.IntN(8) {
	case 0:
		return ""
	case 1:
		return "$" + cstring(genString(r, 6))
	case 2:
		return "dup" // repeated keys stay in order, repeated
	}
	return cstring(genString(r, 10))
}

// cstring replaces the NULs of s, which keys and regexes cannot hold.
func cstring(s string) string {
	b := []byte(s)
	for i := range b {
		if b[i] == 0 {
			b[i] = '.'
		}
	}
	return string(b)
}

// genString returns up to n random characters: ASCII, NUL, multi-byte
// UTF-8, or (rarely) bytes that are not UTF-8 at all.
func genString(r *rand.Rand, n int) string {
	var b []byte
	for range r.IntN(n + 1) {
		switch r.IntN(10) {
		case 0:
			b = append(b, 0)
		case 1:
			b = append(b, []string{"é", "世", "😀"}[r.IntN(3)]...)
		case 2:
			b = append(b, byte(0x80+r.IntN(0x80)))
		default:
			b = append(b, byte(' '+r.IntN(95)))
		}
	}
	return string(b)
}

func genBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, r.IntN(n+1))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

var regexOptions = []string{"", "i", "imsx", "xmi", "u", "lmsux"}

func genValue(r *rand.Rand, depth int) any {
	kinds := 24
	if depth <= 0 {
		kinds = 21 // no documents, arrays or code with scope
	}
	switch r.IntN(kinds) {
	case 0:
		return math.Float64frombits(r.Uint64()) // NaNs with payloads, -0, denormals
	case 1:
		return []float64{0, math.Copysign(0, -1), math.Inf(1), math.MaxFloat64, math.SmallestNonzeroFloat64, 1 << 53}[r.IntN(6)]
	case 2:
		return genString(r, 20)
	case 3:
		var bin bson.Binary
		bin.Subtype = []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 0x80, 0xff}[r.IntN(11)]
		bin.Data = genBytes(r, 20)
		return bin
	case 4:
		return bson.Undefined{}
	case 5:
		var id bson.ObjectID
		copy(id[:], genBytes(r, 12))
		return id
	case 6:
		return r.IntN(2) == 1
	case 7:
		return bson.DateTime(int64(r.Uint64()))
	case 8:
		return nil
	case 9:
		return bson.Regex{Pattern: cstring(genString(r, 8)), Options: regexOptions[r.IntN(len(regexOptions))]}
	case 10:
		return bson.DBPointer{DB: "db.c", Pointer: bson.ObjectID{1}}
	case 11:
		return bson.JavaScript(genString(r, 20))
	case 12:
		return bson.Symbol(genString(r, 8))
	case 13:
		return int32(r.Uint32())
	case 14:
		return []int32{0, -1, math.MinInt32, math.MaxInt32}[r.IntN(4)]
	case 15:
		return bson.Timestamp{T: r.Uint32(), I: r.Uint32()}
	case 16:
		return int64(r.Uint64())
	case 17:
		return []int64{0, -1, math.MinInt64, math.MaxInt64}[r.IntN(4)]
	case 18:
		return bson.NewDecimal128(r.Uint64(), r.Uint64())
	case 19:
		return bson.MinKey{}
	case 20:
		return bson.MaxKey{}
	case 21, 22:
		if r.IntN(2) == 0 {
			return genDoc(r, depth-1)
		}
		a := make(bson.A, r.IntN(6))
		for i := range a {
			a[i] = genValue(r, depth-1)
		}
		return a
	}
	return bson.CodeWithScope{Code: bson.JavaScript(genString(r, 10)), Scope: genDoc(r, 0)}
}

// genDocs returns n random documents, the same ones every run.
func genDocs(t testing.TB, n int) [][]byte {
	r := rand.New(rand.NewPCG(15, 5))
	out := make([][]byte, 0, n)
	for len(out) < n {
		out = append(out, mustDoc(t, genDoc(r, 4)))
	}
	return out
}

// specDocs returns MongoDB's unified test files as BSON documents (each a
// large document of commands, data and expected replies in Extended JSON):
// the files of specdata.Root and of its folders. None when there are none.
func specDocs(t testing.TB) [][]byte {
	specOnce.Do(func() { specDocsRead, specDocsErr = readSpecDocs() })
	if specDocsErr != nil {
		t.Fatal(specDocsErr)
	}
	return specDocsRead
}

var (
	specOnce     sync.Once
	specDocsRead [][]byte
	specDocsErr  error
)

func readSpecDocs() ([][]byte, error) {
	dir := specdata.Root()
	if dir == "" {
		return nil, nil
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	more, _ := filepath.Glob(filepath.Join(dir, "*", "*.json"))
	var out [][]byte
	for _, path := range append(files, more...) {
		js, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var d bson.D
		if err := bson.UnmarshalExtJSON(js, false, &d); err != nil {
			continue // not every spec file is one Extended JSON document
		}
		raw, err := bson.Marshal(d)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, raw)
	}
	return out, nil
}

// checkDecode is FuzzDecodeDoc's body: on a document the wire validator
// accepts, decodeD builds what bson.Unmarshal builds; on anything else
// decodeDoc does not panic.
func checkDecode(t *testing.T, raw []byte) {
	t.Helper()
	if validateDoc(raw) != nil {
		_, _ = decodeDoc(raw)
		return
	}
	sameAsUnmarshal(t, raw)
}

func TestDecodeGeneratedDocs(t *testing.T) {
	fell := 0
	for _, raw := range genDocs(t, 3000) {
		if validateDoc(raw) != nil {
			t.Fatalf("a generated document is not valid BSON: %x", raw)
		}
		sameAsUnmarshal(t, raw)
		if _, ok := decodeDoc(raw); !ok {
			fell++
		}
	}
	// Code with scope and DBPointer send a document to bson.Unmarshal;
	// most generated documents hold neither.
	if fell > 1500 {
		t.Errorf("%d of 3000 generated documents fell back to bson.Unmarshal", fell)
	}
}

func TestDecodeSpecDocs(t *testing.T) {
	docs := specDocs(t)
	if len(docs) == 0 {
		specdata.Missing(t, "")
	}
	for _, raw := range docs {
		sameAsUnmarshal(t, raw)
		if _, ok := decodeDoc(raw); !ok {
			t.Errorf("decodeDoc fell back to bson.Unmarshal on a spec file of %d bytes", len(raw))
		}
	}
}

// Every document with one byte changed (to 0, or with its low or high bit
// flipped) and every prefix of it: whatever the validator accepts decodes
// as bson.Unmarshal decodes it, the rest does not panic.
func TestDecodeCorruptedDocs(t *testing.T) {
	docs := append(decodeCases(t), genDocs(t, 20)...)
	valid := 0
	for _, doc := range docs {
		b := make([]byte, len(doc))
		for i := range doc {
			for _, v := range []byte{0, doc[i] ^ 1, doc[i] ^ 0x80} {
				copy(b, doc)
				b[i] = v
				if validateDoc(b) == nil {
					valid++
				}
				checkDecode(t, b)
			}
			checkDecode(t, doc[:i])
		}
	}
	if valid == 0 {
		t.Fatal("no corrupted document was still valid BSON: the test compared nothing")
	}
}
