package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/sink/webhook"
)

// receiver is the webhook sink's endpoint: it verifies each request's
// Standard Webhooks signature, records every delivery (event id,
// operation, document, version, epoch, arrival, the status it answered),
// and can be made to fail: answer 503 for a while (an outage), or stop
// listening altogether (connections refused) and listen again on the same
// port.
type receiver struct {
	key  []byte
	addr string // host:port, kept across refusals

	mu         sync.Mutex
	deliveries []delivery
	failing    bool // answer 503
	badSig     int  // requests whose signature did not verify
	srv        *http.Server
}

func newReceiver(key []byte) (*receiver, error) {
	r := &receiver{key: key}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r.addr = ln.Addr().String()
	r.serve(ln)
	return r, nil
}

func (r *receiver) url() string { return "http://" + r.addr + "/events" }

func (r *receiver) serve(ln net.Listener) {
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 5 * time.Second}
	r.mu.Lock()
	r.srv = srv
	r.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

// setFailing makes the receiver answer 503 (true) or accept again.
func (r *receiver) setFailing(on bool) {
	r.mu.Lock()
	r.failing = on
	r.mu.Unlock()
}

// refuse closes the listener and every open connection: from now on
// connections are refused, until listen.
func (r *receiver) refuse() {
	r.mu.Lock()
	srv := r.srv
	r.srv = nil
	r.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// listen listens again on the same port (after refuse).
func (r *receiver) listen() error {
	r.mu.Lock()
	up := r.srv != nil
	r.mu.Unlock()
	if up {
		return nil
	}
	var err error
	for try := 0; try < 50; try++ {
		var ln net.Listener
		if ln, err = net.Listen("tcp", r.addr); err == nil {
			r.serve(ln)
			return nil
		}
		time.Sleep(20 * time.Millisecond) // the port is briefly busy
	}
	return fmt.Errorf("receiver: listen again on %s: %w", r.addr, err)
}

func (r *receiver) close() { r.refuse() }

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return // the connection broke: the sender retries
	}
	at := time.Now()
	id, ts := req.Header.Get("webhook-id"), req.Header.Get("webhook-timestamp")
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || !strings.Contains(req.Header.Get("webhook-signature"), webhook.Sign(r.key, id, t, body)) {
		r.mu.Lock()
		r.badSig++
		r.mu.Unlock()
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	d, err := parseDelivery(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	d.ID, d.At = id, at
	d.Epoch, _ = strconv.ParseInt(req.Header.Get("Ferry-Epoch"), 10, 64)
	r.mu.Lock()
	d.Code = http.StatusOK
	if r.failing {
		d.Code = http.StatusServiceUnavailable
	}
	r.deliveries = append(r.deliveries, d)
	r.mu.Unlock()
	w.WriteHeader(d.Code)
}

// snapshot returns the deliveries so far, in arrival order, and how many
// requests failed their signature check.
func (r *receiver) snapshot() ([]delivery, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.deliveries...), r.badSig
}

// parseDelivery reads a webhook body: a change event, or (a backfill) the
// scanned document itself.
func parseDelivery(body []byte) (delivery, error) {
	var raw bson.Raw
	if err := bson.UnmarshalExtJSON(body, false, &raw); err != nil {
		return delivery{}, fmt.Errorf("not Extended JSON: %v", err)
	}
	op, ok := raw.Lookup("operationType").StringValueOK()
	if !ok { // a backfill: the document
		doc, ok := raw.Lookup("_id").StringValueOK()
		if !ok {
			return delivery{}, errors.New("neither a change event nor a document with a string _id")
		}
		return delivery{Op: "backfill", Doc: doc, V: version(raw.Lookup("v")), Backfill: true}, nil
	}
	doc, _ := raw.Lookup("documentKey", "_id").StringValueOK()
	d := delivery{Op: op, Doc: doc, V: -1}
	switch op {
	case "insert", "replace":
		d.V = version(raw.Lookup("fullDocument", "v"))
	case "update":
		d.V = version(raw.Lookup("updateDescription", "updatedFields", "v"))
	}
	return d, nil
}

// version reads a v field (-1: absent or not a number).
func version(v bson.RawValue) int {
	if n, ok := v.AsInt64OK(); ok {
		return int(n)
	}
	return -1
}
