package mongotest

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
)

// collMeta is a sharded collection's routing entry.
type collMeta struct {
	db, coll string
}

type mergedStream struct{}

func (ms *mergedStream) kill() {}

func (rt *router) sharded(ns string) *collMeta { return nil }

func (rt *router) shardedCommand(r *request, m *collMeta) (bson.D, bool, error) {
	return nil, false, errorf(mongoerr.CodeNotImplemented, "not yet")
}

func (rt *router) forgetCollectionConfig(ctx context.Context, ns string) {}

func routerOpenStream(rt *router, r *request) (bson.D, bool, error) {
	return nil, false, errorf(mongoerr.CodeNotImplemented, "not yet")
}

func (rt *router) streamGetMore(r *request, rc *routerCursor, n int) (bson.D, bool, error) {
	return nil, false, errorf(mongoerr.CodeNotImplemented, "not yet")
}

func (rt *router) startBalancer(d time.Duration) {}
