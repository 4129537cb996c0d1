package mongotest

import (
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
)

type mergedStream struct{}

func (ms *mergedStream) kill() {}

func routerOpenStream(rt *router, r *request) (bson.D, bool, error) {
	return nil, false, errorf(mongoerr.CodeNotImplemented, "not yet")
}

func (rt *router) streamGetMore(r *request, rc *routerCursor, n int) (bson.D, bool, error) {
	return nil, false, errorf(mongoerr.CodeNotImplemented, "not yet")
}

func (rt *router) startBalancer(d time.Duration) {}
