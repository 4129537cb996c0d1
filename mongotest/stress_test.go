package mongotest_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Sizes of TestStressWritersTransactionsWatchers. They bound its work: about
// 950 committed writes seen by five change streams.
const (
	stressWriters     = 4   // goroutines doing plain writes
	stressWriterOps   = 200 // operations per plain writer
	stressTransactors = 3   // goroutines running transactions
	stressTxns        = 30  // transactions per transactor
	stressOutsideOps  = 50  // plain writes to another database
	stressColls       = 3   // collections c0.. shared by the plain writers
	stressHotDocs     = 2   // documents every transactor and writer increments
)

// errDeliberate is returned from transaction callbacks to abort them.
var errDeliberate = errors.New("deliberate abort")

// stressWrite is one write that committed: the event it must produce.
type stressWrite struct {
	key    string // attribution key: the op tag, or del/db/coll/_id for a delete
	db     string
	coll   string
	opType string // insert, update, replace, delete
	id     string // the document's _id
	txn    string // the committed transaction it belongs to, "" for a plain write
	hot    bool   // an $inc of n on a hot document
}

// stressActor is one writing goroutine's record: only it touches its
// fields until the WaitGroup is done.
type stressActor struct {
	name      string
	committed []stressWrite     // in program order
	doomed    map[string]string // op tags sent that must never appear, with why
	txns      [][]stressWrite   // committed transactions, statements in order
	attempts  int               // transaction callback invocations
	conflicts int               // WriteConflict errors seen
	err       error
}

func newActor(name string) *stressActor {
	return &stressActor{name: name, doomed: map[string]string{}}
}

func (a *stressActor) commit(w stressWrite) { a.committed = append(a.committed, w) }

func (a *stressActor) doom(ws []stressWrite, why string) {
	for _, w := range ws {
		if w.opType != "delete" { // delete keys are not unique to an attempt
			a.doomed[w.key] = why
		}
	}
}

func delKey(db, coll, id string) string { return "del/" + db + "/" + coll + "/" + id }

func isCode(err error, code int) bool {
	var se mongo.ServerError
	return errors.As(err, &se) && se.HasErrorCode(code)
}

// TestStressWritersTransactionsWatchers runs plain writers, transactions
// (committed, aborted, conflicting) and five change streams at once, then
// checks that every stream saw exactly the committed writes in its scope,
// once each, in order, with each transaction's events together, and that
// the final documents match the writes.
func TestStressWritersTransactionsWatchers(t *testing.T) {
	began := time.Now()
	client, db, _ := connect(t)
	ctx := ctx(t)
	dbName := db.Name()
	other := client.Database(dbName + "_x")
	mustDo(t, func() error { return other.Drop(ctx) })
	t.Cleanup(func() { _ = other.Drop(context.Background()) })

	// Collections exist before transactions write to them, and the hot
	// documents exist before the streams start.
	colls := []string{"hot", "tx"}
	for i := range stressColls {
		colls = append(colls, fmt.Sprintf("c%d", i))
	}
	for _, name := range colls {
		mustDo(t, func() error { return db.CreateCollection(ctx, name) })
	}
	mustDo(t, func() error { return other.CreateCollection(ctx, "c0") })
	hotDocs := []any{bson.D{{Key: "_id", Value: "pair"}, {Key: "n", Value: int32(0)}}}
	for k := range stressHotDocs {
		hotDocs = append(hotDocs, bson.D{{Key: "_id", Value: fmt.Sprintf("hot-%d", k)}, {Key: "n", Value: int32(0)}})
	}
	mustDo(t, func() error { _, err := db.Collection("hot").InsertMany(ctx, hotDocs); return err })

	watchers := openStressWatchers(t, ctx, client, db)
	for _, w := range watchers {
		go w.read(ctx)
	}

	var actors []*stressActor
	var wg sync.WaitGroup
	spawn := func(name string, f func(a *stressActor) error) {
		a := newActor(name)
		actors = append(actors, a)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(a); err != nil {
				a.err = fmt.Errorf("%s: %w", a.name, err)
			}
		}()
	}
	for w := range stressWriters {
		spawn(fmt.Sprintf("w%d", w), func(a *stressActor) error { return plainWriter(ctx, db, w, a) })
	}
	spawn("outside", func(a *stressActor) error { return outsideWriter(ctx, other, a) })
	for w := range stressTransactors {
		spawn(fmt.Sprintf("t%d", w), func(a *stressActor) error { return transactor(ctx, client, db, w, a) })
	}
	// A pair of transactions that conflict by construction, so at least
	// one WriteConflict retry happens whatever the interleaving.
	aWrote, bTried := make(chan struct{}), make(chan struct{})
	var aOnce, bOnce sync.Once
	spawn("xa", func(a *stressActor) error {
		defer aOnce.Do(func() { close(aWrote) })
		return pairTxn(ctx, client, db, a, func() { aOnce.Do(func() { close(aWrote) }) }, bTried)
	})
	spawn("xb", func(a *stressActor) error {
		defer bOnce.Do(func() { close(bTried) })
		return pairTxn(ctx, client, db, a, func() { bOnce.Do(func() { close(bTried) }) }, aWrote)
	})
	wg.Wait()
	writersDone := time.Now()

	// Fences: the last writes, after which each stream has seen everything.
	fence := newActor("fence")
	actors = append(actors, fence)
	for _, coll := range []string{"hot", "c0"} {
		key := "fence-" + coll
		mustDo(t, func() error {
			_, err := db.Collection(coll).InsertOne(ctx, bson.D{{Key: "_id", Value: key}, {Key: "op", Value: key}})
			return err
		})
		fence.commit(stressWrite{key: key, db: dbName, coll: coll, opType: "insert", id: key})
	}
	for _, a := range actors {
		if a.err != nil {
			t.Error(a.err)
		}
	}
	for _, w := range watchers {
		<-w.done
		_ = w.cs.Close(context.Background())
	}
	if t.Failed() {
		t.FailNow()
	}

	// Merge the records.
	expected := map[string]stressWrite{}
	doomed := map[string]string{}
	var txns [][]stressWrite
	attempts, conflicts, plain := 0, 0, 0
	for _, a := range actors {
		for _, w := range a.committed {
			if _, dup := expected[w.key]; dup {
				t.Fatalf("test bug: key %s recorded twice", w.key)
			}
			expected[w.key] = w
			if w.txn == "" {
				plain++
			}
		}
		for k, why := range a.doomed {
			doomed[k] = a.name + ": " + why
		}
		txns = append(txns, a.txns...)
		attempts += a.attempts
		conflicts += a.conflicts
	}
	for _, a := range actors {
		if a.name == "xb" && (a.conflicts == 0 || a.attempts < 2) {
			t.Errorf("the forced conflict did not happen: xb had %d conflicts in %d attempts", a.conflicts, a.attempts)
		}
	}

	for _, w := range watchers {
		w.check(t, dbName, expected, doomed, txns)
	}
	checkStressState(t, ctx, db, other, actors)
	t.Logf("%d committed writes (%d plain, %d transactions from %d attempts, %d write conflicts), %d never committed; writers %v, total %v",
		len(expected), plain, len(txns), attempts, conflicts, len(doomed), writersDone.Sub(began).Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
}

// plainWriter runs stressWriterOps plain writes on its own documents of
// collection c(w % stressColls), plus increments of the hot documents and
// writes that must fail.
func plainWriter(ctx context.Context, db *mongo.Database, w int, a *stressActor) error {
	cname := fmt.Sprintf("c%d", w%stressColls)
	c, hot := db.Collection(cname), db.Collection("hot")
	dbn := db.Name()
	var live []string
	for n := range stressWriterOps {
		id := fmt.Sprintf("w%d-%d", w, n)
		kind := n % 10
		if len(live) == 0 && kind != 3 && kind != 5 && kind != 8 {
			kind = 0
		}
		pick := func() string { return live[n%len(live)] }
		upd := func(opType, target string) stressWrite {
			return stressWrite{key: id, db: dbn, coll: cname, opType: opType, id: target}
		}
		switch kind {
		case 0, 1:
			if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "op", Value: id}, {Key: "v", Value: 0}}); err != nil {
				return err
			}
			a.commit(stressWrite{key: id, db: dbn, coll: cname, opType: "insert", id: id})
			live = append(live, id)
		case 2: // a duplicate _id fails and leaves no event
			_, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: pick()}, {Key: "op", Value: id}})
			if !mongo.IsDuplicateKeyError(err) {
				return fmt.Errorf("insert of an existing _id %s: %v, want a duplicate key error", pick(), err)
			}
			a.doomed[id] = "duplicate-key insert"
		case 3:
			docs := []any{
				bson.D{{Key: "_id", Value: id + "a"}, {Key: "op", Value: id + "a"}},
				bson.D{{Key: "_id", Value: id + "b"}, {Key: "op", Value: id + "b"}},
			}
			if _, err := c.InsertMany(ctx, docs); err != nil {
				return err
			}
			for _, s := range []string{"a", "b"} {
				a.commit(stressWrite{key: id + s, db: dbn, coll: cname, opType: "insert", id: id + s})
				live = append(live, id+s)
			}
		case 4:
			target := pick()
			res, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: target}},
				bson.D{{Key: "$set", Value: bson.D{{Key: "op", Value: id}}}, {Key: "$inc", Value: bson.D{{Key: "v", Value: 1}}}})
			if err != nil || res.ModifiedCount != 1 {
				return fmt.Errorf("update %s: %+v, %v", target, res, err)
			}
			a.commit(upd("update", target))
		case 5: // an update matching nothing writes nothing
			res, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: "absent-" + id}}, bson.D{{Key: "$set", Value: bson.D{{Key: "op", Value: id}}}})
			if err != nil || res.MatchedCount != 0 {
				return fmt.Errorf("update of an absent document: %+v, %v", res, err)
			}
			a.doomed[id] = "update matching nothing"
		case 6:
			target := pick()
			res, err := c.ReplaceOne(ctx, bson.D{{Key: "_id", Value: target}}, bson.D{{Key: "op", Value: id}, {Key: "replaced", Value: true}})
			if err != nil || res.ModifiedCount != 1 {
				return fmt.Errorf("replace %s: %+v, %v", target, res, err)
			}
			a.commit(upd("replace", target))
		case 7:
			i := n % len(live)
			target := live[i]
			res, err := c.DeleteOne(ctx, bson.D{{Key: "_id", Value: target}})
			if err != nil || res.DeletedCount != 1 {
				return fmt.Errorf("delete %s: %+v, %v", target, res, err)
			}
			live = append(live[:i], live[i+1:]...)
			a.commit(stressWrite{key: delKey(dbn, cname, target), db: dbn, coll: cname, opType: "delete", id: target})
		case 8: // contend with the transactions on a hot document
			target := fmt.Sprintf("hot-%d", (n/10)%stressHotDocs)
			res, err := hot.UpdateOne(ctx, bson.D{{Key: "_id", Value: target}},
				bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: int32(1)}}}, {Key: "$set", Value: bson.D{{Key: "op", Value: id}}}})
			if err != nil || res.ModifiedCount != 1 {
				return fmt.Errorf("increment %s: %+v, %v", target, res, err)
			}
			a.commit(stressWrite{key: id, db: dbn, coll: "hot", opType: "update", id: target, hot: true})
		case 9:
			target := pick()
			err := c.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: target}}, bson.D{{Key: "$set", Value: bson.D{{Key: "op", Value: id}}}}).Err()
			if err != nil {
				return fmt.Errorf("findAndModify %s: %v", target, err)
			}
			a.commit(upd("update", target))
		}
	}
	return nil
}

// outsideWriter writes to another database, which no stream watches.
func outsideWriter(ctx context.Context, other *mongo.Database, a *stressActor) error {
	c := other.Collection("c0")
	for n := range stressOutsideOps {
		id := fmt.Sprintf("o-%d", n)
		if n%3 == 2 {
			target := fmt.Sprintf("o-%d", n-1)
			if _, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: target}}, bson.D{{Key: "$set", Value: bson.D{{Key: "op", Value: id}}}}); err != nil {
				return err
			}
			a.commit(stressWrite{key: id, db: other.Name(), coll: "c0", opType: "update", id: target})
			continue
		}
		if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "op", Value: id}}); err != nil {
			return err
		}
		a.commit(stressWrite{key: id, db: other.Name(), coll: "c0", opType: "insert", id: id})
	}
	return nil
}

// transactor runs stressTxns transactions on one session. Transaction i
// inserts a document into tx and increments a hot document, then by
// i % 5: 0 commits; 1 also deletes an older document and commits; 2 also
// replaces its document and inserts into c(w) and commits; 3 also deletes
// an older document and aborts by returning an error; 4 does the same and
// aborts with AbortTransaction.
func transactor(ctx context.Context, client *mongo.Client, db *mongo.Database, w int, a *stressActor) error {
	sess, err := client.StartSession()
	if err != nil {
		return err
	}
	defer sess.EndSession(context.Background())
	dbn := db.Name()
	tx, hot := db.Collection("tx"), db.Collection("hot")
	side := fmt.Sprintf("c%d", w%stressColls)
	var deletable []string // committed tx documents, oldest first
	for i := range stressTxns {
		kind := i % 5
		txnID := fmt.Sprintf("t%d-%d", w, i)
		hotID := fmt.Sprintf("hot-%d", (i+w)%stressHotDocs)
		victim := ""
		if len(deletable) > 0 && (kind == 1 || kind >= 3) {
			victim = deletable[0]
		}
		var stmts []stressWrite
		attempt := 0
		_, err := sess.WithTransaction(ctx, func(sctx context.Context) (any, error) {
			a.doom(stmts, "a failed transaction attempt")
			stmts = nil
			attempt++
			a.attempts++
			tag := func() string { return fmt.Sprintf("%s#%d.%d", txnID, attempt, len(stmts)) }
			fail := func(err error) (any, error) {
				if isCode(err, 112) {
					a.conflicts++
				}
				return nil, err
			}
			op := tag()
			stmts = append(stmts, stressWrite{key: op, db: dbn, coll: "tx", opType: "insert", id: txnID, txn: txnID})
			if _, err := tx.InsertOne(sctx, bson.D{{Key: "_id", Value: txnID}, {Key: "op", Value: op}}); err != nil {
				return fail(err)
			}
			op = tag()
			stmts = append(stmts, stressWrite{key: op, db: dbn, coll: "hot", opType: "update", id: hotID, txn: txnID, hot: true})
			res, err := hot.UpdateOne(sctx, bson.D{{Key: "_id", Value: hotID}},
				bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: int32(1)}}}, {Key: "$set", Value: bson.D{{Key: "op", Value: op}}}})
			if err != nil {
				return fail(err)
			}
			if res.ModifiedCount != 1 {
				return nil, fmt.Errorf("increment %s in a transaction: %+v", hotID, res)
			}
			if victim != "" {
				stmts = append(stmts, stressWrite{key: delKey(dbn, "tx", victim), db: dbn, coll: "tx", opType: "delete", id: victim, txn: txnID})
				res, err := tx.DeleteOne(sctx, bson.D{{Key: "_id", Value: victim}})
				if err != nil {
					return fail(err)
				}
				if res.DeletedCount != 1 {
					return nil, fmt.Errorf("delete %s in a transaction: %+v", victim, res)
				}
			}
			switch kind {
			case 2:
				op = tag()
				stmts = append(stmts, stressWrite{key: op, db: dbn, coll: "tx", opType: "replace", id: txnID, txn: txnID})
				if _, err := tx.ReplaceOne(sctx, bson.D{{Key: "_id", Value: txnID}}, bson.D{{Key: "op", Value: op}, {Key: "replaced", Value: true}}); err != nil {
					return fail(err)
				}
				op = tag()
				stmts = append(stmts, stressWrite{key: op, db: dbn, coll: side, opType: "insert", id: txnID, txn: txnID})
				if _, err := db.Collection(side).InsertOne(sctx, bson.D{{Key: "_id", Value: txnID}, {Key: "op", Value: op}}); err != nil {
					return fail(err)
				}
			case 3:
				return nil, errDeliberate
			case 4:
				return nil, sess.AbortTransaction(sctx)
			}
			return nil, nil
		})
		switch {
		case kind == 3:
			if !errors.Is(err, errDeliberate) {
				return fmt.Errorf("transaction %s aborted by its callback: %v, want the callback's error", txnID, err)
			}
			a.doom(stmts, "a transaction whose callback failed")
		case kind == 4:
			if err != nil {
				return fmt.Errorf("transaction %s aborted with AbortTransaction: %v", txnID, err)
			}
			a.doom(stmts, "a transaction aborted with AbortTransaction")
		case err != nil:
			return fmt.Errorf("transaction %s: %w", txnID, err)
		default:
			for _, s := range stmts {
				a.commit(s)
			}
			a.txns = append(a.txns, stmts)
			if victim != "" {
				deletable = deletable[1:]
			}
			deletable = append(deletable, txnID)
		}
	}
	return nil
}

// pairTxn increments the "pair" document in a transaction. The first
// attempt waits for wait before writing (xb) or after writing (xa), and
// calls signal after writing, so xb's first write meets xa's uncommitted
// one and must get a WriteConflict.
func pairTxn(ctx context.Context, client *mongo.Client, db *mongo.Database, a *stressActor, signal func(), wait <-chan struct{}) error {
	sess, err := client.StartSession()
	if err != nil {
		return err
	}
	defer sess.EndSession(context.Background())
	first := a.name == "xa"
	hot := db.Collection("hot")
	var stmts []stressWrite
	_, err = sess.WithTransaction(ctx, func(sctx context.Context) (any, error) {
		a.doom(stmts, "a failed transaction attempt")
		a.attempts++
		op := fmt.Sprintf("%s#%d.0", a.name, a.attempts)
		stmts = []stressWrite{{key: op, db: db.Name(), coll: "hot", opType: "update", id: "pair", txn: a.name, hot: true}}
		awaitOther := func() error {
			select {
			case <-wait:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if !first && a.attempts == 1 {
			if err := awaitOther(); err != nil {
				return nil, err
			}
		}
		_, err := hot.UpdateOne(sctx, bson.D{{Key: "_id", Value: "pair"}},
			bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: int32(1)}}}, {Key: "$set", Value: bson.D{{Key: "op", Value: op}}}})
		if isCode(err, 112) {
			a.conflicts++
		}
		if !first && a.attempts == 1 {
			if err == nil {
				err = errors.New("xb's write met xa's uncommitted write without a WriteConflict")
			}
			signal()
			return nil, err
		}
		if err != nil {
			return nil, err
		}
		if first && a.attempts == 1 {
			signal()
			if err := awaitOther(); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
	if err != nil {
		return err
	}
	for _, s := range stmts {
		a.commit(s)
	}
	a.txns = append(a.txns, stmts)
	return nil
}

// stressEvent is the part of a change event the checks use.
type stressEvent struct {
	key, opType, db, coll, id string
	clusterTime               bson.Timestamp
	token                     string
	txnNumber                 any    // nil when absent
	lsid                      string // "" when absent
	n                         any    // updatedFields.n of an update, nil when absent
}

func (e stressEvent) String() string {
	return fmt.Sprintf("{%s %s.%s %s key=%s ct=%d.%d txn=%v}", e.opType, e.db, e.coll, e.id, e.key, e.clusterTime.T, e.clusterTime.I, e.txnNumber)
}

type stressWatcher struct {
	name    string
	inScope func(w stressWrite) bool
	stop    string // the key of the fence event that ends reading
	cs      *mongo.ChangeStream
	events  []stressEvent
	err     error
	done    chan struct{}
}

func openStressWatchers(t *testing.T, ctx context.Context, client *mongo.Client, db *mongo.Database) []*stressWatcher {
	t.Helper()
	dbName := db.Name()
	inDB := func(w stressWrite) bool { return w.db == dbName }
	type spec struct {
		name    string
		open    func() (*mongo.ChangeStream, error)
		inScope func(w stressWrite) bool
		stop    string
	}
	specs := []spec{
		{"collection hot", func() (*mongo.ChangeStream, error) { return db.Collection("hot").Watch(ctx, mongo.Pipeline{}) },
			func(w stressWrite) bool { return inDB(w) && w.coll == "hot" }, "fence-hot"},
		{"collection c0", func() (*mongo.ChangeStream, error) { return db.Collection("c0").Watch(ctx, mongo.Pipeline{}) },
			func(w stressWrite) bool { return inDB(w) && w.coll == "c0" }, "fence-c0"},
		{"database", func() (*mongo.ChangeStream, error) { return db.Watch(ctx, mongo.Pipeline{}) }, inDB, "fence-c0"},
		{"cluster $match ns.db", func() (*mongo.ChangeStream, error) {
			return client.Watch(ctx, mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "ns.db", Value: dbName}}}}})
		}, inDB, "fence-c0"},
		{"database $match insert/delete", func() (*mongo.ChangeStream, error) {
			return db.Watch(ctx, mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "operationType", Value: bson.D{{Key: "$in", Value: bson.A{"insert", "delete"}}}}}}}},
				options.ChangeStream().SetMaxAwaitTime(200*time.Millisecond))
		}, func(w stressWrite) bool { return inDB(w) && (w.opType == "insert" || w.opType == "delete") }, "fence-c0"},
	}
	var out []*stressWatcher
	for _, s := range specs {
		cs, err := s.open()
		if err != nil {
			t.Fatalf("open %s stream: %v", s.name, err)
		}
		t.Cleanup(func() { _ = cs.Close(context.Background()) })
		out = append(out, &stressWatcher{name: s.name, inScope: s.inScope, stop: s.stop, cs: cs, done: make(chan struct{})})
	}
	return out
}

// read collects events until the watcher's fence event or ctx's end.
func (w *stressWatcher) read(ctx context.Context) {
	defer close(w.done)
	for w.cs.Next(ctx) {
		var ev bson.M
		if err := w.cs.Decode(&ev); err != nil {
			w.err = err
			return
		}
		e := parseStressEvent(ev)
		w.events = append(w.events, e)
		if e.key == w.stop {
			return
		}
	}
	w.err = fmt.Errorf("stream ended before its fence %s: %v", w.stop, w.cs.Err())
}

func parseStressEvent(ev bson.M) stressEvent {
	e := stressEvent{token: tokenData(ev), txnNumber: ev["txnNumber"]}
	e.opType, _ = ev["operationType"].(string)
	e.clusterTime, _ = ev["clusterTime"].(bson.Timestamp)
	ns := sub(ev, "ns")
	e.db, _ = ns["db"].(string)
	e.coll, _ = ns["coll"].(string)
	e.id = fmt.Sprint(sub(ev, "documentKey")["_id"])
	if l, ok := ev["lsid"]; ok {
		e.lsid = fmt.Sprint(l)
	}
	switch e.opType {
	case "insert", "replace":
		e.key, _ = sub(ev, "fullDocument")["op"].(string)
	case "update":
		fields := sub(sub(ev, "updateDescription"), "updatedFields")
		e.key, _ = fields["op"].(string)
		e.n = fields["n"]
	case "delete":
		e.key = delKey(e.db, e.coll, e.id)
	}
	return e
}

// check asserts what the watcher saw against the committed writes.
func (w *stressWatcher) check(t *testing.T, dbName string, expected map[string]stressWrite, doomed map[string]string, txns [][]stressWrite) {
	t.Helper()
	problems := 0
	fail := func(format string, args ...any) {
		problems++
		if problems <= 15 {
			t.Errorf("%s stream: "+format, append([]any{w.name}, args...)...)
		}
	}
	defer func() {
		if problems > 15 {
			t.Errorf("%s stream: %d problems in all", w.name, problems)
		}
	}()
	if w.err != nil {
		fail("after %d events: %v", len(w.events), w.err)
	}
	seen := map[string]int{}
	for i, ev := range w.events {
		if i > 0 {
			prev := w.events[i-1]
			if ev.clusterTime.Compare(prev.clusterTime) < 0 {
				fail("event %d %v has a clusterTime before event %d %v", i, ev, i-1, prev)
			}
			if ev.token <= prev.token {
				fail("event %d %v: resume token %s not above the previous %s", i, ev, ev.token, prev.token)
			}
		}
		wr, ok := expected[ev.key]
		switch {
		case !ok && doomed[ev.key] != "":
			fail("event %d %v comes from %s, which never committed", i, ev, doomed[ev.key])
			continue
		case !ok:
			fail("event %d %v matches no committed write", i, ev)
			continue
		case !w.inScope(wr):
			fail("event %d %v is outside the stream's scope", i, ev)
		}
		if j, dup := seen[ev.key]; dup {
			fail("event %d %v repeats event %d", i, ev, j)
			continue
		}
		seen[ev.key] = i
		if ev.opType != wr.opType || ev.db != wr.db || ev.coll != wr.coll || ev.id != wr.id {
			fail("event %d %v, want %s %s.%s %s", i, ev, wr.opType, wr.db, wr.coll, wr.id)
		}
		if inTxn := wr.txn != ""; inTxn != (ev.txnNumber != nil) || inTxn != (ev.lsid != "") {
			fail("event %d %v (transaction %q): lsid %q, txnNumber %v", i, ev, wr.txn, ev.lsid, ev.txnNumber)
		}
	}
	var missing []string
	for k, wr := range expected {
		if _, ok := seen[k]; !ok && w.inScope(wr) {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		if len(missing) > 10 {
			missing = append(missing[:10], "...")
		}
		fail("%d committed writes never seen: %s", len(missing), strings.Join(missing, " "))
	}
	// Each transaction's events in scope are contiguous, in statement
	// order, and share its clusterTime, lsid and txnNumber.
	for _, stmts := range txns {
		var first stressEvent
		start, k := -1, 0
		for _, s := range stmts {
			if !w.inScope(s) {
				continue
			}
			i, ok := seen[s.key]
			if !ok {
				k++
				continue
			}
			ev := w.events[i]
			if start < 0 {
				start, first = i-k, ev
			}
			if i != start+k {
				fail("transaction %s: statement %s is event %d, want %d (its events are not contiguous and in order)", s.txn, s.key, i, start+k)
			} else if ev.clusterTime != first.clusterTime || ev.lsid != first.lsid || fmt.Sprint(ev.txnNumber) != fmt.Sprint(first.txnNumber) {
				fail("transaction %s: event %v differs from its first event %v in clusterTime, lsid or txnNumber", s.txn, ev, first)
			}
			k++
		}
	}
	// Increments of a hot document are serialised: a stream that sees all
	// of them sees n go 1, 2, 3, ...
	if !w.inScope(stressWrite{db: dbName, coll: "hot", opType: "update"}) {
		return
	}
	last := map[string]int32{}
	for i, ev := range w.events {
		if ev.coll != "hot" || ev.opType != "update" {
			continue
		}
		n, ok := ev.n.(int32)
		if !ok || n != last[ev.id]+1 {
			fail("event %d %v sets n to %v after %d: an increment was lost or not serialised", i, ev, ev.n, last[ev.id])
		}
		last[ev.id] = n
	}
}

// checkStressState compares the collections with what the actors
// committed.
func checkStressState(t *testing.T, ctx context.Context, db, other *mongo.Database, actors []*stressActor) {
	t.Helper()
	type docKey struct{ db, coll, id string }
	want := map[docKey]string{} // last op tag of each live document
	incs := map[string]int32{}
	for _, a := range actors {
		for _, w := range a.committed {
			k := docKey{w.db, w.coll, w.id}
			switch {
			case w.hot:
				incs[w.id]++
			case w.opType == "delete":
				delete(want, k)
			default:
				want[k] = w.key
			}
		}
	}
	got := map[docKey]string{}
	for _, d := range []*mongo.Database{db, other} {
		names, err := d.ListCollectionNames(ctx, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			cur, err := d.Collection(name).Find(ctx, bson.D{})
			if err != nil {
				t.Fatal(err)
			}
			var docs []bson.M
			if err := cur.All(ctx, &docs); err != nil {
				t.Fatal(err)
			}
			for _, doc := range docs {
				id := fmt.Sprint(doc["_id"])
				if name == "hot" && !strings.HasPrefix(id, "fence") {
					if n, _ := doc["n"].(int32); n != incs[id] {
						t.Errorf("%s: n = %v, want %d committed increments", id, doc["n"], incs[id])
					}
					continue
				}
				op, _ := doc["op"].(string)
				got[docKey{d.Name(), name, id}] = op
			}
		}
	}
	for k, op := range want {
		if g, ok := got[k]; !ok {
			t.Errorf("document %v is missing; its last write was %s", k, op)
		} else if g != op {
			t.Errorf("document %v has op %q, want %q (its last committed write)", k, g, op)
		}
	}
	for k, op := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("document %v (op %q) should not exist", k, op)
		}
	}
}
