package mongotest

import (
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// FailPoint makes chosen commands fail the way MongoDB's failCommand fail
// point does (MONGO-SEMANTICS §11). Set it from Go with Server.FailCommand,
// or from any driver with
//
//	{configureFailPoint: "failCommand", mode: ..., data: {...}}
//
// on the admin database.
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

// failPoints holds the active fail points by name ("failCommand",
// "failGetMoreAfterCursorCheckout").
type failPoints struct {
	mu     sync.Mutex
	active map[string]*failPointState
}

type failPointState struct {
	fp        FailPoint
	alwaysOn  bool
	remaining int
	skip      int
	hits      int
}

// FailCommand activates the failCommand fail point, replacing any earlier
// one. A zero Times and Skip means always on.
func (s *Server) FailCommand(fp FailPoint) { s.eng.fail.set("failCommand", fp) }

// FailGetMoreAfterCursorCheckout activates MongoDB's
// failGetMoreAfterCursorCheckout fail point: getMore fails with code after
// the cursor is found, so the server labels the error as it would a real one
// (ResumableChangeStreamError for resumable codes on change streams).
func (s *Server) FailGetMoreAfterCursorCheckout(code int32, times int) {
	s.eng.fail.set("failGetMoreAfterCursorCheckout", FailPoint{Commands: []string{"getMore"}, ErrorCode: code, Times: times})
}

// ClearFailPoints turns every fail point off.
func (s *Server) ClearFailPoints() {
	s.eng.fail.mu.Lock()
	s.eng.fail.active = nil
	s.eng.fail.mu.Unlock()
}

func (f *failPoints) set(name string, fp FailPoint) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.active == nil {
		f.active = make(map[string]*failPointState)
	}
	f.active[name] = &failPointState{fp: fp, alwaysOn: fp.Times == 0, remaining: fp.Times, skip: fp.Skip}
}

func (f *failPoints) off(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.active[name]
	delete(f.active, name)
	if st == nil {
		return 0
	}
	return st.hits
}

// check reports the fail point that fires for this command, if any, and
// counts the activation.
func (f *failPoints) check(name string, r *request, ns string) *FailPoint {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.active[name]
	if st == nil {
		return nil
	}
	fp := &st.fp
	if !contains(fp.Commands, r.name) {
		return nil
	}
	if fp.AppName != "" && (r.conn == nil || r.conn.appName != fp.AppName) {
		return nil
	}
	if fp.Namespace != "" && fp.Namespace != ns {
		return nil
	}
	if fp.ErrorCode == 0 && !fp.CloseConnection && fp.BlockFor == 0 && fp.WriteConcernError == nil {
		return nil
	}
	if st.skip > 0 {
		st.skip--
		return nil
	}
	st.hits++
	if !st.alwaysOn {
		st.remaining--
		if st.remaining <= 0 {
			delete(f.active, name)
		}
	}
	out := *fp
	return &out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// cmdConfigureFailPoint implements {configureFailPoint: name, mode, data}.
func cmdConfigureFailPoint(e *engine, r *request) (bson.D, error) {
	name, _ := r.cmd[0].Value.(string)
	switch name {
	case "failCommand", "failGetMoreAfterCursorCheckout":
	default:
		return nil, errorf(codeFailedToParse, "Cannot find FailPoint named %q (mongotest supports failCommand and failGetMoreAfterCursorCheckout)", name)
	}
	mode, ok := r.arg("mode")
	if !ok {
		return nil, errorf(codeFailedToParse, "FailPoint mode is missing")
	}
	var fp FailPoint
	switch m := mode.(type) {
	case string:
		switch m {
		case "off":
			n := e.fail.off(name)
			return bson.D{{Key: "count", Value: int64(n)}}, nil
		case "alwaysOn":
		default:
			return nil, errorf(codeBadValue, "Unknown FailPoint mode: %s", m)
		}
	case bson.D:
		if v, ok := lookupTop(m, "times"); ok {
			n, ok := asInt64(v)
			if !ok || n < 0 {
				return nil, errorf(codeBadValue, "'times' must be a non-negative number")
			}
			if n == 0 {
				e.fail.off(name)
				return bson.D{{Key: "count", Value: int64(0)}}, nil
			}
			fp.Times = int(n)
		}
		if v, ok := lookupTop(m, "skip"); ok {
			n, ok := asInt64(v)
			if !ok || n < 0 {
				return nil, errorf(codeBadValue, "'skip' must be a non-negative number")
			}
			fp.Skip = int(n)
		}
		if _, ok := lookupTop(m, "activationProbability"); ok {
			return nil, errorf(codeBadValue, "mongotest does not support activationProbability (tests must be deterministic)")
		}
	default:
		return nil, errorf(codeTypeMismatch, "FailPoint mode must be a string or an object")
	}
	data, _ := lookupD(r.cmd, "data").(bson.D)
	for _, el := range data {
		switch el.Key {
		case "failCommands":
			arr, _ := el.Value.(bson.A)
			for _, c := range arr {
				if s, ok := c.(string); ok {
					fp.Commands = append(fp.Commands, s)
				}
			}
		case "errorCode":
			n, ok := asInt64(el.Value)
			if !ok {
				return nil, errorf(codeTypeMismatch, "'errorCode' must be a number")
			}
			fp.ErrorCode = int32(n)
		case "errorLabels":
			arr, _ := el.Value.(bson.A)
			fp.ErrorLabels = []string{}
			for _, l := range arr {
				if s, ok := l.(string); ok {
					fp.ErrorLabels = append(fp.ErrorLabels, s)
				}
			}
		case "closeConnection":
			fp.CloseConnection = truthy(el.Value)
		case "blockConnection":
			if truthy(el.Value) && fp.BlockFor == 0 {
				fp.BlockFor = -1 // set by blockTimeMS
			}
		case "blockTimeMS":
			n, ok := asInt64(el.Value)
			if !ok || n < 0 {
				return nil, errorf(codeInvalidOptions, "'blockTimeMS' must be a non-negative number")
			}
			if fp.BlockFor != 0 || truthy(lookupD(data, "blockConnection")) {
				fp.BlockFor = time.Duration(n) * time.Millisecond
			}
		case "appName":
			fp.AppName, _ = el.Value.(string)
		case "namespace":
			fp.Namespace, _ = el.Value.(string)
		case "writeConcernError":
			fp.WriteConcernError, _ = el.Value.(bson.D)
		case "errorExtraInfo":
			fp.ErrorExtraInfo, _ = el.Value.(bson.D)
		case "threadName", "failInternalCommands", "failAllCommands", "failLocalClients":
		}
	}
	if fp.BlockFor < 0 {
		return nil, errorf(codeInvalidOptions, "must specify 'blockTimeMS' when 'blockConnection' is true")
	}
	if name == "failGetMoreAfterCursorCheckout" {
		fp.Commands = []string{"getMore"}
	}
	e.fail.set(name, fp)
	return bson.D{{Key: "count", Value: int64(0)}}, nil
}
