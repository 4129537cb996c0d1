package unified

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// maxSchemaMajor is the major schema version the runner reads. Within it,
// features the runner lacks are reported per test, not per file, so files of
// a newer minor version still run whatever they share with older ones.
const maxSchemaMajor = 1

// File is one parsed unified-format test file.
type File struct {
	Path              string
	Description       string
	SchemaVersion     string
	RunOnRequirements []Requirement
	CreateEntities    []EntityDef
	InitialData       []CollectionData
	Tests             []Test
}

// Requirement is one runOnRequirement object. A list of them is satisfied
// when any one of them is.
type Requirement struct {
	MinServerVersion string
	MaxServerVersion string
	Topologies       []string
	Serverless       string
	Auth             *bool
	AuthMechanism    string
	ServerParameters bson.Raw
	CSFLE            *bool // true for an object or true, false for false
}

// EntityDef is one element of createEntities: its kind (client, database,
// collection, session, …), its id and the whole nested object.
type EntityDef struct {
	Kind string
	ID   string
	Spec bson.Raw
}

// CollectionData is one element of initialData or outcome.
type CollectionData struct {
	CollectionName string
	DatabaseName   string
	CreateOptions  bson.Raw
	Documents      []bson.Raw
}

// Test is one element of tests.
type Test struct {
	Description       string
	RunOnRequirements []Requirement
	SkipReason        string
	Operations        []Operation
	ExpectEvents      []ExpectedEvents
	Outcome           []CollectionData
	// Problem is set when the test uses something the runner cannot read;
	// such a test fails with this reason.
	Problem error
}

// Operation is one element of a test's operations.
type Operation struct {
	Name                 string
	Object               string
	Arguments            bson.Raw
	IgnoreResultAndError bool
	ExpectError          *ExpectedError
	ExpectResult         *bson.RawValue
	SaveResultAsEntity   string
}

// ExpectedError is an operation's expectError.
type ExpectedError struct {
	IsError            *bool
	IsClientError      *bool
	IsTimeoutError     *bool
	ErrorContains      *string
	ErrorCode          *int64
	ErrorCodeName      *string
	ErrorLabelsContain []string
	ErrorLabelsOmit    []string
	ErrorResponse      bson.Raw
	ExpectResult       *bson.RawValue
	// WriteErrors and WriteConcernErrors are the clientBulkWrite
	// assertions: write errors by model index, write concern errors in
	// order.
	WriteErrors        bson.Raw
	WriteConcernErrors []bson.Raw
}

// ExpectedEvents is one element of a test's expectEvents.
type ExpectedEvents struct {
	Client            string
	EventType         string // "command" when omitted
	IgnoreExtraEvents bool
	Events            []ExpectedEvent
}

// ExpectedEvent is one expected event: its kind (e.g. commandStartedEvent)
// and its assertions.
type ExpectedEvent struct {
	Kind string
	Spec bson.Raw
}

// ParseFile reads and parses one test file.
func ParseFile(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	f.Path = path
	return f, nil
}

// Parse parses the Extended JSON text of one test file. Problems confined to
// one test are recorded in that test's Problem; problems with the file as a
// whole are returned.
func Parse(data []byte) (*File, error) {
	var raw bson.Raw
	if err := bson.UnmarshalExtJSON(data, false, &raw); err != nil {
		return nil, fmt.Errorf("not Extended JSON: %w", err)
	}
	r := newFields(raw, "file")
	f := &File{
		Description:   r.str("description"),
		SchemaVersion: r.reqStr("schemaVersion"),
	}
	r.value("_yamlAnchors") // YAML-only helper some files keep; carries no meaning
	if err := checkSchemaVersion(f.SchemaVersion); err != nil && r.err == nil {
		return nil, err
	}
	var err error
	if f.RunOnRequirements, err = parseRequirements(r, "runOnRequirements"); err != nil {
		return nil, err
	}
	for i, d := range r.docs("createEntities") {
		e, err := parseEntityDef(d, fmt.Sprintf("createEntities[%d]", i))
		if err != nil {
			return nil, err
		}
		f.CreateEntities = append(f.CreateEntities, e)
	}
	for i, d := range r.docs("initialData") {
		c, err := parseCollectionData(d, fmt.Sprintf("initialData[%d]", i))
		if err != nil {
			return nil, err
		}
		f.InitialData = append(f.InitialData, c)
	}
	if !r.has("tests") {
		r.fail("tests is required")
	}
	for i, d := range r.docs("tests") {
		f.Tests = append(f.Tests, parseTest(d, i))
	}
	if err := r.done("field"); err != nil {
		return nil, err
	}
	return f, nil
}

// checkSchemaVersion accepts any 1.x version.
func checkSchemaVersion(v string) error {
	parts, err := parseVersion(v)
	if err != nil {
		return fmt.Errorf("schemaVersion: %w", err)
	}
	if parts[0] != maxSchemaMajor {
		return fmt.Errorf("unified runner: schemaVersion %s not supported (major version %d only)", v, maxSchemaMajor)
	}
	return nil
}

// parseVersion parses "major[.minor[.patch]]", ignoring anything after the
// third component or after a '-' (pre-release builds).
func parseVersion(v string) ([3]int, error) {
	var out [3]int
	if i := strings.IndexByte(v, '-'); i >= 0 {
		v = v[:i]
	}
	parts := strings.Split(v, ".")
	if v == "" || len(parts) == 0 {
		return out, fmt.Errorf("bad version string %q", v)
	}
	for i := 0; i < len(parts) && i < 3; i++ {
		n, err := strconv.Atoi(parts[i])
		if err != nil || n < 0 {
			return out, fmt.Errorf("bad version string %q", v)
		}
		out[i] = n
	}
	return out, nil
}

func parseRequirements(r *fields, key string) ([]Requirement, error) {
	var out []Requirement
	for i, d := range r.docs(key) {
		q := newFields(d, fmt.Sprintf("%s[%d]", key, i))
		req := Requirement{
			MinServerVersion: q.str("minServerVersion"),
			MaxServerVersion: q.str("maxServerVersion"),
			Topologies:       q.strings("topologies"),
			Serverless:       q.str("serverless"),
			Auth:             q.boolPtr("auth"),
			AuthMechanism:    q.str("authMechanism"),
			ServerParameters: q.doc("serverParameters"),
		}
		if v, ok := q.value("csfle"); ok {
			b := true
			if x, ok := v.BooleanOK(); ok {
				b = x
			}
			req.CSFLE = &b
		}
		for _, s := range []string{req.MinServerVersion, req.MaxServerVersion} {
			if s == "" {
				continue
			}
			if _, err := parseVersion(s); err != nil {
				q.fail("%v", err)
			}
		}
		if err := q.done("requirement"); err != nil {
			return nil, err
		}
		out = append(out, req)
	}
	return out, r.err
}

func parseEntityDef(d bson.Raw, where string) (EntityDef, error) {
	elems, err := d.Elements()
	if err != nil {
		return EntityDef{}, fmt.Errorf("%s: %w", where, err)
	}
	if len(elems) != 1 {
		return EntityDef{}, fmt.Errorf("%s: an entity must have exactly one key, has %d", where, len(elems))
	}
	spec, ok := elems[0].Value().DocumentOK()
	if !ok {
		return EntityDef{}, fmt.Errorf("%s: %s must be a document", where, elems[0].Key())
	}
	e := EntityDef{Kind: elems[0].Key(), Spec: spec}
	idv, err := spec.LookupErr("id")
	if err != nil {
		return EntityDef{}, fmt.Errorf("%s: %s.id is required", where, e.Kind)
	}
	if e.ID, ok = idv.StringValueOK(); !ok {
		return EntityDef{}, fmt.Errorf("%s: %s.id must be a string", where, e.Kind)
	}
	return e, nil
}

func parseCollectionData(d bson.Raw, where string) (CollectionData, error) {
	r := newFields(d, where)
	c := CollectionData{
		CollectionName: r.reqStr("collectionName"),
		DatabaseName:   r.reqStr("databaseName"),
		CreateOptions:  r.doc("createOptions"),
	}
	if !r.has("documents") {
		r.fail("documents is required")
	}
	c.Documents = r.docs("documents")
	return c, r.done("field")
}

// parseTest never fails: a problem is recorded in the test.
func parseTest(d bson.Raw, i int) Test {
	r := newFields(d, fmt.Sprintf("tests[%d]", i))
	t := Test{Description: r.reqStr("description"), SkipReason: r.str("skipReason")}
	if t.Description != "" {
		r.where = fmt.Sprintf("test %q", t.Description)
	}
	var err error
	if t.RunOnRequirements, err = parseRequirements(r, "runOnRequirements"); err != nil {
		t.Problem = err
		return t
	}
	if !r.has("operations") {
		r.fail("operations is required")
	}
	for j, od := range r.docs("operations") {
		op, err := parseOperation(od, fmt.Sprintf("operations[%d]", j))
		if err != nil {
			t.Problem = err
			return t
		}
		t.Operations = append(t.Operations, op)
	}
	for j, ed := range r.docs("expectEvents") {
		ee, err := parseExpectedEvents(ed, fmt.Sprintf("expectEvents[%d]", j))
		if err != nil {
			t.Problem = err
			return t
		}
		t.ExpectEvents = append(t.ExpectEvents, ee)
	}
	for j, cd := range r.docs("outcome") {
		c, err := parseCollectionData(cd, fmt.Sprintf("outcome[%d]", j))
		if err != nil {
			t.Problem = err
			return t
		}
		t.Outcome = append(t.Outcome, c)
	}
	t.Problem = r.done("test field")
	return t
}

func parseOperation(d bson.Raw, where string) (Operation, error) {
	r := newFields(d, where)
	op := Operation{
		Name:                 r.reqStr("name"),
		Object:               r.reqStr("object"),
		Arguments:            r.doc("arguments"),
		IgnoreResultAndError: r.boolean("ignoreResultAndError"),
		SaveResultAsEntity:   r.str("saveResultAsEntity"),
	}
	if op.Name != "" {
		r.where = fmt.Sprintf("%s (%s.%s)", where, op.Object, op.Name)
	}
	if v, ok := r.value("expectResult"); ok {
		op.ExpectResult = &v
	}
	if ed := r.doc("expectError"); ed != nil {
		ee, err := parseExpectedError(ed, r.where+".expectError")
		if err != nil {
			return op, err
		}
		op.ExpectError = ee
	}
	return op, r.done("field")
}

func parseExpectedError(d bson.Raw, where string) (*ExpectedError, error) {
	r := newFields(d, where)
	e := &ExpectedError{
		IsError:            r.boolPtr("isError"),
		IsClientError:      r.boolPtr("isClientError"),
		IsTimeoutError:     r.boolPtr("isTimeoutError"),
		ErrorLabelsContain: r.strings("errorLabelsContain"),
		ErrorLabelsOmit:    r.strings("errorLabelsOmit"),
		ErrorResponse:      r.doc("errorResponse"),
		ErrorCode:          r.int64Ptr("errorCode"),
	}
	if r.has("errorContains") {
		s := r.str("errorContains")
		e.ErrorContains = &s
	}
	if r.has("errorCodeName") {
		s := r.str("errorCodeName")
		e.ErrorCodeName = &s
	}
	if v, ok := r.value("expectResult"); ok {
		e.ExpectResult = &v
	}
	e.WriteErrors = r.doc("writeErrors")
	if r.has("writeConcernErrors") {
		e.WriteConcernErrors = r.docs("writeConcernErrors")
		if e.WriteConcernErrors == nil {
			e.WriteConcernErrors = []bson.Raw{}
		}
	}
	return e, r.done("field")
}

func parseExpectedEvents(d bson.Raw, where string) (ExpectedEvents, error) {
	r := newFields(d, where)
	ee := ExpectedEvents{
		Client:            r.reqStr("client"),
		EventType:         r.str("eventType"),
		IgnoreExtraEvents: r.boolean("ignoreExtraEvents"),
	}
	if ee.EventType == "" {
		ee.EventType = "command"
	}
	if !r.has("events") {
		r.fail("events is required")
	}
	for i, ed := range r.docs("events") {
		elems, err := ed.Elements()
		if err != nil || len(elems) != 1 {
			return ee, fmt.Errorf("%s.events[%d]: an event must have exactly one key", where, i)
		}
		spec, ok := elems[0].Value().DocumentOK()
		if !ok {
			return ee, fmt.Errorf("%s.events[%d]: %s must be a document", where, i, elems[0].Key())
		}
		ee.Events = append(ee.Events, ExpectedEvent{Kind: elems[0].Key(), Spec: spec})
	}
	return ee, r.done("field")
}
