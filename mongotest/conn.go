package mongotest

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/ferry-io/ferry/mongoerr"
	"github.com/ferry-io/ferry/mongotest/internal/wire"
)

// conn serves one client connection: it reads a request, runs it and writes
// the reply, one at a time, like a mongod connection thread.
type conn struct {
	srv     *Server
	nc      net.Conn
	id      int32
	appName string
	reqID   int32
	// member is the replica-set member the connection reached: 0 for
	// the primary, i for the i-th secondary.
	member int
	// lastOp is the cluster time of the connection's last write.
	lastOp bson.Timestamp
	// user is the user the connection authenticated as (nil: none), and
	// sasl its authentication conversation in progress.
	user *authUser
	sasl *saslState
	// routed, on a mongos, are the connection's own connections to
	// the shards (mongos.go).
	routed map[*Server]*conn
	// fromMigrate marks a mongos' connection to a shard whose writes are
	// a sharded DDL's participant entries (fromMigrate in the oplog).
	fromMigrate bool
	// viaRouter marks a mongos' connection to a shard: its snapshot reads
	// of sharded collections are filtered by ownership at their time.
	viaRouter bool
}

// saslConv is the connection's SCRAM conversation in progress, or nil.
func (c *conn) saslConv() *saslState {
	if c == nil {
		return nil
	}
	return c.sasl
}

func (c *conn) serve() {
	defer c.nc.Close()
	r := bufio.NewReaderSize(c.nc, 64<<10)
	w := bufio.NewWriterSize(c.nc, 64<<10)
	// out holds the reply message; its buffer is reused across requests, so
	// large change-stream batches do not allocate a fresh reply each time.
	var out []byte
	enc := newReplyEncoder()
	for {
		h, body, err := wire.ReadMessage(r, c.srv.cfg.maxMessageSize)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				c.srv.log.Debug("mongotest: closing connection", "conn", c.id, "err", err)
			}
			return
		}
		opCode := h.OpCode
		if opCode == wire.OpCompressed {
			opCode, body, err = wire.ParseCompressed(body)
			if err != nil {
				c.srv.log.Debug("mongotest: bad OP_COMPRESSED", "conn", c.id, "err", err)
				return
			}
		}
		c.reqID++
		out = out[:0]
		switch opCode {
		case wire.OpQuery:
			q, err := wire.ParseQuery(body)
			if err != nil {
				c.srv.log.Debug("mongotest: bad OP_QUERY", "conn", c.id, "err", err)
				return
			}
			reply := c.handleQuery(q)
			if reply == nil {
				return
			}
			out = wire.AppendReply(out, c.reqID, h.RequestID, 8, reply)
		case wire.OpMsg:
			m, err := wire.ParseMsg(h, body)
			if err != nil {
				// A malformed OP_MSG gets an error reply when we can still
				// frame one; the connection stays usable because the whole
				// message was consumed.
				reply := marshalReply(c.srv.eng.errorReply(errorf(mongoerr.CodeFailedToParse, "invalid OP_MSG: %v", err), nil))
				out = wire.AppendMsg(out, c.reqID, h.RequestID, 0, reply)
				break
			}
			cmd, err := m.Command()
			var reply bson.D
			if err != nil {
				reply = c.srv.eng.errorReply(errorf(mongoerr.CodeFailedToParse, "invalid command: %v", err), nil)
			} else {
				reply = c.srv.eng.run(c.srv.ctx, c, cmd, m.Sequences)
			}
			if reply == nil { // the command asked for the connection to be closed
				return
			}
			if m.Flags&wire.FlagMoreToCome != 0 {
				continue
			}
			out = enc.appendMsg(out, c.reqID, h.RequestID, reply)
		default:
			c.srv.log.Debug("mongotest: unsupported opcode", "conn", c.id, "opcode", opCode)
			return
		}
		if _, err := w.Write(out); err != nil {
			return
		}
		if err := w.Flush(); err != nil {
			return
		}
	}
}

// handleQuery answers a legacy OP_QUERY. Current servers accept it only for
// the handshake (hello / isMaster); anything else gets
// UnsupportedOpQueryCommand.
func (c *conn) handleQuery(q *wire.Query) []byte {
	var cmd bson.D
	if err := bson.Unmarshal(q.Query, &cmd); err != nil {
		return marshalReply(c.srv.eng.errorReply(errorf(mongoerr.CodeFailedToParse, "invalid query document: %v", err), nil))
	}
	if len(cmd) > 0 && cmd[0].Key == "$query" {
		if inner, ok := cmd[0].Value.(bson.D); ok {
			cmd = inner
		}
	}
	if len(cmd) == 0 {
		return marshalReply(c.srv.eng.errorReply(errorf(mongoerr.CodeFailedToParse, "empty command"), nil))
	}
	switch cmd[0].Key {
	case "isMaster", "ismaster", "hello":
		reply := c.srv.eng.hello(c, cmd, cmd[0].Key != "hello")
		if reply == nil { // a mongos' fail point closes the connection
			return nil
		}
		return marshalReply(reply)
	}
	return marshalReply(c.srv.eng.errorReply(errorf(mongoerr.CodeUnsupportedOpQueryCommand,
		"Unsupported OP_QUERY command: %s. The client driver may require an upgrade.", cmd[0].Key), nil))
}

func marshalReply(d bson.D) []byte {
	b, err := bson.Marshal(d)
	if err != nil {
		b, _ = bson.Marshal(bson.D{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: "mongotest: cannot encode reply: " + err.Error()},
			{Key: "code", Value: int32(mongoerr.CodeInternalError)}, {Key: "codeName", Value: mongoerr.Name(mongoerr.CodeInternalError)}})
	}
	return b
}

// replyEncoder encodes replies straight into the outgoing message buffer.
type replyEncoder struct {
	buf appendWriter
	enc *bson.Encoder
}

// appendWriter is an io.Writer appending to a byte slice.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

func newReplyEncoder() *replyEncoder {
	r := &replyEncoder{}
	r.enc = bson.NewEncoder(bson.NewDocumentWriter(&r.buf))
	return r
}

// appendMsg appends an OP_MSG reply carrying doc to dst: the header and
// flags first, then the document encoded in place, then the length fixed up.
// A reply holding a storedBatch (a find's, a getMore's) is written element
// by element, each document of the batch copied straight into dst.
func (r *replyEncoder) appendMsg(dst []byte, requestID, responseTo int32, doc bson.D) []byte {
	start := len(dst)
	dst = wire.AppendMsg(dst, requestID, responseTo, 0, nil)
	if holdsStoredBatch(doc) {
		body := len(dst)
		if out, ok := appendReplyDoc(dst, doc); ok {
			binary.LittleEndian.PutUint32(out[start:], uint32(len(out)-start))
			return out
		}
		dst = dst[:body] // a value without a BSON form: the encoder's error reply below
	}
	r.buf.b = dst
	if err := r.enc.Encode(doc); err != nil {
		return wire.AppendMsg(dst[:start], requestID, responseTo, 0, marshalReply(doc))
	}
	dst = r.buf.b
	r.buf.b = nil
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(dst)-start))
	return dst
}

// holdsStoredBatch reports whether a reply has a cursor whose batch is a
// storedBatch.
func holdsStoredBatch(doc bson.D) bool {
	cur, ok := lookupD(doc, "cursor").(bson.D)
	if !ok {
		return false
	}
	for _, e := range cur {
		if _, ok := e.Value.(storedBatch); ok {
			return true
		}
	}
	return false
}

// appendReplyDoc appends d to dst as a BSON document: a storedBatch as its
// documents' bytes (storedBatch.appendArray), a nested bson.D element by
// element, any other value as the driver encodes it. False when a value
// has no BSON form.
func appendReplyDoc(dst []byte, d bson.D) ([]byte, bool) {
	at := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	for _, e := range d {
		if strings.IndexByte(e.Key, 0) >= 0 {
			return nil, false
		}
		switch v := e.Value.(type) {
		case storedBatch:
			dst = bsoncore.AppendHeader(dst, bsoncore.TypeArray, e.Key)
			var err error
			if dst, err = v.appendArray(dst); err != nil {
				return nil, false
			}
		case bson.D:
			dst = bsoncore.AppendHeader(dst, bsoncore.TypeEmbeddedDocument, e.Key)
			var ok bool
			if dst, ok = appendReplyDoc(dst, v); !ok {
				return nil, false
			}
		default:
			t, data, err := bson.MarshalValue(v)
			if err != nil {
				return nil, false
			}
			dst = bsoncore.AppendHeader(dst, bsoncore.Type(t), e.Key)
			dst = append(dst, data...)
		}
	}
	dst = append(dst, 0)
	binary.LittleEndian.PutUint32(dst[at:], uint32(len(dst)-at))
	return dst, true
}
