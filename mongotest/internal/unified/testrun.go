package unified

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver"
)

// runnerError is a fault of the test or of the runner (an unsupported
// operation, a bad argument, a missing entity), as opposed to an error
// returned by the driver. expectError never absorbs it.
type runnerError struct{ err error }

func (e *runnerError) Error() string { return e.err.Error() }
func (e *runnerError) Unwrap() error { return e.err }

func rerr(format string, args ...any) error {
	return &runnerError{fmt.Errorf(format, args...)}
}

func asRunnerError(err error) error {
	if err == nil {
		return nil
	}
	var re *runnerError
	if errors.As(err, &re) {
		return err
	}
	return &runnerError{err}
}

// failPointRecord remembers a fail point to turn off after the test.
type failPointRecord struct {
	client *clientEntity
	name   string
	host   string // targetedFailPoint: the server it was set on
}

// testRun is the state of one test while it runs.
type testRun struct {
	cfg      *config
	file     *File
	test     *Test
	uri      string
	info     *serverInfo
	internal *mongo.Client

	ctx        context.Context // cancelled when the test's time is up
	ents       *entityMap
	match      *matcher
	failPoints []failPointRecord
	orphans    []*mongo.ChangeStream // change streams not saved as entities
	// lastOpErr is the error the last entity operation returned, before
	// its expectations were checked (withTransaction callbacks pass it on).
	lastOpErr error
}

// run executes the test and returns its status and, unless it passed, why.
func (tr *testRun) run() (Status, string) {
	ctx, cancel := withTimer(context.Background(), tr.cfg.testTimeout)
	defer cancel()
	tr.ctx = ctx
	tr.ents = newEntityMap()
	tr.match = &matcher{ents: tr.ents}

	if why := tr.info.unmet(ctx, tr.test.RunOnRequirements); why != "" {
		return Skipped, why
	}
	if err := checkTest(tr.file, tr.test); err != nil {
		if dl, ok := asDriverLimit(err); ok {
			return Skipped, dl.Error()
		}
		return Failed, err.Error()
	}
	defer tr.cleanup()

	if err := tr.setupInitialData(); err != nil {
		return Failed, "initialData: " + err.Error()
	}
	for i, e := range tr.file.CreateEntities {
		if err := tr.createEntity(e); err != nil {
			if dl, ok := asDriverLimit(err); ok {
				return Skipped, dl.Error()
			}
			return Failed, fmt.Sprintf("createEntities[%d] (%s %s): %v", i, e.Kind, e.ID, err)
		}
	}
	for _, c := range tr.ents.clients() {
		c.log.start()
	}
	var failure error
	for i, op := range tr.test.Operations {
		if err := tr.runOperation(op); err != nil {
			failure = fmt.Errorf("operations[%d] %s.%s: %w", i, op.Object, op.Name, err)
			break
		}
	}
	for _, c := range tr.ents.clients() {
		c.log.stop()
	}
	if err := tr.disableFailPoints(); err != nil && failure == nil {
		failure = err
	}
	if failure == nil {
		failure = tr.verifyEvents()
	}
	if failure == nil {
		failure = tr.verifyOutcome()
	}
	if dl, ok := asDriverLimit(failure); ok {
		return Skipped, dl.Error()
	}
	if failure != nil {
		if timedOut(ctx) {
			failure = fmt.Errorf("%w (test time limit %s reached)", failure, tr.cfg.testTimeout)
		}
		return Failed, failure.Error()
	}
	return Passed, ""
}

// cleanup closes everything the test opened, bounded by its own timer.
func (tr *testRun) cleanup() {
	ctx, cancel := withTimer(context.Background(), tr.cfg.setupTimeout)
	defer cancel()
	for _, cs := range tr.orphans {
		_ = cs.Close(ctx)
	}
	tr.ents.close(ctx)
}

// opContext bounds one operation or setup step.
func (tr *testRun) opContext() (context.Context, context.CancelFunc) {
	return withTimer(tr.ctx, tr.cfg.opTimeout)
}

// setupInitialData drops, creates and fills the initialData collections
// with a majority write concern, using the internal client.
func (tr *testRun) setupInitialData() error {
	ctx, cancel := tr.opContext()
	defer cancel()
	majority := options.Database().SetWriteConcern(writeconcern.Majority())
	for _, cd := range tr.file.InitialData {
		db := tr.internal.Database(cd.DatabaseName, majority)
		for _, name := range []string{"enxcol_." + cd.CollectionName + ".esc", "enxcol_." + cd.CollectionName + ".ecoc", cd.CollectionName} {
			if err := db.Collection(name).Drop(ctx); err != nil {
				return fmt.Errorf("drop %s.%s: %w", cd.DatabaseName, name, err)
			}
		}
		if cd.CreateOptions != nil || len(cd.Documents) == 0 {
			cmd := bson.D{{Key: "create", Value: cd.CollectionName}}
			if cd.CreateOptions != nil {
				elems, _ := cd.CreateOptions.Elements()
				for _, e := range elems {
					cmd = append(cmd, bson.E{Key: e.Key(), Value: e.Value()})
				}
			}
			cmd = append(cmd, bson.E{Key: "writeConcern", Value: bson.D{{Key: "w", Value: "majority"}}})
			if err := db.RunCommand(ctx, cmd).Err(); err != nil {
				return fmt.Errorf("create %s.%s: %w", cd.DatabaseName, cd.CollectionName, err)
			}
		}
		if len(cd.Documents) > 0 {
			docs := make([]any, len(cd.Documents))
			for i, d := range cd.Documents {
				docs[i] = d
			}
			if _, err := db.Collection(cd.CollectionName).InsertMany(ctx, docs); err != nil {
				return fmt.Errorf("insert into %s.%s: %w", cd.DatabaseName, cd.CollectionName, err)
			}
		}
	}
	return nil
}

// createEntity builds one createEntities element and adds it to the map.
func (tr *testRun) createEntity(e EntityDef) error {
	switch e.Kind {
	case kindClient:
		spec, err := parseClientSpec(e)
		if err != nil {
			return err
		}
		single := tr.info.topology == "sharded" && spec.useMultipleMongoses != nil && !*spec.useMultipleMongoses
		uri, err := uriWithOptions(tr.uri, spec.uriOptions, single)
		if err != nil {
			return err
		}
		log := newEventLog(spec.observeEvents, spec.ignoreCommands, spec.observeSensitive)
		client, err := mongo.Connect(options.Client().ApplyURI(uri).SetMonitor(log.monitor()))
		if err != nil {
			return err
		}
		return tr.ents.add(spec.id, &entity{kind: kindClient, client: &clientEntity{client: client, log: log}})
	case kindDatabase:
		clientID, name, c, err := parseDatabaseSpec(e)
		if err != nil {
			return err
		}
		ce, err := tr.ents.get(clientID, kindClient)
		if err != nil {
			return err
		}
		opts := options.Database()
		if c.rc != nil {
			opts.SetReadConcern(c.rc)
		}
		if c.rp != nil {
			opts.SetReadPreference(c.rp)
		}
		if c.wc != nil {
			opts.SetWriteConcern(c.wc)
		}
		return tr.ents.add(e.ID, &entity{kind: kindDatabase, db: ce.client.client.Database(name, opts)})
	case kindCollection:
		dbID, name, c, err := parseCollectionSpec(e)
		if err != nil {
			return err
		}
		de, err := tr.ents.get(dbID, kindDatabase)
		if err != nil {
			return err
		}
		opts := options.Collection()
		if c.rc != nil {
			opts.SetReadConcern(c.rc)
		}
		if c.rp != nil {
			opts.SetReadPreference(c.rp)
		}
		if c.wc != nil {
			opts.SetWriteConcern(c.wc)
		}
		return tr.ents.add(e.ID, &entity{kind: kindCollection, coll: de.db.Collection(name, opts)})
	case kindSession:
		clientID, opts, err := parseSessionSpec(e)
		if err != nil {
			return err
		}
		ce, err := tr.ents.get(clientID, kindClient)
		if err != nil {
			return err
		}
		if err := tr.resolveSnapshotTime(e, opts); err != nil {
			return err
		}
		sess, err := ce.client.client.StartSession(opts)
		if err != nil {
			return err
		}
		lsid := append(bson.Raw(nil), sess.ID()...)
		return tr.ents.add(e.ID, &entity{kind: kindSession, sess: sess, lsid: lsid})
	}
	return rerr("unified runner: entity kind %s not supported", e.Kind)
}

// disableFailPoints turns off every fail point the test set, through the
// client that set it (the internal client if that one was closed).
func (tr *testRun) disableFailPoints() error {
	ctx, cancel := withTimer(context.Background(), tr.cfg.setupTimeout)
	defer cancel()
	var first error
	for _, fp := range tr.failPoints {
		client := tr.internal
		if fp.client != nil && !fp.client.closed {
			client = fp.client.client
		}
		if fp.host != "" {
			direct, err := mongo.Connect(options.Client().SetHosts([]string{fp.host}).SetDirect(true))
			if err != nil {
				if first == nil {
					first = fmt.Errorf("turning off fail point %s on %s: %w", fp.name, fp.host, err)
				}
				continue
			}
			defer func() { _ = direct.Disconnect(ctx) }()
			client = direct
		}
		if err := turnOffFailPoint(ctx, client, fp.name); err != nil && first == nil {
			first = fmt.Errorf("turning off fail point %s: %w", fp.name, err)
		}
	}
	return first
}

// turnOffFailPoint sends configureFailPoint mode off through client. A
// runCommand is never retried by the driver, but the client that set the
// fail point may still be recovering from what the fail point did to it: a
// closed connection clears its pool, and a checkout before its monitor
// marks the pool ready again fails with a retryable pool-cleared error. So
// that error (and a network error) is retried, a few times with backoff, as
// the driver retries a retryable command.
func turnOffFailPoint(ctx context.Context, client *mongo.Client, name string) error {
	cmd := bson.D{{Key: "configureFailPoint", Value: name}, {Key: "mode", Value: "off"}}
	rp := options.RunCmd().SetReadPreference(readpref.Primary())
	backoff := 20 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := client.Database("admin").RunCommand(ctx, cmd, rp).Err()
		if err == nil || attempt == 5 || !transientClientError(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(backoff):
		}
		backoff *= 2
	}
}

// transientClientError reports whether err is the client's own transient
// state (a cleared pool, a network error) rather than the server's answer.
func transientClientError(err error) bool {
	var pool driver.RetryablePoolError
	if errors.As(err, &pool) && pool.Retryable() {
		return true
	}
	return mongo.IsNetworkError(err)
}

// verifyEvents checks expectEvents, client by client.
func (tr *testRun) verifyEvents() error {
	for _, ee := range tr.test.ExpectEvents {
		ce, err := tr.ents.get(ee.Client, kindClient)
		if err != nil {
			return fmt.Errorf("expectEvents: %w", err)
		}
		if err := checkExpectedEvents(ee); err != nil {
			return err
		}
		if err := verifyEvents(tr.match, ee, ce.client.log.snapshot()); err != nil {
			return err
		}
	}
	return nil
}

// verifyOutcome checks that each outcome collection holds exactly the
// expected documents, read with the internal client sorted by _id.
func (tr *testRun) verifyOutcome() error {
	ctx, cancel := tr.opContext()
	defer cancel()
	for _, cd := range tr.test.Outcome {
		coll := tr.internal.Database(cd.DatabaseName).Collection(cd.CollectionName,
			options.Collection().SetReadPreference(readpref.Primary()).SetReadConcern(readconcern.Local()))
		cur, err := coll.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
		if err != nil {
			return fmt.Errorf("outcome %s.%s: %w", cd.DatabaseName, cd.CollectionName, err)
		}
		var got []bson.Raw
		err = cur.All(ctx, &got)
		if err != nil {
			return fmt.Errorf("outcome %s.%s: %w", cd.DatabaseName, cd.CollectionName, err)
		}
		if len(got) != len(cd.Documents) {
			return fmt.Errorf("outcome %s.%s: expected %d documents, got %d", cd.DatabaseName, cd.CollectionName, len(cd.Documents), len(got))
		}
		for i := range got {
			if !sameDocument(cd.Documents[i], got[i]) {
				return fmt.Errorf("outcome %s.%s[%d]: expected %s, got %s", cd.DatabaseName, cd.CollectionName, i,
					showDoc(cd.Documents[i]), showDoc(got[i]))
			}
		}
	}
	return nil
}
