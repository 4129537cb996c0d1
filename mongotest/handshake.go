package mongotest

import (
	"go.mongodb.org/mongo-driver/v2/bson"
)

func asString(v any) string {
	s, _ := v.(string)
	return s
}

// cmdHello answers hello / isMaster over OP_MSG.
func cmdHello(e *engine, r *request) (bson.D, error) {
	d := e.hello(r.conn, r.cmd, r.name != "hello")
	// run() appends ok and $clusterTime itself.
	out := d[:0:0]
	for _, el := range d {
		if el.Key == "ok" || el.Key == "$clusterTime" || el.Key == "operationTime" {
			continue
		}
		out = append(out, el)
	}
	return out, nil
}

// hello describes a writable primary of a one-member replica set
// (MONGO-SEMANTICS §1.2). It omits topologyVersion so drivers poll instead of
// streaming, and omits compression so they never compress.
func (e *engine) hello(c *conn, cmd bson.D, legacy bool) bson.D {
	if e.router != nil { // a mongos: an OP_QUERY handshake (OP_MSG goes to router.run)
		return e.router.queryHello(c, cmd, legacy)
	}
	addr := c.srv.Addr()
	me := c.srv.memberAddr(c.member)
	if c.appName == "" {
		if client, ok := lookupTop(cmd, "client"); ok {
			if cd, ok := client.(bson.D); ok {
				if app, ok := lookupTop(cd, "application"); ok {
					if ad, ok := app.(bson.D); ok {
						c.appName, _ = lookupD(ad, "name").(string)
					}
				}
			}
		}
	}
	e.mu.Lock()
	last := e.oplog.last()
	lastTS, lastWall := last.ts, last.wall
	now := e.nowLocked()
	e.mu.Unlock()
	primaryKey := "isWritablePrimary"
	if legacy {
		primaryKey = "ismaster"
	}
	opTime := bson.D{{Key: "ts", Value: lastTS}, {Key: "t", Value: int64(1)}}
	reply := bson.D{
		{Key: "helloOk", Value: true},
		{Key: primaryKey, Value: c.member == 0},
		{Key: "hosts", Value: c.srv.hosts()},
		{Key: "setName", Value: e.cfg.replSetName},
		{Key: "setVersion", Value: int32(1)},
		{Key: "secondary", Value: c.member != 0},
		{Key: "primary", Value: addr},
		{Key: "me", Value: me},
		{Key: "electionId", Value: bson.ObjectID{0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 1}},
		{Key: "lastWrite", Value: bson.D{
			{Key: "opTime", Value: opTime},
			{Key: "lastWriteDate", Value: lastWall},
			{Key: "majorityOpTime", Value: opTime},
			{Key: "majorityWriteDate", Value: lastWall},
		}},
		{Key: "maxBsonObjectSize", Value: int32(16 * 1024 * 1024)},
		{Key: "maxMessageSizeBytes", Value: int32(48_000_000)},
		{Key: "maxWriteBatchSize", Value: int32(100_000)},
		{Key: "localTime", Value: bson.NewDateTimeFromTime(now)},
		{Key: "logicalSessionTimeoutMinutes", Value: int32(30)},
		{Key: "connectionId", Value: c.id},
		{Key: "minWireVersion", Value: int32(0)},
		{Key: "maxWireVersion", Value: e.cfg.release.wire()},
		{Key: "readOnly", Value: false},
		{Key: "ok", Value: 1.0},
	}
	if c.member != 0 {
		reply = withoutFields(reply, "electionId") // only the primary has one
	}
	if e.cfg.standalone {
		reply = withoutFields(reply, "hosts", "setName", "setVersion", "secondary", "primary", "me", "electionId", "lastWrite")
	}
	if u, _ := lookupTop(cmd, "saslSupportedMechs"); u != nil && e.users[asString(u)] != nil {
		// The mechanisms of the user "db.name" the client will log in as.
		reply = append(reply[:len(reply)-1:len(reply)-1], bson.E{Key: "saslSupportedMechs", Value: bson.A{"SCRAM-SHA-256"}}, reply[len(reply)-1])
	}
	return e.withClusterTime(reply)
}
