package main

import (
	"context"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"

	"github.com/ferry-io/ferry/sink/pubsub"
)

// The Pub/Sub destination's project and topic.
const (
	pubsubProject = "ferry-bench"
	pubsubTopic   = "events"
)

// pubsubDest is pstest, Google's in-memory Pub/Sub fake, with a reactor
// on Publish that counts each published message by its ferry-event-id
// attribute before pstest stores it.
type pubsubDest struct {
	srv *pstest.Server
	c   *counter
}

func startPubSub(ctx context.Context, c *counter, r *ready) (destination, error) {
	d := &pubsubDest{c: c}
	d.srv = pstest.NewServer(pstest.ServerReactorOption{FuncName: "Publish", Reactor: publishCounter{c}})
	if _, err := d.srv.GServer.CreateTopic(ctx, &pubsubpb.Topic{Name: "projects/" + pubsubProject + "/topics/" + pubsubTopic}); err != nil {
		_ = d.srv.Close()
		return nil, err
	}
	r.PubSubAddr = d.srv.Addr
	return d, nil
}

// publishCounter counts a Publish request's messages and lets pstest
// handle it.
type publishCounter struct{ c *counter }

func (p publishCounter) React(req any) (bool, any, error) {
	if pr, ok := req.(*pubsubpb.PublishRequest); ok {
		for _, m := range pr.GetMessages() {
			p.c.add(m.GetAttributes()[pubsub.EventIDAttribute])
		}
	}
	return false, nil, nil
}

func (d *pubsubDest) counts(context.Context, bool) (counts, error) {
	total, distinct := d.c.get()
	return counts{Delivered: total, Distinct: distinct, How: "messages published to pstest, distinct by " + pubsub.EventIDAttribute}, nil
}

func (d *pubsubDest) close() { _ = d.srv.Close() }
