package main

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// cluster is the MongoDB one measurement runs against: a new emulator
// child, or the -uri cluster. Its client loads the backlog and reads it
// raw; it is disconnected before the daemon runs.
type cluster struct {
	uri    string
	emu    *child // nil with -uri
	client *mongo.Client
	drop   []string // databases to drop when done (-uri)
}

// newCluster starts an emulator sized for a backlog of n events, or
// connects to uri.
func newCluster(uri string, n int) (*cluster, error) {
	c := &cluster{uri: uri}
	if uri == "" {
		emu, err := startEmulator(n)
		if err != nil {
			return nil, err
		}
		c.emu, c.uri = emu, emu.ready.URI
	}
	if err := c.connect(); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

func (c *cluster) connect() error {
	if c.client != nil {
		return nil
	}
	client, err := mongo.Connect(options.Client().ApplyURI(c.uri))
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	c.client = client
	return nil
}

// disconnect closes the bench's own client.
func (c *cluster) disconnect() {
	if c.client != nil {
		_ = c.client.Disconnect(context.Background())
		c.client = nil
	}
}

// usage is the emulator's usage, or nil for a real cluster.
func (c *cluster) usage() (*usage, error) {
	if c.emu == nil {
		return nil, nil
	}
	u, err := c.emu.usage()
	return &u, err
}

// close drops the databases the measurement made on a real cluster and
// stops the emulator.
func (c *cluster) close() error {
	var err error
	if len(c.drop) > 0 && c.connect() == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		for _, db := range c.drop {
			if e := c.client.Database(db).Drop(ctx); e != nil && err == nil {
				err = fmt.Errorf("drop database %s: %w", db, e)
			}
		}
		cancel()
	}
	c.disconnect()
	if c.emu != nil {
		if e := c.emu.close(); e != nil && err == nil {
			err = e
		}
	}
	return err
}
