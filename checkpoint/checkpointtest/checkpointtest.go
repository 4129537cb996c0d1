// Package checkpointtest is the one contract test suite every
// checkpoint.Store must pass. A store's tests call Run with a constructor
// that returns a new, empty store for each subtest:
//
//	func TestContract(t *testing.T) {
//		checkpointtest.Run(t, func(t *testing.T) checkpoint.Store { ... })
//	}
//
// Stores that also keep operators' snapshot requests
// (checkpoint.SnapshotRequests) run RunSnapshotRequests the same way.
//
// The suite closes every store it is given. Run it with -race: one subtest
// saves from many goroutines at once.
package checkpointtest

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/checkpoint"
)

// Run runs the contract suite. newStore must return an empty store each
// time it is called.
func Run(t *testing.T, newStore func(t *testing.T) checkpoint.Store) {
	// The suite closes each store when its subtest ends; the Close subtest
	// has closed it already, so this also checks that Close is idempotent.
	open := func(t *testing.T) checkpoint.Store {
		t.Helper()
		s := newStore(t)
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		return s
	}
	tests := []struct {
		name string
		fn   func(*testing.T, checkpoint.Store)
	}{
		{"LoadMissing", testLoadMissing},
		{"FirstSave", testFirstSave},
		{"SuccessiveSaves", testSuccessiveSaves},
		{"StaleVersionFenced", testStaleVersion},
		{"LowerEpochFenced", testLowerEpoch},
		{"HigherEpochTakesOver", testHigherEpoch},
		{"TokenByteExact", testTokenByteExact},
		{"FieldsRoundTrip", testFieldsRoundTrip},
		{"SnapshotProgress", testSnapshotProgress},
		{"SnapshotProgressFenced", testSnapshotProgressFenced},
		{"List", testList},
		{"Delete", testDelete},
		{"ConcurrentSaves", testConcurrentSaves},
		{"InvalidInput", testInvalidInput},
		{"CancelledContext", testCancelledContext},
		{"Close", testClose},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

// tokenDoc builds a resume-token-like document with the given fields in the
// given order.
func tokenDoc(t *testing.T, d bson.D) bson.Raw {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatalf("marshal token: %v", err)
	}
	return b
}

func token(t *testing.T, data string) bson.Raw {
	return tokenDoc(t, bson.D{{Key: "_data", Value: data}})
}

func base(t *testing.T, stream string, partition int) checkpoint.Checkpoint {
	return checkpoint.Checkpoint{
		Stream:    stream,
		Partition: partition,
		Token:     token(t, "8265A1B2C3000000012B042C0100296E5A1004"),
		Epoch:     1,
		Identity:  "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
	}
}

func mustSave(t *testing.T, s checkpoint.Store, cp checkpoint.Checkpoint) checkpoint.Checkpoint {
	t.Helper()
	got, err := s.Save(t.Context(), cp)
	if err != nil {
		t.Fatalf("Save(%s/%d version %d epoch %d): %v", cp.Stream, cp.Partition, cp.Version, cp.Epoch, err)
	}
	if got.Version != cp.Version+1 {
		t.Fatalf("Save returned version %d, want %d", got.Version, cp.Version+1)
	}
	if got.UpdatedAt.IsZero() {
		t.Fatal("Save returned a zero UpdatedAt")
	}
	return got
}

func mustLoad(t *testing.T, s checkpoint.Store, stream string, partition int) checkpoint.Checkpoint {
	t.Helper()
	got, err := s.Load(t.Context(), stream, partition)
	if err != nil {
		t.Fatalf("Load(%s/%d): %v", stream, partition, err)
	}
	return got
}

// diff describes how a and b differ ("" when they are the same checkpoint).
// Tokens and definitions are compared byte for byte, times as instants.
func diff(a, b checkpoint.Checkpoint) string {
	var d []string
	add := func(field string, ok bool) {
		if !ok {
			d = append(d, field)
		}
	}
	add("Stream", a.Stream == b.Stream)
	add("Partition", a.Partition == b.Partition)
	add("Token", bytes.Equal(a.Token, b.Token))
	add("Version", a.Version == b.Version)
	add("Epoch", a.Epoch == b.Epoch)
	add("Identity", a.Identity == b.Identity)
	add("Definition", bytes.Equal(a.Definition, b.Definition))
	add("ClusterTime", a.ClusterTime == b.ClusterTime)
	add("Pending", a.Pending == b.Pending)
	add("ReadDelay", a.ReadDelay == b.ReadDelay)
	add("Snapshot", bytes.Equal(a.Snapshot, b.Snapshot) && (a.Snapshot == nil) == (b.Snapshot == nil))
	add("State", a.State == b.State)
	add("Note", a.Note == b.Note)
	add("UpdatedAt", a.UpdatedAt.Equal(b.UpdatedAt))
	if len(d) == 0 {
		return ""
	}
	return "fields differ: " + strings.Join(d, ", ")
}

func same(t *testing.T, what string, got, want checkpoint.Checkpoint) {
	t.Helper()
	if d := diff(got, want); d != "" {
		t.Fatalf("%s: %s\n got: %+v\nwant: %+v", what, d, got, want)
	}
}

// fenced asserts that err is a *checkpoint.FenceError matching ErrFenced
// with the given stored values.
func fenced(t *testing.T, err error, storedVersion, storedEpoch int64) *checkpoint.FenceError {
	t.Helper()
	if !errors.Is(err, checkpoint.ErrFenced) {
		t.Fatalf("err = %v, want one matching ErrFenced", err)
	}
	var fe *checkpoint.FenceError
	if !errors.As(err, &fe) {
		t.Fatalf("err = %v (%T), want a *checkpoint.FenceError", err, err)
	}
	if fe.StoredVersion != storedVersion || fe.StoredEpoch != storedEpoch {
		t.Fatalf("FenceError reports stored version %d epoch %d, want %d and %d (%v)",
			fe.StoredVersion, fe.StoredEpoch, storedVersion, storedEpoch, err)
	}
	return fe
}

func testLoadMissing(t *testing.T, s checkpoint.Store) {
	_, err := s.Load(t.Context(), "orders", 0)
	if !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("Load of a missing checkpoint: err = %v, want ErrNotFound", err)
	}
	mustSave(t, s, base(t, "orders", 0))
	for _, k := range []struct {
		stream    string
		partition int
	}{{"orders", 1}, {"order", 0}, {"orders2", 0}} {
		if _, err := s.Load(t.Context(), k.stream, k.partition); !errors.Is(err, checkpoint.ErrNotFound) {
			t.Fatalf("Load(%s/%d) next to a stored orders/0: err = %v, want ErrNotFound", k.stream, k.partition, err)
		}
	}
}

func testFirstSave(t *testing.T, s checkpoint.Store) {
	cp := base(t, "orders", 3)
	cp.Epoch = 7
	cp.UpdatedAt = time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC) // ignored: the store sets it
	got := mustSave(t, s, cp)
	if got.Version != 1 {
		t.Fatalf("first Save returned version %d, want 1", got.Version)
	}
	if got.UpdatedAt.Equal(cp.UpdatedAt) {
		t.Fatal("Save kept the caller's UpdatedAt; the store must set it")
	}
	want := cp
	want.Version = 1
	want.UpdatedAt = got.UpdatedAt
	same(t, "Save result", got, want)
	same(t, "Load after Save", mustLoad(t, s, "orders", 3), got)
}

func testSuccessiveSaves(t *testing.T, s checkpoint.Store) {
	cp := mustSave(t, s, base(t, "orders", 0))
	for i := 2; i <= 5; i++ {
		cp.Token = token(t, strings.Repeat("A", i))
		cp = mustSave(t, s, cp)
		if cp.Version != int64(i) {
			t.Fatalf("save %d returned version %d", i, cp.Version)
		}
		same(t, "Load", mustLoad(t, s, "orders", 0), cp)
	}
}

func testStaleVersion(t *testing.T, s checkpoint.Store) {
	v1 := mustSave(t, s, base(t, "orders", 0))
	v2 := mustSave(t, s, v1)
	stale := v1
	stale.Token = token(t, "STALE")
	for _, version := range []int64{0, 1, 3, 100} {
		stale.Version = version
		_, err := s.Save(t.Context(), stale)
		fe := fenced(t, err, 2, 1)
		if fe.EpochLost() {
			t.Fatalf("version %d: EpochLost() = true for a version conflict", version)
		}
		if !strings.Contains(err.Error(), "version") {
			t.Fatalf("fence error does not say the version lost: %v", err)
		}
		same(t, "Load after a fenced Save", mustLoad(t, s, "orders", 0), v2)
	}

	// A version > 0 where nothing is stored is fenced too, and creates nothing.
	ghost := base(t, "orders", 1)
	ghost.Version = 4
	_, err := s.Save(t.Context(), ghost)
	fenced(t, err, 0, 0)
	if _, err := s.Load(t.Context(), "orders", 1); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("a fenced Save created a checkpoint: Load err = %v", err)
	}
}

func testLowerEpoch(t *testing.T, s checkpoint.Store) {
	cp := base(t, "orders", 0)
	cp.Epoch = 5
	stored := mustSave(t, s, cp)
	zombie := stored
	zombie.Epoch = 4
	zombie.Token = token(t, "ZOMBIE")
	_, err := s.Save(t.Context(), zombie)
	fe := fenced(t, err, 1, 5)
	if !fe.EpochLost() {
		t.Fatalf("EpochLost() = false for a lower epoch: %v", err)
	}
	if !strings.Contains(err.Error(), "epoch") {
		t.Fatalf("fence error does not say the epoch lost: %v", err)
	}
	same(t, "Load after a fenced Save", mustLoad(t, s, "orders", 0), stored)
}

func testHigherEpoch(t *testing.T, s checkpoint.Store) {
	old := mustSave(t, s, base(t, "orders", 0)) // epoch 1
	// Same epoch again is allowed (<=).
	old = mustSave(t, s, old)

	// A new owner loads the checkpoint and saves with its higher epoch.
	next := mustLoad(t, s, "orders", 0)
	next.Epoch = 2
	next.Token = token(t, "NEWOWNER")
	next = mustSave(t, s, next)
	if next.Epoch != 2 || next.Version != 3 {
		t.Fatalf("new owner's save stored epoch %d version %d, want 2 and 3", next.Epoch, next.Version)
	}

	// The old owner, even with the current version, is fenced by epoch.
	zombie := old
	zombie.Version = next.Version
	_, err := s.Save(t.Context(), zombie)
	if fe := fenced(t, err, 3, 2); !fe.EpochLost() {
		t.Fatalf("EpochLost() = false: %v", err)
	}
	same(t, "Load after the zombie's Save", mustLoad(t, s, "orders", 0), next)

	// The new owner goes on.
	mustSave(t, s, next)
}

func testTokenByteExact(t *testing.T, s checkpoint.Store) {
	big := make([]byte, 256<<10)
	for i := range big {
		big[i] = byte(i*7 + i>>8)
	}
	typeBits := bson.Binary{Subtype: 0, Data: []byte{0x81, 0x00, 0x7f}}
	// A hand-made document with a negative zero and a NaN double: a decode
	// and re-encode through float64 could change neither, but byte-exact
	// storage must not even have the chance.
	odd := []byte{
		0, 0, 0, 0, // length, set below
		0x01, 'z', 0, 0, 0, 0, 0, 0, 0, 0, 0x80, // -0.0
		0x01, 'n', 0, 1, 0, 0, 0, 0, 0, 0xf8, 0x7f, // a NaN payload
		0x10, 'z', 0, 1, 0, 0, 0, // duplicate key "z", now an int32
		0,
	}
	odd[0] = byte(len(odd))
	tokens := map[string]bson.Raw{
		"data only": token(t, "82665F1A2B000000022B0229296E5A1004ABCDEF0123456789ABCDEF0123456789463C5F6964003C6B65792D31000004"),
		"with _typeBits": tokenDoc(t, bson.D{
			{Key: "_data", Value: "8265A1B2C3000000012B042C0100296E5A10046F1D4C3E"},
			{Key: "_typeBits", Value: typeBits},
		}),
		"_typeBits first": tokenDoc(t, bson.D{
			{Key: "_typeBits", Value: typeBits},
			{Key: "_data", Value: "8265A1B2C3000000012B042C0100296E5A10046F1D4C3E"},
		}),
		"nested and mixed types": tokenDoc(t, bson.D{
			{Key: "z", Value: int64(1)},
			{Key: "a", Value: bson.D{{Key: "y", Value: int32(2)}, {Key: "b", Value: bson.A{1.5, "x", nil, true}}}},
			{Key: "$weird.key", Value: bson.Timestamp{T: 1, I: 2}},
		}),
		"negative zero, NaN, duplicate key": odd,
		"large": tokenDoc(t, bson.D{
			{Key: "_data", Value: strings.Repeat("8A", 4096)},
			{Key: "_typeBits", Value: bson.Binary{Subtype: 0, Data: big}},
		}),
	}
	partition := 0
	for name, tok := range tokens {
		if err := bson.Raw(tok).Validate(); err != nil {
			t.Fatalf("%s: test token is not valid BSON: %v", name, err)
		}
		cp := base(t, "tokens", partition)
		partition++
		original := bytes.Clone(tok)
		cp.Token = tok
		got := mustSave(t, s, cp)
		// The caller may reuse its buffer after Save.
		for i := range tok {
			tok[i] = 0xEE
		}
		if !bytes.Equal(got.Token, original) {
			t.Fatalf("%s: Save returned a different token (%d bytes, want %d)", name, len(got.Token), len(original))
		}
		loaded := mustLoad(t, s, cp.Stream, cp.Partition)
		if !bytes.Equal(loaded.Token, original) {
			t.Fatalf("%s: Load returned a different token (%d bytes, want %d)", name, len(loaded.Token), len(original))
		}
		// The caller may modify what Load returned without changing the store.
		for i := range loaded.Token {
			loaded.Token[i] = 0xDD
		}
		if again := mustLoad(t, s, cp.Stream, cp.Partition); !bytes.Equal(again.Token, original) {
			t.Fatalf("%s: modifying a loaded token changed the stored one", name)
		}
	}

	// A nil token ("no position yet") is stored as such and clears a token.
	cp := mustLoad(t, s, "tokens", 0)
	cp.Token = nil
	got := mustSave(t, s, cp)
	if got.Token != nil {
		t.Fatalf("Save of a nil token returned %x", []byte(got.Token))
	}
	if loaded := mustLoad(t, s, "tokens", 0); loaded.Token != nil {
		t.Fatalf("Load after saving a nil token returned %x", []byte(loaded.Token))
	}
	fresh := base(t, "tokens", 100)
	fresh.Token = nil
	mustSave(t, s, fresh)
	if loaded := mustLoad(t, s, "tokens", 100); loaded.Token != nil {
		t.Fatalf("Load of a checkpoint saved without token returned %x", []byte(loaded.Token))
	}
}

func testFieldsRoundTrip(t *testing.T, s checkpoint.Store) {
	def := tokenDoc(t, bson.D{
		{Key: "scope", Value: bson.D{{Key: "db", Value: "shop"}, {Key: "coll", Value: "orders"}}},
		{Key: "pipeline", Value: bson.A{bson.D{{Key: "$match", Value: bson.D{{Key: "operationType", Value: "insert"}}}}}},
		{Key: "options", Value: bson.D{{Key: "fullDocument", Value: "updateLookup"}}},
		{Key: "partitions", Value: int32(4)},
	})
	states := []struct {
		state checkpoint.State
		note  string
	}{
		{checkpoint.StateRunning, ""},
		{checkpoint.StateNeedsBackfill, "resume token no longer in the oplog (ChangeStreamHistoryLost, 286)"},
		{checkpoint.StateInvalidated, "collection shop.orders dropped"},
		{checkpoint.StateStalled, "poison event: décodage impossible — 日本語 ✓"},
		{checkpoint.StateRunning, "$not a field path"},
	}
	for i, st := range states {
		cp := base(t, "$fields", i)
		cp.Epoch = int64(10 + i)
		cp.Definition = def
		if i > 0 {
			cp.Snapshot = progress(t, i)
		}
		cp.ClusterTime = bson.Timestamp{T: 1700000000 + uint32(i), I: uint32(7 + i)}
		if i%2 == 1 {
			cp.Pending = bson.Timestamp{T: 1700000000 + uint32(i), I: uint32(9 + i)}
			cp.ReadDelay = time.Duration(1500+i) * time.Millisecond
		}
		cp.State = st.state
		cp.Note = st.note
		got := mustSave(t, s, cp)
		want := cp
		want.Version = 1
		want.UpdatedAt = got.UpdatedAt
		same(t, "Save result", got, want)
		same(t, "Load", mustLoad(t, s, cp.Stream, cp.Partition), want)
	}
	list, err := s.List(t.Context(), "$fields")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != len(states) {
		t.Fatalf("List returned %d checkpoints, want %d", len(list), len(states))
	}
	for i, cp := range list {
		same(t, "List entry", cp, mustLoad(t, s, "$fields", i))
	}

	// Zero and cleared values come back as zero.
	cp := mustLoad(t, s, "$fields", 3)
	cp.ClusterTime = bson.Timestamp{}
	cp.Pending = bson.Timestamp{}
	cp.ReadDelay = 0
	cp.Definition = nil
	cp.Snapshot = nil
	cp.State = checkpoint.StateRunning
	cp.Note = ""
	cp.Identity = ""
	got := mustSave(t, s, cp)
	want := cp
	want.Version++
	want.UpdatedAt = got.UpdatedAt
	same(t, "Save of zero values", got, want)
	same(t, "Load of zero values", mustLoad(t, s, "$fields", 3), want)
}

func testList(t *testing.T, s checkpoint.Store) {
	list, err := s.List(t.Context(), "orders")
	if err != nil {
		t.Fatalf("List of an unknown stream: %v", err)
	}
	if len(list) != 0 {
		t.Fatalf("List of an unknown stream returned %d checkpoints", len(list))
	}
	partitions := []int{5, 0, 300, 2, 1 << 20, 1, 256, 10}
	for _, p := range partitions {
		mustSave(t, s, base(t, "orders", p))
	}
	// Streams whose names share a prefix, or contain separators, stay apart.
	others := []string{"order", "orders/1", "orders/", "ordersx", "orders\x01", "Orders", "orders.é"}
	for i, stream := range others {
		mustSave(t, s, base(t, stream, i))
		mustSave(t, s, base(t, stream, 1<<20+1))
	}
	list, err = s.List(t.Context(), "orders")
	if err != nil {
		t.Fatal(err)
	}
	want := []int{0, 1, 2, 5, 10, 256, 300, 1 << 20}
	if len(list) != len(want) {
		t.Fatalf("List returned %d checkpoints, want %d: %v", len(list), len(want), keys(list))
	}
	for i, cp := range list {
		if cp.Stream != "orders" || cp.Partition != want[i] {
			t.Fatalf("List = %v, want partitions %v of stream orders", keys(list), want)
		}
		same(t, "List entry", cp, mustLoad(t, s, "orders", cp.Partition))
	}
	for i, stream := range others {
		list, err := s.List(t.Context(), stream)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 2 || list[0].Stream != stream || list[0].Partition != i || list[1].Partition != 1<<20+1 {
			t.Fatalf("List(%q) = %v, want partitions %d and %d", stream, keys(list), i, 1<<20+1)
		}
	}
}

func keys(list []checkpoint.Checkpoint) []string {
	var out []string
	for _, cp := range list {
		out = append(out, cp.Stream+"/"+strconv.Itoa(cp.Partition))
	}
	return out
}

func testDelete(t *testing.T, s checkpoint.Store) {
	ctx := t.Context()
	v1 := mustSave(t, s, base(t, "orders", 0))
	v2 := mustSave(t, s, v1)
	other := mustSave(t, s, base(t, "orders", 1))

	err := s.Delete(ctx, "orders", 0, 1)
	fenced(t, err, 2, 1)
	same(t, "Load after a fenced Delete", mustLoad(t, s, "orders", 0), v2)

	if err := s.Delete(ctx, "orders", 0, 2); err != nil {
		t.Fatalf("Delete with the stored version: %v", err)
	}
	if _, err := s.Load(ctx, "orders", 0); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("Load after Delete: err = %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, "orders", 0, 2); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("second Delete: err = %v, want ErrNotFound", err)
	}
	same(t, "other partition after Delete", mustLoad(t, s, "orders", 1), other)
	list, err := s.List(ctx, "orders")
	if err != nil || len(list) != 1 {
		t.Fatalf("List after Delete = %v, %v; want only partition 1", keys(list), err)
	}

	// After a reset the partition starts again from version 0.
	old := v2
	_, err = s.Save(ctx, old)
	fenced(t, err, 0, 0)
	if got := mustSave(t, s, base(t, "orders", 0)); got.Version != 1 {
		t.Fatalf("Save after Delete returned version %d, want 1", got.Version)
	}
}

func testConcurrentSaves(t *testing.T, s checkpoint.Store) {
	const writers = 8
	race := func(t *testing.T, from checkpoint.Checkpoint) checkpoint.Checkpoint {
		t.Helper()
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			results [writers]checkpoint.Checkpoint
			errs    [writers]error
		)
		for i := range writers {
			cp := from
			cp.Token = token(t, "WRITER"+strconv.Itoa(i))
			cp.Note = "writer " + strconv.Itoa(i)
			wg.Go(func() {
				<-start
				results[i], errs[i] = s.Save(t.Context(), cp)
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("writers %d and %d both saved from version %d", winner, i, from.Version)
			case err == nil:
				winner = i
			case !errors.Is(err, checkpoint.ErrFenced):
				t.Fatalf("writer %d: err = %v, want nil or ErrFenced", i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("no writer saved from version %d", from.Version)
		}
		same(t, "Load after the race", mustLoad(t, s, from.Stream, from.Partition), results[winner])
		return results[winner]
	}
	cp := race(t, base(t, "orders", 0)) // the insert path
	cp = race(t, cp)                    // the update path
	if cp.Version != 2 {
		t.Fatalf("after two races the version is %d, want 2", cp.Version)
	}
}

func testInvalidInput(t *testing.T, s checkpoint.Store) {
	ctx := t.Context()
	ok := base(t, "orders", 0)
	bad := func(field, what string, mutate func(*checkpoint.Checkpoint)) {
		t.Helper()
		cp := ok
		mutate(&cp)
		_, err := s.Save(ctx, cp)
		if !errors.Is(err, checkpoint.ErrInvalid) || !strings.Contains(err.Error(), field) {
			t.Fatalf("Save with %s %s: err = %v, want ErrInvalid naming %s", what, field, err, field)
		}
	}
	bad("Stream", "an empty", func(cp *checkpoint.Checkpoint) { cp.Stream = "" })
	bad("Stream", "a NUL in the", func(cp *checkpoint.Checkpoint) { cp.Stream = "a\x00b" })
	bad("Stream", "invalid UTF-8 in the", func(cp *checkpoint.Checkpoint) { cp.Stream = "\xff\xfe" })
	bad("Partition", "a negative", func(cp *checkpoint.Checkpoint) { cp.Partition = -1 })
	bad("Epoch", "a negative", func(cp *checkpoint.Checkpoint) { cp.Epoch = -1 })
	bad("Version", "a negative", func(cp *checkpoint.Checkpoint) { cp.Version = -1 })
	bad("State", "an unknown", func(cp *checkpoint.Checkpoint) { cp.State = "paused" })
	bad("Note", "invalid UTF-8 in the", func(cp *checkpoint.Checkpoint) { cp.Note = "\xc3" })
	bad("Identity", "invalid UTF-8 in the", func(cp *checkpoint.Checkpoint) { cp.Identity = "\xc3" })
	valid := token(t, "AB")
	for name, doc := range map[string][]byte{
		"garbage":           {1, 2, 3},
		"too short":         {5, 0, 0},
		"length too big":    append([]byte{0xff, 0, 0, 0}, valid[4:]...),
		"trailing bytes":    append(bytes.Clone(valid), 0),
		"missing final NUL": append(bytes.Clone(valid[:len(valid)-1]), 1),
		"truncated string":  {12, 0, 0, 0, 2, 'a', 0, 9, 0, 0, 0, 0},
		"unknown type":      {8, 0, 0, 0, 0x42, 'a', 0, 0},
		"bad nested doc":    {13, 0, 0, 0, 3, 'a', 0, 5, 0, 0, 0, 1, 0},
	} {
		bad("Token", "a ("+name+")", func(cp *checkpoint.Checkpoint) { cp.Token = doc })
		bad("Definition", "a ("+name+")", func(cp *checkpoint.Checkpoint) { cp.Definition = doc })
		bad("Snapshot", "a ("+name+")", func(cp *checkpoint.Checkpoint) { cp.Snapshot = doc })
	}
	if _, err := s.Load(ctx, "orders", 0); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("an invalid Save stored something: Load err = %v", err)
	}

	check := func(what, field string, err error) {
		t.Helper()
		if !errors.Is(err, checkpoint.ErrInvalid) || !strings.Contains(err.Error(), field) {
			t.Fatalf("%s: err = %v, want ErrInvalid naming %s", what, err, field)
		}
	}
	_, err := s.Load(ctx, "", 0)
	check("Load with an empty stream", "Stream", err)
	_, err = s.Load(ctx, "orders", -2)
	check("Load with a negative partition", "Partition", err)
	_, err = s.List(ctx, "")
	check("List with an empty stream", "Stream", err)
	_, err = s.List(ctx, "a\x00")
	check("List with a NUL in the stream", "Stream", err)
	check("Delete with an empty stream", "Stream", s.Delete(ctx, "", 0, 1))
	check("Delete with a negative partition", "Partition", s.Delete(ctx, "orders", -1, 1))
	check("Delete with a negative version", "Version", s.Delete(ctx, "orders", 0, -1))
}

func testCancelledContext(t *testing.T, s checkpoint.Store) {
	stored := mustSave(t, s, base(t, "orders", 0))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	isCancel := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("%s with a cancelled context: err = %v, want one matching context.Canceled", what, err)
		}
	}
	_, err := s.Load(ctx, "orders", 0)
	isCancel("Load", err)
	_, err = s.Save(ctx, stored)
	isCancel("Save", err)
	_, err = s.Save(ctx, base(t, "orders", 1))
	isCancel("Save (first)", err)
	_, err = s.List(ctx, "orders")
	isCancel("List", err)
	isCancel("Delete", s.Delete(ctx, "orders", 0, 1))

	same(t, "Load after cancelled calls", mustLoad(t, s, "orders", 0), stored)
	if _, err := s.Load(t.Context(), "orders", 1); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("a cancelled Save stored a checkpoint: Load err = %v", err)
	}
}

func testClose(t *testing.T, s checkpoint.Store) {
	ctx := t.Context()
	cp := mustSave(t, s, base(t, "orders", 0))
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	closed := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, checkpoint.ErrClosed) {
			t.Fatalf("%s after Close: err = %v, want ErrClosed", what, err)
		}
	}
	_, err := s.Load(ctx, "orders", 0)
	closed("Load", err)
	_, err = s.Save(ctx, cp)
	closed("Save", err)
	_, err = s.List(ctx, "orders")
	closed("List", err)
	closed("Delete", s.Delete(ctx, "orders", 0, 1))
}
