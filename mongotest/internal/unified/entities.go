package unified

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Entity kinds. Change streams, cursors and plain BSON values are never
// declared in createEntities; operations create them.
const (
	kindClient       = "client"
	kindDatabase     = "database"
	kindCollection   = "collection"
	kindSession      = "session"
	kindChangeStream = "changeStream"
	kindCursor       = "cursor"
	kindValue        = "value"
)

// entity is one value of the entity map.
type entity struct {
	kind   string
	client *clientEntity
	db     *mongo.Database
	coll   *mongo.Collection
	sess   *mongo.Session
	lsid   bson.Raw
	stream *mongo.ChangeStream
	cursor *mongo.Cursor
	value  bson.RawValue
}

// clientEntity is a client entity and its command monitor.
type clientEntity struct {
	client *mongo.Client
	log    *eventLog
	closed bool
}

// entityMap is the entity map of one test. It is safe for concurrent use.
type entityMap struct {
	mu    sync.Mutex
	m     map[string]*entity
	order []string
}

func newEntityMap() *entityMap { return &entityMap{m: map[string]*entity{}} }

func (em *entityMap) add(id string, e *entity) error {
	em.mu.Lock()
	defer em.mu.Unlock()
	if _, dup := em.m[id]; dup {
		return fmt.Errorf("entity %q already exists", id)
	}
	em.m[id] = e
	em.order = append(em.order, id)
	return nil
}

// get returns the entity id, which must be of one of kinds (any kind when
// kinds is empty).
func (em *entityMap) get(id string, kinds ...string) (*entity, error) {
	em.mu.Lock()
	e, ok := em.m[id]
	em.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("no entity %q", id)
	}
	if len(kinds) == 0 {
		return e, nil
	}
	for _, k := range kinds {
		if e.kind == k {
			return e, nil
		}
	}
	return nil, fmt.Errorf("entity %q is a %s, not a %s", id, e.kind, strings.Join(kinds, " or "))
}

func (em *entityMap) bsonValue(name string) (bson.RawValue, error) {
	e, err := em.get(name, kindValue)
	if err != nil {
		return bson.RawValue{}, err
	}
	return e.value, nil
}

func (em *entityMap) sessionLsid(name string) (bson.Raw, error) {
	e, err := em.get(name, kindSession)
	if err != nil {
		return nil, err
	}
	return e.lsid, nil
}

// clients returns the client entities in creation order.
func (em *entityMap) clients() []*clientEntity {
	em.mu.Lock()
	defer em.mu.Unlock()
	var out []*clientEntity
	for _, id := range em.order {
		if e := em.m[id]; e.kind == kindClient {
			out = append(out, e.client)
		}
	}
	return out
}

// close ends sessions, closes change streams and cursors, then disconnects
// clients, newest entity first; errors are ignored as the spec requires.
func (em *entityMap) close(ctx context.Context) {
	em.mu.Lock()
	ents := make([]*entity, 0, len(em.order))
	for i := len(em.order) - 1; i >= 0; i-- {
		ents = append(ents, em.m[em.order[i]])
	}
	em.mu.Unlock()
	for _, e := range ents {
		switch e.kind {
		case kindChangeStream:
			_ = e.stream.Close(ctx)
		case kindCursor:
			_ = e.cursor.Close(ctx)
		case kindSession:
			e.sess.EndSession(ctx)
		}
	}
	for _, e := range ents {
		if e.kind == kindClient && !e.client.closed {
			e.client.closed = true
			_ = e.client.client.Disconnect(ctx)
		}
	}
}

// clientSpec is a parsed client entity.
type clientSpec struct {
	id                  string
	uriOptions          bson.Raw
	useMultipleMongoses *bool
	observeEvents       []string
	ignoreCommands      []string
	observeSensitive    bool
}

func parseClientSpec(e EntityDef) (clientSpec, error) {
	r := newFields(e.Spec, "client "+e.ID)
	s := clientSpec{
		id:                  r.reqStr("id"),
		uriOptions:          r.doc("uriOptions"),
		useMultipleMongoses: r.boolPtr("useMultipleMongoses"),
		observeEvents:       r.strings("observeEvents"),
		ignoreCommands:      r.strings("ignoreCommandMonitoringEvents"),
		observeSensitive:    r.boolean("observeSensitiveCommands"),
	}
	for _, opt := range []string{"socketTimeoutMS", "waitQueueTimeoutMS"} {
		if _, err := s.uriOptions.LookupErr(opt); s.uriOptions != nil && err == nil {
			r.unsupportedByDriver("has no %s (its own spec runner skips the tests that set it)", opt)
		}
	}
	if err := r.done("field"); err != nil {
		return s, err
	}
	if _, err := uriWithOptions("mongodb://localhost", s.uriOptions, false); err != nil {
		return s, err
	}
	return s, checkObserveEvents(s.observeEvents)
}

// parseEntitySpec validates any entity definition without a server.
func parseEntitySpec(e EntityDef) error {
	switch e.Kind {
	case kindClient:
		_, err := parseClientSpec(e)
		return err
	case kindDatabase:
		_, _, _, err := parseDatabaseSpec(e)
		return err
	case kindCollection:
		_, _, _, err := parseCollectionSpec(e)
		return err
	case kindSession:
		_, _, err := parseSessionSpec(e)
		return err
	}
	return fmt.Errorf("unified runner: entity kind %s (%s) not supported", e.Kind, e.ID)
}

func parseDatabaseSpec(e EntityDef) (client, name string, c concerns, err error) {
	r := newFields(e.Spec, "database "+e.ID)
	r.reqStr("id")
	client, name = r.reqStr("client"), r.reqStr("databaseName")
	opts := r.doc("databaseOptions")
	if err = r.done("field"); err != nil {
		return
	}
	c, err = parseConcerns(opts, "database "+e.ID+".databaseOptions")
	return
}

func parseCollectionSpec(e EntityDef) (db, name string, c concerns, err error) {
	r := newFields(e.Spec, "collection "+e.ID)
	r.reqStr("id")
	db, name = r.reqStr("database"), r.reqStr("collectionName")
	opts := r.doc("collectionOptions")
	if err = r.done("field"); err != nil {
		return
	}
	c, err = parseConcerns(opts, "collection "+e.ID+".collectionOptions")
	return
}

func parseSessionSpec(e EntityDef) (string, *options.SessionOptionsBuilder, error) {
	r := newFields(e.Spec, "session "+e.ID)
	r.reqStr("id")
	client := r.reqStr("client")
	so := r.doc("sessionOptions")
	if err := r.done("field"); err != nil {
		return "", nil, err
	}
	opts := options.Session()
	if so == nil {
		return client, opts, nil
	}
	s := newFields(so, "session "+e.ID+".sessionOptions")
	if b := s.boolPtr("causalConsistency"); b != nil {
		opts.SetCausalConsistency(*b)
	}
	if b := s.boolPtr("snapshot"); b != nil {
		opts.SetSnapshot(*b)
	}
	// snapshotTime names an entity; createEntity resolves it.
	s.str("snapshotTime")
	if d := s.doc("defaultTransactionOptions"); d != nil {
		to, err := parseTransactionOptions(d, "session "+e.ID+".defaultTransactionOptions")
		if err != nil {
			return "", nil, err
		}
		opts.SetDefaultTransactionOptions(to)
	}
	return client, opts, s.done("option")
}

func parseTransactionOptions(d bson.Raw, where string) (*options.TransactionOptionsBuilder, error) {
	if _, err := d.LookupErr("maxCommitTimeMS"); err == nil {
		return nil, &driverLimit{reason: "has no maxCommitTimeMS (its own spec runner skips these tests: \"Deprecated transactions CSOT Options\", GODRIVER-2348)"}
	}
	to := options.Transaction()
	c, err := parseConcerns(d, where)
	if err != nil {
		return nil, err
	}
	if c.rc != nil {
		to.SetReadConcern(c.rc)
	}
	if c.rp != nil {
		to.SetReadPreference(c.rp)
	}
	if c.wc != nil {
		to.SetWriteConcern(c.wc)
	}
	return to, nil
}

// uriWithOptions returns base with the given URI options added (replacing
// any of the same name). singleHost keeps only the first host, for
// useMultipleMongoses: false on a sharded cluster.
func uriWithOptions(base string, opts bson.Raw, singleHost bool) (string, error) {
	scheme, rest, ok := strings.Cut(base, "://")
	if !ok {
		return "", fmt.Errorf("bad URI %q: no scheme", base)
	}
	hostEnd := strings.IndexAny(rest, "/?")
	if hostEnd < 0 {
		hostEnd = len(rest)
	}
	hosts, tail := rest[:hostEnd], rest[hostEnd:]
	path, rawQuery, _ := strings.Cut(tail, "?")
	if singleHost && scheme == "mongodb" {
		if i := strings.IndexByte(hosts, ','); i >= 0 {
			hosts = hosts[:i]
		}
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return "", fmt.Errorf("bad URI query: %w", err)
	}
	build := func() string {
		if len(q) == 0 {
			return scheme + "://" + hosts + path
		}
		if path == "" {
			path = "/"
		}
		return scheme + "://" + hosts + path + "?" + q.Encode()
	}
	if opts == nil {
		return build(), nil
	}
	elems, err := opts.Elements()
	if err != nil {
		return "", err
	}
	lower := map[string]string{}
	for k := range q {
		lower[strings.ToLower(k)] = k
	}
	for _, e := range elems {
		key := e.Key()
		if old, ok := lower[strings.ToLower(key)]; ok {
			q.Del(old)
		}
		v := e.Value()
		s, isStr := v.StringValueOK()
		b, isBool := v.BooleanOK()
		n, isNum := number(v)
		arr, isArr := v.ArrayOK()
		doc, isDoc := v.DocumentOK()
		switch {
		case isStr:
			q.Set(key, s)
		case isBool:
			q.Set(key, strconv.FormatBool(b))
		case isNum:
			q.Set(key, strconv.FormatFloat(n, 'f', -1, 64))
		case isArr:
			vals, _ := arr.Values()
			for _, x := range vals {
				s, ok := x.StringValueOK()
				if !ok {
					return "", fmt.Errorf("unified runner: uriOptions.%s: array of %s not supported", key, x.Type)
				}
				q.Add(key, s)
			}
		case isDoc:
			if _, _, ok := specialOperator(doc); ok {
				return "", fmt.Errorf("unified runner: uriOptions.%s: $$placeholder not supported", key)
			}
			d, _ := doc.Elements()
			var parts []string
			for _, x := range d {
				parts = append(parts, x.Key()+":"+strings.Trim(x.Value().String(), `"`))
			}
			sort.Strings(parts)
			q.Set(key, strings.Join(parts, ","))
		default:
			return "", fmt.Errorf("unified runner: uriOptions.%s of type %s not supported", key, v.Type)
		}
	}
	return build(), nil
}
