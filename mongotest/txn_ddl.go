package mongotest

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
)

// DDL inside transactions (MongoDB 4.4+): create, and createIndexes on a
// collection the transaction creates, explicitly or by inserting into it.
//
// The transaction's new collections and their indexes stay private to it:
// other sessions, listCollections and listIndexes do not see them, and
// their oplog entries wait in the transaction. Commit adds the
// collections and logs their create and createIndexes entries with the
// transaction's cluster time, lsid and txnNumber, before its writes; abort
// forgets them. If another session has created the same namespace in the
// meantime, the commit fails with WriteConflict (TransientTransactionError)
// and aborts. createIndexes on an existing collection fails with
// OperationNotSupportedInTransaction (263), create of an existing one with
// NamespaceExists (48), as on a real server.

// txnDDL is what a transaction created.
type txnDDL struct {
	colls   []*collection
	entries []*oplogEntry
}

// collInTxn returns the collection db.name that the running transaction
// statement created, or nil. Callers hold e.mu.
func (e *engine) collInTxn(db, name string) *collection {
	t := e.curTxn
	if t == nil {
		return nil
	}
	for _, c := range t.ddl.colls {
		if c.db == db && c.name == name {
			return c
		}
	}
	return nil
}

// runTxnStatement runs a statement of a transaction. Collections it
// creates are taken out of the catalog afterwards and kept in the
// transaction; the oplog entries it appends are kept there too.
func (e *engine) runTxnStatement(spec command, r *request, t *txn) (bson.D, error) {
	if _, ok := r.arg("writeConcern"); ok {
		return nil, errorf(mongoerr.CodeInvalidOptions, "writeConcern is not allowed within a multi-statement transaction")
	}
	switch r.name {
	case "create", "createIndexes":
		db, name, err := nsArg(r)
		if err != nil {
			return nil, err
		}
		committed := e.committedColl(db, name)
		switch {
		case r.name == "create" && (committed != nil || e.collInTxn(db, name) != nil):
			return nil, errorf(mongoerr.CodeNamespaceExists, "Collection %s.%s already exists.", db, name)
		case r.name == "createIndexes" && committed != nil && e.collInTxn(db, name) == nil:
			return nil, errorf(mongoerr.CodeOperationNotSupportedInTransaction,
				"Cannot create new indexes on existing collection %s.%s in a multi-document transaction.", db, name)
		}
	}
	e.curTxn = t
	t.creating = nil
	defer func() {
		e.curTxn = nil
		for _, c := range t.creating {
			if d := e.dbs[c.db]; d != nil && d.colls[c.name] == c {
				delete(d.colls, c.name)
				if len(d.colls) == 0 {
					delete(e.dbs, c.db)
				}
			}
			t.ddl.colls = append(t.ddl.colls, c)
		}
		t.creating = nil
	}()
	return spec.run(e, r)
}

// committedColl is db.name outside any transaction.
func (e *engine) committedColl(db, name string) *collection {
	if d := e.dbs[db]; d != nil {
		return d.colls[name]
	}
	return nil
}

// noteCreated records a collection created while a transaction statement
// runs. Callers hold e.mu.
func (e *engine) noteCreated(c *collection) {
	if t := e.curTxn; t != nil {
		t.creating = append(t.creating, c)
	}
}

// divertOplog keeps an oplog entry written by a transaction statement (a
// create or createIndexes) in the transaction until it commits.
func (e *engine) divertOplog(ent *oplogEntry) bool {
	t := e.curTxn
	if t == nil {
		return false
	}
	t.ddl.entries = append(t.ddl.entries, ent)
	return true
}

// commitDDL adds the transaction's collections to the catalog; it fails
// with WriteConflict if a namespace was taken meanwhile.
func (e *engine) commitDDL(t *txn) error {
	for _, c := range t.ddl.colls {
		if e.committedColl(c.db, c.name) != nil {
			return writeConflict()
		}
	}
	for _, c := range t.ddl.colls {
		e.db(c.db, true).colls[c.name] = c
	}
	return nil
}
