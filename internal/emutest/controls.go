package emutest

import (
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// AdvanceClock moves the emulator's clock by d, a whole number of
// milliseconds ($$NOW, wallTime, cluster times and TTL expiry follow it),
// as mongotest's Server.AdvanceClock does: {ferryTestAdvanceClock: ms}.
func (s *Server) AdvanceClock(d time.Duration) {
	s.tb.Helper()
	if d%time.Millisecond != 0 {
		s.tb.Fatalf("emutest: AdvanceClock(%v): the emulator's clock moves by whole milliseconds", d)
	}
	s.run(bson.D{{Key: "ferryTestAdvanceClock", Value: d.Milliseconds()}}, nil)
}

// Now returns the emulator's clock, to the nanosecond:
// {ferryTestNow: 1}.
func (s *Server) Now() time.Time {
	s.tb.Helper()
	var reply struct {
		UnixNanos int64 `bson:"unixNanos"`
	}
	s.run(bson.D{{Key: "ferryTestNow", Value: 1}}, &reply)
	return time.Unix(0, reply.UnixNanos)
}

// FailPoint is MongoDB's failCommand fail point, as mongotest.FailPoint
// describes it.
type FailPoint struct {
	// Commands names the commands that fail (data.failCommands).
	Commands []string
	// Times fires the fail point this many times, then turns it off;
	// 0 with Skip 0 means always on.
	Times int
	// Skip lets the first Skip matching commands through.
	Skip int
	// ErrorCode is the code of the error reply (0: no error reply).
	ErrorCode int32
	// ErrorLabels, when non-nil, replace the labels the server would
	// attach (an empty, non-nil slice means no labels at all).
	ErrorLabels []string
	// CloseConnection closes the connection without replying.
	CloseConnection bool
	// BlockFor delays the command (blockConnection + blockTimeMS).
	BlockFor time.Duration
	// AppName limits the fail point to clients with that application name.
	AppName string
	// Namespace limits the fail point to one "db.coll".
	Namespace string
	// WriteConcernError, when set, is added to the successful reply.
	WriteConcernError bson.D
	// ErrorExtraInfo is merged into the error reply.
	ErrorExtraInfo bson.D
}

// FailCommand activates the failCommand fail point, replacing any earlier
// one, with configureFailPoint.
func (s *Server) FailCommand(fp FailPoint) {
	s.tb.Helper()
	data := bson.D{{Key: "failCommands", Value: fp.Commands}}
	if fp.ErrorCode != 0 {
		data = append(data, bson.E{Key: "errorCode", Value: fp.ErrorCode})
	}
	if fp.ErrorLabels != nil {
		data = append(data, bson.E{Key: "errorLabels", Value: fp.ErrorLabels})
	}
	if fp.CloseConnection {
		data = append(data, bson.E{Key: "closeConnection", Value: true})
	}
	if fp.BlockFor > 0 {
		data = append(data, bson.E{Key: "blockConnection", Value: true}, bson.E{Key: "blockTimeMS", Value: fp.BlockFor.Milliseconds()})
	}
	if fp.AppName != "" {
		data = append(data, bson.E{Key: "appName", Value: fp.AppName})
	}
	if fp.Namespace != "" {
		data = append(data, bson.E{Key: "namespace", Value: fp.Namespace})
	}
	if fp.WriteConcernError != nil {
		data = append(data, bson.E{Key: "writeConcernError", Value: fp.WriteConcernError})
	}
	if fp.ErrorExtraInfo != nil {
		data = append(data, bson.E{Key: "errorExtraInfo", Value: fp.ErrorExtraInfo})
	}
	s.configure("failCommand", fp.Times, fp.Skip, data)
}

// RetryableWriteFailPoint is MongoDB's onPrimaryTransactionalWrite fail
// point, as mongotest.RetryableWriteFailPoint describes it: it fires as a
// statement of a retryable write is applied, after the write by default
// (the connection closes and the reply is lost, but the write stays), or
// before it with FailBeforeCommit.
type RetryableWriteFailPoint struct {
	// Times fires the fail point this many times, then turns it off;
	// 0 with Skip 0 means always on.
	Times int
	// Skip lets the first Skip statements through.
	Skip int
	// KeepConnection leaves the connection open (data.closeConnection:
	// false); by default it is closed without a reply.
	KeepConnection bool
	// FailBeforeCommit, when not zero, fails the statement with this
	// code before it is applied.
	FailBeforeCommit int32
}

// FailRetryableWrites activates the onPrimaryTransactionalWrite fail
// point, replacing any earlier one, with configureFailPoint.
func (s *Server) FailRetryableWrites(fp RetryableWriteFailPoint) {
	s.tb.Helper()
	data := bson.D{{Key: "closeConnection", Value: !fp.KeepConnection}}
	if fp.FailBeforeCommit != 0 {
		data = append(data, bson.E{Key: "failBeforeCommitExceptionCode", Value: fp.FailBeforeCommit})
	}
	s.configure("onPrimaryTransactionalWrite", fp.Times, fp.Skip, data)
}

// failPoints are the fail points the emulator has; ClearFailPoints turns
// each off.
var failPoints = []string{"failCommand", "failGetMoreAfterCursorCheckout", "onPrimaryTransactionalWrite"}

// ClearFailPoints turns every fail point off (configureFailPoint, mode
// "off").
func (s *Server) ClearFailPoints() {
	s.tb.Helper()
	for _, name := range failPoints {
		s.run(bson.D{{Key: "configureFailPoint", Value: name}, {Key: "mode", Value: "off"}}, nil)
	}
}

// configure sends {configureFailPoint: name, mode, data}: mode is
// alwaysOn when times and skip are 0, as the Go methods of mongotest
// read them.
func (s *Server) configure(name string, times, skip int, data bson.D) {
	s.tb.Helper()
	var mode any = "alwaysOn"
	if times > 0 || skip > 0 {
		m := bson.D{}
		if times > 0 {
			m = append(m, bson.E{Key: "times", Value: times})
		}
		if skip > 0 {
			m = append(m, bson.E{Key: "skip", Value: skip})
		}
		mode = m
	}
	s.run(bson.D{{Key: "configureFailPoint", Value: name}, {Key: "mode", Value: mode}, {Key: "data", Value: data}}, nil)
}
