package unified

import (
	"reflect"
	"unsafe"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/session"
)

// driverSession returns the driver's state of a session: its transaction
// state, whether it is pinned to a mongos and whether it is dirty, which
// the session assertions of the unified format check. The Go driver keeps
// them in the unexported clientSession field of mongo.Session, so they are
// read the way the driver's own spec runner reads them. If a driver
// release renames the field, the assertion fails with a runner error
// saying so instead of guessing.
func driverSession(s *mongo.Session) (*session.Client, error) {
	v := reflect.ValueOf(s).Elem().FieldByName("clientSession")
	if !v.IsValid() || v.Type() != reflect.TypeOf((*session.Client)(nil)) {
		return nil, rerr("unified runner: cannot read the session's state: mongo.Session has no clientSession *session.Client field in this driver release")
	}
	cs := *(**session.Client)(unsafe.Pointer(v.UnsafeAddr()))
	if cs == nil {
		return nil, rerr("unified runner: the session has no driver state (ended?)")
	}
	return cs, nil
}
