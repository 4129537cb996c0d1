package main

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsDest is an embedded nats-server with JetStream (file storage in a
// temporary directory) and a stream FERRY over ferry.> with a duplicate
// window, so replays with the same Nats-Msg-Id (the event id) are stored
// once. It counts the stream's messages, asked every pollEvery.
type natsDest struct {
	ns     *server.Server
	nc     *nats.Conn
	stream jetstream.Stream
	dir    string
}

func startNATS(ctx context.Context, c *counter, r *ready) (destination, error) {
	dir, err := os.MkdirTemp("", "ferry-bench-nats-")
	if err != nil {
		return nil, err
	}
	d := &natsDest{dir: dir}
	d.ns, err = server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true,
		StoreDir: dir, NoLog: true, NoSigs: true})
	if err != nil {
		d.close()
		return nil, err
	}
	go d.ns.Start()
	if !d.ns.ReadyForConnections(30 * time.Second) {
		d.close()
		return nil, errors.New("nats-server was not ready within 30 s")
	}
	if d.nc, err = nats.Connect(d.ns.ClientURL()); err != nil {
		d.close()
		return nil, err
	}
	js, err := jetstream.New(d.nc)
	if err != nil {
		d.close()
		return nil, err
	}
	d.stream, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "FERRY", Subjects: []string{"ferry.>"}, Duplicates: 10 * time.Minute})
	if err != nil {
		d.close()
		return nil, err
	}
	r.NATSURL = d.ns.ClientURL()
	go poll(ctx, c, func(ctx context.Context) (int64, int64, error) {
		n, err := d.msgs(ctx)
		return n, n, err
	})
	return d, nil
}

func (d *natsDest) msgs(ctx context.Context) (int64, error) {
	info, err := d.stream.Info(ctx)
	if err != nil {
		return 0, err
	}
	return int64(info.State.Msgs), nil
}

func (d *natsDest) counts(ctx context.Context, _ bool) (counts, error) {
	n, err := d.msgs(ctx)
	if err != nil {
		return counts{}, err
	}
	return counts{Delivered: n, Distinct: n, How: "messages in the JetStream stream (de-duplicated by Nats-Msg-Id, the event id)"}, nil
}

func (d *natsDest) close() {
	if d.nc != nil {
		d.nc.Close()
	}
	if d.ns != nil {
		d.ns.Shutdown()
		d.ns.WaitForShutdown()
	}
	_ = os.RemoveAll(d.dir)
}
