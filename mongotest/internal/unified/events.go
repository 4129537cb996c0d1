package unified

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
)

// Command event kinds, as named in observeEvents and expectEvents.
const (
	cmdStarted   = "commandStartedEvent"
	cmdSucceeded = "commandSucceededEvent"
	cmdFailed    = "commandFailedEvent"
)

// sensitiveCommands are never observed unless observeSensitiveCommands is
// set (Command Logging and Monitoring spec, "Security").
var sensitiveCommands = map[string]bool{
	"authenticate": true, "saslstart": true, "saslcontinue": true, "getnonce": true,
	"createuser": true, "updateuser": true, "copydbgetnonce": true, "copydbsaslstart": true, "copydb": true,
}

// helloCommands are sensitive when they carry speculativeAuthenticate,
// which the driver shows by redacting the command to an empty document.
var helloCommands = map[string]bool{"hello": true, "ismaster": true}

// observedEvent is one command monitoring event kept for expectEvents.
type observedEvent struct {
	kind         string
	commandName  string
	databaseName string
	command      bson.Raw // started
	reply        bson.Raw // succeeded
	failure      error    // failed
	hasServiceID bool
	hasServerCID bool
}

// eventLog is a client entity's command monitor. It records events only
// between start and stop, and never the ignored ones.
type eventLog struct {
	observe   map[string]bool
	ignore    map[string]bool
	sensitive bool

	mu      sync.Mutex
	on      bool
	skipped map[int64]bool // request ids whose started event was ignored
	events  []observedEvent
}

func newEventLog(observe, ignore []string, sensitive bool) *eventLog {
	l := &eventLog{observe: map[string]bool{}, ignore: map[string]bool{"configurefailpoint": true}, sensitive: sensitive, skipped: map[int64]bool{}}
	for _, o := range observe {
		l.observe[o] = true
	}
	for _, c := range ignore {
		l.ignore[strings.ToLower(c)] = true
	}
	return l
}

func (l *eventLog) monitor() *event.CommandMonitor {
	return &event.CommandMonitor{
		Started: func(_ context.Context, e *event.CommandStartedEvent) {
			l.mu.Lock()
			defer l.mu.Unlock()
			if !l.on {
				return
			}
			name := strings.ToLower(e.CommandName)
			if l.ignore[name] || (!l.sensitive && (sensitiveCommands[name] || (helloCommands[name] && len(e.Command) <= 5))) {
				l.skipped[e.RequestID] = true
				return
			}
			if !l.observe[cmdStarted] {
				return
			}
			l.events = append(l.events, observedEvent{
				kind: cmdStarted, commandName: e.CommandName, databaseName: e.DatabaseName,
				command:      append(bson.Raw(nil), e.Command...),
				hasServiceID: e.ServiceID != nil, hasServerCID: e.ServerConnectionID != nil,
			})
		},
		Succeeded: func(_ context.Context, e *event.CommandSucceededEvent) {
			l.mu.Lock()
			defer l.mu.Unlock()
			if !l.on || l.finishedSkipped(&e.CommandFinishedEvent) || !l.observe[cmdSucceeded] {
				return
			}
			l.events = append(l.events, observedEvent{
				kind: cmdSucceeded, commandName: e.CommandName, databaseName: e.DatabaseName,
				reply:        append(bson.Raw(nil), e.Reply...),
				hasServiceID: e.ServiceID != nil, hasServerCID: e.ServerConnectionID != nil,
			})
		},
		Failed: func(_ context.Context, e *event.CommandFailedEvent) {
			l.mu.Lock()
			defer l.mu.Unlock()
			if !l.on || l.finishedSkipped(&e.CommandFinishedEvent) || !l.observe[cmdFailed] {
				return
			}
			l.events = append(l.events, observedEvent{
				kind: cmdFailed, commandName: e.CommandName, databaseName: e.DatabaseName,
				failure:      e.Failure,
				hasServiceID: e.ServiceID != nil, hasServerCID: e.ServerConnectionID != nil,
			})
		},
	}
}

// finishedSkipped reports whether the finished event belongs to an ignored
// command; l.mu is held.
func (l *eventLog) finishedSkipped(e *event.CommandFinishedEvent) bool {
	if l.skipped[e.RequestID] {
		delete(l.skipped, e.RequestID)
		return true
	}
	return l.ignore[strings.ToLower(e.CommandName)]
}

func (l *eventLog) start() {
	l.mu.Lock()
	l.on = true
	l.mu.Unlock()
}

func (l *eventLog) stop() {
	l.mu.Lock()
	l.on = false
	l.mu.Unlock()
}

func (l *eventLog) snapshot() []observedEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]observedEvent(nil), l.events...)
}

// checkEventKinds rejects event kinds the runner cannot observe.
func checkObserveEvents(kinds []string) error {
	for _, k := range kinds {
		switch k {
		case cmdStarted, cmdSucceeded, cmdFailed:
		default:
			return fmt.Errorf("unified runner: observeEvents %s not supported (command events only)", k)
		}
	}
	return nil
}

// checkExpectedEvents validates an expectEvents entry without a server.
func checkExpectedEvents(ee ExpectedEvents) error {
	if ee.EventType != "command" {
		return fmt.Errorf("unified runner: expectEvents eventType %q not supported (command events only)", ee.EventType)
	}
	for i, e := range ee.Events {
		if _, err := parseExpectedCommandEvent(e, fmt.Sprintf("expectEvents[%s].events[%d]", ee.Client, i)); err != nil {
			return err
		}
	}
	return nil
}

// expectedCommandEvent is the parsed form of one expected command event.
type expectedCommandEvent struct {
	kind          string
	command       bson.Raw
	reply         bson.Raw
	commandName   *string
	databaseName  *string
	hasServiceID  *bool
	hasServerCID  *bool
	expectedField string // "command" or "reply", for messages
}

func parseExpectedCommandEvent(e ExpectedEvent, where string) (expectedCommandEvent, error) {
	r := newFields(e.Spec, where+"."+e.Kind)
	x := expectedCommandEvent{kind: e.Kind}
	switch e.Kind {
	case cmdStarted:
		x.command = r.doc("command")
	case cmdSucceeded:
		x.reply = r.doc("reply")
	case cmdFailed:
	default:
		return x, fmt.Errorf("unified runner: %s: event %s not supported", where, e.Kind)
	}
	if r.has("commandName") {
		s := r.str("commandName")
		x.commandName = &s
	}
	if r.has("databaseName") {
		s := r.str("databaseName")
		x.databaseName = &s
	}
	x.hasServiceID = r.boolPtr("hasServiceId")
	x.hasServerCID = r.boolPtr("hasServerConnectionId")
	return x, r.done("field")
}

// verifyEvents compares the observed events of one client with the
// expected ones, in order.
func verifyEvents(m *matcher, ee ExpectedEvents, got []observedEvent) error {
	for i, e := range ee.Events {
		where := fmt.Sprintf("expectEvents[%s][%d] %s", ee.Client, i, e.Kind)
		x, err := parseExpectedCommandEvent(e, where)
		if err != nil {
			return err
		}
		if i >= len(got) {
			return fmt.Errorf("%s: missing; only %d events observed: %s", where, len(got), summarize(got))
		}
		if err := verifyEvent(m, x, got[i]); err != nil {
			return fmt.Errorf("%s: %w (observed: %s)", where, err, summarize(got))
		}
	}
	if !ee.IgnoreExtraEvents && len(got) > len(ee.Events) {
		return fmt.Errorf("expectEvents[%s]: %d unexpected extra events after the %d expected: %s",
			ee.Client, len(got)-len(ee.Events), len(ee.Events), summarize(got[len(ee.Events):]))
	}
	return nil
}

func verifyEvent(m *matcher, x expectedCommandEvent, got observedEvent) error {
	if got.kind != x.kind {
		return fmt.Errorf("got %s %s", got.kind, got.commandName)
	}
	if x.commandName != nil && *x.commandName != got.commandName {
		return fmt.Errorf("commandName: expected %q, got %q", *x.commandName, got.commandName)
	}
	if x.databaseName != nil && *x.databaseName != got.databaseName {
		return fmt.Errorf("databaseName: expected %q, got %q", *x.databaseName, got.databaseName)
	}
	if x.hasServiceID != nil && *x.hasServiceID != got.hasServiceID {
		return fmt.Errorf("hasServiceId: expected %v, got %v", *x.hasServiceID, got.hasServiceID)
	}
	if x.hasServerCID != nil && *x.hasServerCID != got.hasServerCID {
		return fmt.Errorf("hasServerConnectionId: expected %v, got %v", *x.hasServerCID, got.hasServerCID)
	}
	if x.command != nil {
		if err := m.match("command", docValue(x.command), docValue(got.command), true, true); err != nil {
			return err
		}
	}
	if x.reply != nil {
		if err := m.match("reply", docValue(x.reply), docValue(got.reply), true, true); err != nil {
			return err
		}
	}
	return nil
}

// summarize lists events briefly: "commandStartedEvent aggregate, …".
func summarize(evs []observedEvent) string {
	if len(evs) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(evs))
	for _, e := range evs {
		parts = append(parts, strings.TrimSuffix(e.kind, "Event")+" "+e.commandName)
	}
	return shorten(strings.Join(parts, ", "))
}

func docValue(d bson.Raw) bson.RawValue {
	return bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: d}
}
