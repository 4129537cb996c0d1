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

// RunSnapshotRequests runs the contract suite of checkpoint.SnapshotRequests.
// newStore must return an empty store each time it is called, one that
// implements checkpoint.SnapshotRequests; the suite closes it.
func RunSnapshotRequests(t *testing.T, newStore func(t *testing.T) checkpoint.Store) {
	open := func(t *testing.T) (checkpoint.Store, checkpoint.SnapshotRequests) {
		t.Helper()
		s := newStore(t)
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		r, ok := s.(checkpoint.SnapshotRequests)
		if !ok {
			t.Fatalf("%T does not implement checkpoint.SnapshotRequests", s)
		}
		return s, r
	}
	tests := []struct {
		name string
		fn   func(*testing.T, checkpoint.Store, checkpoint.SnapshotRequests)
	}{
		{"Missing", testRequestMissing},
		{"RoundTrip", testRequestRoundTrip},
		{"Replace", testRequestReplace},
		{"Cancel", testRequestCancel},
		{"StreamsApart", testRequestStreamsApart},
		{"Concurrent", testRequestConcurrent},
		{"InvalidInput", testRequestInvalid},
		{"CancelledContext", testRequestCancelledContext},
		{"Close", testRequestClose},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, r := open(t)
			tc.fn(t, s, r)
		})
	}
}

func filterDoc(t *testing.T, d bson.D) bson.Raw { return tokenDoc(t, d) }

func mustRequest(t *testing.T, r checkpoint.SnapshotRequests, req checkpoint.SnapshotRequest) checkpoint.SnapshotRequest {
	t.Helper()
	got, err := r.RequestSnapshot(t.Context(), req)
	if err != nil {
		t.Fatalf("RequestSnapshot(%q, id %q): %v", req.Stream, req.ID, err)
	}
	if got.Stream != req.Stream || got.ID == "" || got.Cancelled || got.Note != req.Note {
		t.Fatalf("RequestSnapshot(%+v) returned %+v", req, got)
	}
	if req.ID != "" && got.ID != req.ID {
		t.Fatalf("RequestSnapshot with ID %q returned ID %q", req.ID, got.ID)
	}
	if !bytes.Equal(got.Filter, req.Filter) || (got.Filter == nil) != (len(req.Filter) == 0) {
		t.Fatalf("RequestSnapshot returned Filter %x, want %x", []byte(got.Filter), []byte(req.Filter))
	}
	if got.Requested.IsZero() || got.Requested.Location() != time.UTC || got.Requested.Nanosecond()%int(time.Millisecond) != 0 {
		t.Fatalf("RequestSnapshot returned Requested %v, want a UTC time in milliseconds", got.Requested)
	}
	return got
}

func mustCurrent(t *testing.T, r checkpoint.SnapshotRequests, stream string) checkpoint.SnapshotRequest {
	t.Helper()
	got, err := r.SnapshotRequest(t.Context(), stream)
	if err != nil {
		t.Fatalf("SnapshotRequest(%q): %v", stream, err)
	}
	return got
}

func sameRequest(t *testing.T, what string, got, want checkpoint.SnapshotRequest) {
	t.Helper()
	if got.Stream != want.Stream || got.ID != want.ID || !bytes.Equal(got.Filter, want.Filter) ||
		(got.Filter == nil) != (want.Filter == nil) || !got.Requested.Equal(want.Requested) ||
		got.Cancelled != want.Cancelled || got.Note != want.Note {
		t.Fatalf("%s:\n got: %+v\nwant: %+v", what, got, want)
	}
}

func notFound(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("%s: err = %v, want one matching ErrNotFound", what, err)
	}
}

func testRequestMissing(t *testing.T, _ checkpoint.Store, r checkpoint.SnapshotRequests) {
	_, err := r.SnapshotRequest(t.Context(), "orders")
	notFound(t, "SnapshotRequest of a stream without one", err)
	notFound(t, "CancelSnapshot of a stream without a request", r.CancelSnapshot(t.Context(), "orders", "x"))
	if _, err := r.SnapshotRequest(t.Context(), "orders"); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("CancelSnapshot of a missing request created one: %v", err)
	}
}

func testRequestRoundTrip(t *testing.T, s checkpoint.Store, r checkpoint.SnapshotRequests) {
	// The store assigns an ID and the time, ignoring the caller's time.
	caller := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	all := mustRequest(t, r, checkpoint.SnapshotRequest{Stream: "orders", Requested: caller})
	if all.Requested.Equal(caller) {
		t.Fatal("RequestSnapshot kept the caller's Requested; the store must set it")
	}
	if all.Filter != nil {
		t.Fatalf("a request without a filter came back with Filter %x", []byte(all.Filter))
	}
	sameRequest(t, "SnapshotRequest", mustCurrent(t, r, "orders"), all)

	// A filter with operators comes back byte for byte, and is a copy both ways.
	filter := filterDoc(t, bson.D{
		{Key: "status", Value: bson.D{{Key: "$in", Value: bson.A{"paid", "shipped"}}}},
		{Key: "$or", Value: bson.A{bson.D{{Key: "total", Value: bson.D{{Key: "$gt", Value: 100.5}}}}, bson.D{{Key: "vip", Value: true}}}},
		{Key: "a.b", Value: bson.D{{Key: "$exists", Value: false}}},
	})
	original := bytes.Clone(filter)
	req := checkpoint.SnapshotRequest{Stream: "orders", ID: "ops-2031-01-01", Filter: filter, Note: "alice: re-send paid orders — 日本語"}
	got := mustRequest(t, r, req)
	for i := range filter {
		filter[i] = 0xEE
	}
	if !bytes.Equal(got.Filter, original) {
		t.Fatalf("RequestSnapshot returned Filter %x, want %x", []byte(got.Filter), original)
	}
	loaded := mustCurrent(t, r, "orders")
	sameRequest(t, "SnapshotRequest", loaded, got)
	for i := range loaded.Filter {
		loaded.Filter[i] = 0xDD
	}
	if again := mustCurrent(t, r, "orders"); !bytes.Equal(again.Filter, original) {
		t.Fatal("modifying a returned filter changed the stored one")
	}

	// An empty filter is none.
	empty := mustRequest(t, r, checkpoint.SnapshotRequest{Stream: "orders", Filter: bson.Raw{}})
	sameRequest(t, "SnapshotRequest after an empty filter", mustCurrent(t, r, "orders"), empty)

	// Requests are not checkpoints.
	if list, err := s.List(t.Context(), "orders"); err != nil || len(list) != 0 {
		t.Fatalf("List of a stream with only a snapshot request = %d checkpoints, %v; want none", len(list), err)
	}
	if _, err := s.Load(t.Context(), "orders", 0); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("Load of a stream with only a snapshot request: err = %v, want ErrNotFound", err)
	}
}

func testRequestReplace(t *testing.T, _ checkpoint.Store, r checkpoint.SnapshotRequests) {
	first := mustRequest(t, r, checkpoint.SnapshotRequest{Stream: "orders", Filter: filterDoc(t, bson.D{{Key: "a", Value: 1}}), Note: "first"})
	second := mustRequest(t, r, checkpoint.SnapshotRequest{Stream: "orders", Note: "second"})
	if second.ID == first.ID {
		t.Fatalf("two requests were both assigned ID %q", first.ID)
	}
	if second.Requested.Before(first.Requested) {
		t.Fatalf("the second request was made at %v, before the first (%v)", second.Requested, first.Requested)
	}
	sameRequest(t, "SnapshotRequest after a second request", mustCurrent(t, r, "orders"), second)

	// The replaced request can no longer be cancelled.
	notFound(t, "CancelSnapshot of a replaced request", r.CancelSnapshot(t.Context(), "orders", first.ID))
	sameRequest(t, "SnapshotRequest after cancelling a replaced request", mustCurrent(t, r, "orders"), second)

	// The same ID again is a new request too.
	again := mustRequest(t, r, checkpoint.SnapshotRequest{Stream: "orders", ID: second.ID, Note: "again"})
	sameRequest(t, "SnapshotRequest after a request with the same ID", mustCurrent(t, r, "orders"), again)
}

func testRequestCancel(t *testing.T, _ checkpoint.Store, r checkpoint.SnapshotRequests) {
	ctx := t.Context()
	req := mustRequest(t, r, checkpoint.SnapshotRequest{Stream: "orders", Filter: filterDoc(t, bson.D{{Key: "x", Value: "y"}}), Note: "n"})
	notFound(t, "CancelSnapshot of another ID", r.CancelSnapshot(ctx, "orders", req.ID+"0"))
	sameRequest(t, "SnapshotRequest after cancelling another ID", mustCurrent(t, r, "orders"), req)

	if err := r.CancelSnapshot(ctx, "orders", req.ID); err != nil {
		t.Fatalf("CancelSnapshot: %v", err)
	}
	want := req
	want.Cancelled = true
	sameRequest(t, "SnapshotRequest after CancelSnapshot", mustCurrent(t, r, "orders"), want)
	if err := r.CancelSnapshot(ctx, "orders", req.ID); err != nil {
		t.Fatalf("second CancelSnapshot: %v", err)
	}
	sameRequest(t, "SnapshotRequest after a second CancelSnapshot", mustCurrent(t, r, "orders"), want)

	// A new request is not cancelled.
	next := mustRequest(t, r, checkpoint.SnapshotRequest{Stream: "orders"})
	sameRequest(t, "SnapshotRequest after a new request", mustCurrent(t, r, "orders"), next)
}

func testRequestStreamsApart(t *testing.T, s checkpoint.Store, r checkpoint.SnapshotRequests) {
	mustSave(t, s, base(t, "orders", 0))
	streams := []string{"orders", "order", "orders/0", "orders2", "Orders", "orders.é", "$orders"}
	reqs := map[string]checkpoint.SnapshotRequest{}
	for i, stream := range streams {
		reqs[stream] = mustRequest(t, r, checkpoint.SnapshotRequest{Stream: stream, Note: strconv.Itoa(i)})
	}
	if err := r.CancelSnapshot(t.Context(), "order", reqs["order"].ID); err != nil {
		t.Fatal(err)
	}
	notFound(t, "CancelSnapshot of one stream's request under another stream", r.CancelSnapshot(t.Context(), "orders2", reqs["orders"].ID))
	for _, stream := range streams {
		want := reqs[stream]
		want.Cancelled = stream == "order"
		sameRequest(t, "SnapshotRequest("+stream+")", mustCurrent(t, r, stream), want)
	}
	_, err := r.SnapshotRequest(t.Context(), "ord")
	notFound(t, "SnapshotRequest of a stream without one", err)
	// The checkpoint is untouched, and no request is a checkpoint.
	if list, err := s.List(t.Context(), "orders"); err != nil || len(list) != 1 || list[0].Version != 1 {
		t.Fatalf("List(orders) beside snapshot requests = %v, %v; want the one checkpoint", keys(list), err)
	}
}

func testRequestConcurrent(t *testing.T, _ checkpoint.Store, r checkpoint.SnapshotRequests) {
	const writers = 8
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		results [writers]checkpoint.SnapshotRequest
		errs    [writers]error
	)
	for i := range writers {
		wg.Go(func() {
			<-start
			results[i], errs[i] = r.RequestSnapshot(t.Context(), checkpoint.SnapshotRequest{Stream: "orders", Note: "writer " + strconv.Itoa(i)})
		})
	}
	close(start)
	wg.Wait()
	ids := map[string]bool{}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
		if ids[results[i].ID] {
			t.Fatalf("two concurrent requests were both assigned ID %q", results[i].ID)
		}
		ids[results[i].ID] = true
	}
	// One of them is current, whole.
	cur := mustCurrent(t, r, "orders")
	for _, res := range results {
		if res.ID == cur.ID {
			sameRequest(t, "the current request", cur, res)
			return
		}
	}
	t.Fatalf("the current request %+v is none of those returned", cur)
}

func testRequestInvalid(t *testing.T, _ checkpoint.Store, r checkpoint.SnapshotRequests) {
	ctx := t.Context()
	check := func(what, field string, err error) {
		t.Helper()
		if !errors.Is(err, checkpoint.ErrInvalid) || !strings.Contains(err.Error(), field) {
			t.Fatalf("%s: err = %v, want ErrInvalid naming %s", what, err, field)
		}
	}
	ok := checkpoint.SnapshotRequest{Stream: "orders", ID: "r1"}
	bad := func(field, what string, mutate func(*checkpoint.SnapshotRequest)) {
		t.Helper()
		req := ok
		mutate(&req)
		_, err := r.RequestSnapshot(ctx, req)
		check("RequestSnapshot with "+what+" "+field, field, err)
	}
	bad("Stream", "an empty", func(req *checkpoint.SnapshotRequest) { req.Stream = "" })
	bad("Stream", "a NUL in the", func(req *checkpoint.SnapshotRequest) { req.Stream = "a\x00b" })
	bad("Stream", "invalid UTF-8 in the", func(req *checkpoint.SnapshotRequest) { req.Stream = "\xff" })
	bad("ID", "invalid UTF-8 in the", func(req *checkpoint.SnapshotRequest) { req.ID = "\xc3" })
	bad("ID", "a NUL in the", func(req *checkpoint.SnapshotRequest) { req.ID = "a\x00" })
	bad("ID", "a too long", func(req *checkpoint.SnapshotRequest) { req.ID = strings.Repeat("x", 129) })
	bad("Note", "invalid UTF-8 in the", func(req *checkpoint.SnapshotRequest) { req.Note = "\xc3" })
	bad("Cancelled", "a true", func(req *checkpoint.SnapshotRequest) { req.Cancelled = true })
	valid := filterDoc(t, bson.D{{Key: "a", Value: "b"}})
	for name, doc := range map[string][]byte{
		"garbage":           {1, 2, 3},
		"length too big":    append([]byte{0xff, 0, 0, 0}, valid[4:]...),
		"trailing bytes":    append(bytes.Clone(valid), 0),
		"missing final NUL": append(bytes.Clone(valid[:len(valid)-1]), 1),
		"unknown type":      {8, 0, 0, 0, 0x42, 'a', 0, 0},
	} {
		bad("Filter", "a ("+name+")", func(req *checkpoint.SnapshotRequest) { req.Filter = doc })
	}
	_, err := r.SnapshotRequest(ctx, "orders")
	notFound(t, "SnapshotRequest after invalid requests (nothing stored)", err)

	_, err = r.SnapshotRequest(ctx, "")
	check("SnapshotRequest with an empty stream", "Stream", err)
	_, err = r.SnapshotRequest(ctx, "a\x00")
	check("SnapshotRequest with a NUL in the stream", "Stream", err)
	check("CancelSnapshot with an empty stream", "Stream", r.CancelSnapshot(ctx, "", "r1"))
	check("CancelSnapshot with an empty ID", "ID", r.CancelSnapshot(ctx, "orders", ""))
	check("CancelSnapshot with invalid UTF-8 in the ID", "ID", r.CancelSnapshot(ctx, "orders", "\xc3"))
}

func testRequestCancelledContext(t *testing.T, _ checkpoint.Store, r checkpoint.SnapshotRequests) {
	stored := mustRequest(t, r, checkpoint.SnapshotRequest{Stream: "orders"})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	isCancel := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("%s with a cancelled context: err = %v, want one matching context.Canceled", what, err)
		}
	}
	_, err := r.RequestSnapshot(ctx, checkpoint.SnapshotRequest{Stream: "orders"})
	isCancel("RequestSnapshot", err)
	_, err = r.SnapshotRequest(ctx, "orders")
	isCancel("SnapshotRequest", err)
	isCancel("CancelSnapshot", r.CancelSnapshot(ctx, "orders", stored.ID))
	sameRequest(t, "SnapshotRequest after cancelled calls", mustCurrent(t, r, "orders"), stored)
}

func testRequestClose(t *testing.T, s checkpoint.Store, r checkpoint.SnapshotRequests) {
	ctx := t.Context()
	stored := mustRequest(t, r, checkpoint.SnapshotRequest{Stream: "orders"})
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	closed := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, checkpoint.ErrClosed) {
			t.Fatalf("%s after Close: err = %v, want ErrClosed", what, err)
		}
	}
	_, err := r.RequestSnapshot(ctx, checkpoint.SnapshotRequest{Stream: "orders"})
	closed("RequestSnapshot", err)
	_, err = r.SnapshotRequest(ctx, "orders")
	closed("SnapshotRequest", err)
	closed("CancelSnapshot", r.CancelSnapshot(ctx, "orders", stored.ID))
}
