package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"time"
)

// webhookDest is an HTTP server that reads each delivery's body and
// answers 200, counting deliveries by their webhook-id (the event id). It
// does not check signatures: it stands for a receiver's cheapest possible
// acknowledgement, so what is measured is the sender.
type webhookDest struct {
	srv *http.Server
	c   *counter
}

func startWebhook(_ context.Context, c *counter, r *ready) (destination, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	d := &webhookDest{c: c}
	d.srv = &http.Server{Handler: d, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = d.srv.Serve(ln) }()
	r.WebhookURL = "http://" + ln.Addr().String() + "/events"
	return d, nil
}

func (d *webhookDest) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		http.Error(w, "read", http.StatusBadRequest)
		return
	}
	id := r.Header.Get("webhook-id")
	if id == "" {
		http.Error(w, "no webhook-id", http.StatusBadRequest)
		return
	}
	d.c.add(id)
}

func (d *webhookDest) counts(context.Context, bool) (counts, error) {
	total, distinct := d.c.get()
	return counts{Delivered: total, Distinct: distinct, How: "HTTP requests answered 200, distinct by webhook-id"}, nil
}

func (d *webhookDest) close() { _ = d.srv.Close() }
