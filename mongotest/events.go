package mongotest

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/internal/resumetoken"
	"github.com/ferry-io/ferry/mongoerr"
	"github.com/ferry-io/ferry/mongotest/internal/mql"
)

// inScope reports whether an oplog entry concerns the stream's namespace.
func (cs *changeStream) inScope(ent *oplogEntry) bool {
	if ent.op == opNoop || ent.fromMigrate && !cs.showMigration {
		return false
	}
	if cs.db == "" { // whole cluster
		switch ent.db {
		case "admin", "config", "local":
			return false
		}
		return !strings.HasPrefix(ent.coll, "system.")
	}
	if ent.op == opRename && ent.toDB == cs.db && (cs.coll == "" || ent.toColl == cs.coll) {
		return true
	}
	if ent.db != cs.db {
		return false
	}
	if cs.coll == "" {
		return ent.op == opDropDatabase || !strings.HasPrefix(ent.coll, "system.")
	}
	return ent.coll == cs.coll && ent.op != opDropDatabase
}

// expandedOnly are the events shown only with showExpandedEvents.
var expandedOnly = map[string]bool{opCreate: true, opCreateIndexes: true, opDropIndexes: true, opModify: true,
	opShardCollection: true, opReshardCollection: true}

// eventsFor turns one oplog entry into the events this stream shows: usually
// one, two for an invalidating drop or rename, none when out of scope.
// It reads the engine's state only through rd.
func (e *engine) eventsFor(cs *changeStream, ent *oplogEntry, rd *oplogReader) ([]streamEvent, error) {
	if !cs.inScope(ent) {
		return nil, nil
	}
	if expandedOnly[ent.op] && !cs.showExpanded {
		return nil, nil
	}
	op := ent.op
	tok := entryToken(ent)
	data, typeBits := ent.token(tok)
	id := bson.D{{Key: "_data", Value: data}}
	if typeBits != nil {
		id = append(id, bson.E{Key: "_typeBits", Value: bson.Binary{Subtype: 0, Data: typeBits}})
	}
	ev := bson.D{{Key: "_id", Value: id}, {Key: "operationType", Value: op}, {Key: "clusterTime", Value: ent.ts}}
	if cs.showExpanded && ent.uuid != nil && op != opDropDatabase {
		ev = append(ev, bson.E{Key: "collectionUUID", Value: bson.Binary{Subtype: 4, Data: ent.uuid[:]}})
	}
	ev = append(ev, bson.E{Key: "wallTime", Value: ent.wall})
	ns := bson.D{{Key: "db", Value: ent.db}, {Key: "coll", Value: ent.coll}}
	switch op {
	case opInsert, opReplace:
		ev = append(ev, bson.E{Key: "fullDocument", Value: ent.doc}, bson.E{Key: "ns", Value: ns}, bson.E{Key: "documentKey", Value: ent.docKey})
	case opUpdate:
		full, err := rd.postImage(cs, ent)
		if err != nil {
			return nil, err
		}
		if cs.fullDocument != "" && cs.fullDocument != "default" {
			ev = append(ev, bson.E{Key: "fullDocument", Value: full})
		}
		ev = append(ev, bson.E{Key: "ns", Value: ns}, bson.E{Key: "documentKey", Value: ent.docKey})
		upd := ent.upd
		if upd == nil {
			upd = &mql.UpdateDescription{}
		}
		ev = append(ev, bson.E{Key: "updateDescription", Value: upd.Document(cs.showExpanded)})
	case opDelete:
		ev = append(ev, bson.E{Key: "ns", Value: ns}, bson.E{Key: "documentKey", Value: ent.docKey})
	case opDrop:
		ev = append(ev, bson.E{Key: "ns", Value: ns})
	case opDropDatabase:
		ev = append(ev, bson.E{Key: "ns", Value: bson.D{{Key: "db", Value: ent.db}}})
	case opRename:
		ev = append(ev, bson.E{Key: "ns", Value: ns}, bson.E{Key: "to", Value: bson.D{{Key: "db", Value: ent.toDB}, {Key: "coll", Value: ent.toColl}}})
		if cs.showExpanded {
			ev = append(ev, bson.E{Key: "operationDescription", Value: ent.opDesc})
		}
	case opCreate:
		ev = append(ev, bson.E{Key: "ns", Value: ns}, bson.E{Key: "operationDescription", Value: ent.opDesc})
		if ent.nsType != "" && e.cfg.release.atLeast(8, 1) { // nsType is new in 8.1
			ev = append(ev, bson.E{Key: "nsType", Value: ent.nsType})
		}
	case opCreateIndexes, opDropIndexes, opShardCollection, opReshardCollection:
		ev = append(ev, bson.E{Key: "ns", Value: ns}, bson.E{Key: "operationDescription", Value: ent.opDesc})
	case opModify:
		ev = append(ev, bson.E{Key: "ns", Value: ns}, bson.E{Key: "operationDescription", Value: ent.opDesc},
			bson.E{Key: "stateBeforeChange", Value: ent.stateBefore})
	}
	switch op {
	case opUpdate, opReplace, opDelete:
		if cs.fullDocBefore == "whenAvailable" || cs.fullDocBefore == "required" {
			if !ent.preImageRecorded {
				if cs.fullDocBefore == "required" {
					return nil, errorf(mongoerr.CodeNoPreImageID, "Change stream was configured to require a pre-image for all update, delete and replace events, but no pre-image id was recorded for the event.")
				}
				ev = append(ev, bson.E{Key: "fullDocumentBeforeChange", Value: nil})
			} else {
				ev = append(ev, bson.E{Key: "fullDocumentBeforeChange", Value: ent.preImage})
			}
		}
	}
	if ent.lsid != nil {
		ev = append(ev, bson.E{Key: "lsid", Value: ent.lsid})
	}
	if ent.txnNumber != nil {
		ev = append(ev, bson.E{Key: "txnNumber", Value: *ent.txnNumber})
	}
	if ent.fromMigrate { // shown to a shard's showMigrationEvents stream only
		ev = append(ev, bson.E{Key: "fromMigrate", Value: true})
	}
	out := []streamEvent{{doc: ev, data: data}}
	if e.invalidates(cs, ent) {
		inv := tok
		inv.FromInvalidate = true
		idata, ibits := inv.Encode()
		iid := bson.D{{Key: "_data", Value: idata}}
		if ibits != nil {
			iid = append(iid, bson.E{Key: "_typeBits", Value: bson.Binary{Subtype: 0, Data: ibits}})
		}
		out = append(out, streamEvent{data: idata, doc: bson.D{
			{Key: "_id", Value: iid},
			{Key: "operationType", Value: "invalidate"},
			{Key: "clusterTime", Value: ent.ts},
			{Key: "wallTime", Value: ent.wall},
		}})
	}
	return out, nil
}

// entryToken is the resume token of the event an oplog entry produces.
func entryToken(ent *oplogEntry) resumetoken.Token {
	tok := resumetoken.Token{ClusterTime: ent.ts, Version: 2, TokenType: resumetoken.TypeEvent, TxnOpIndex: ent.txnOpIndex}
	if ent.uuid != nil {
		tok.UUID = append([]byte(nil), ent.uuid[:]...)
	}
	switch ent.op {
	case opInsert, opUpdate, opReplace, opDelete:
		tok.EventIdentifier = bson.D{{Key: "operationType", Value: ent.op}, {Key: "documentKey", Value: ent.docKey}}
	default:
		desc := ent.opDesc
		if desc == nil {
			desc = bson.D{}
		}
		tok.EventIdentifier = bson.D{{Key: "operationType", Value: ent.op}, {Key: "operationDescription", Value: desc}}
	}
	return tok
}

// invalidates reports whether the entry ends the stream: a collection
// stream ends when its collection is dropped or renamed, a database stream
// when its database is dropped; cluster streams are never invalidated.
func (e *engine) invalidates(cs *changeStream, ent *oplogEntry) bool {
	switch {
	case cs.db == "":
		return false
	case cs.coll == "":
		return ent.op == opDropDatabase
	}
	switch ent.op {
	case opDrop:
		return true
	case opRename:
		return ent.db == cs.db && ent.coll == cs.coll || ent.dropTarget != nil && ent.toDB == cs.db && ent.toColl == cs.coll
	}
	return false
}

// postImage returns the fullDocument of an update event for the stream's
// fullDocument option. With updateLookup, callers hold e.mu.
func (e *engine) postImage(cs *changeStream, ent *oplogEntry) (any, error) {
	switch cs.fullDocument {
	case "updateLookup":
		c := e.coll(ent.db, ent.coll)
		if c == nil || c.isView {
			return nil, nil
		}
		id, _ := lookupTop(ent.docKey, "_id")
		if rec := c.byIDValue(id); rec != nil {
			return rec.doc, nil
		}
		return nil, nil
	case "whenAvailable", "required":
		if ent.preImageRecorded {
			return ent.doc, nil
		}
		if cs.fullDocument == "required" {
			return nil, errorf(mongoerr.CodeNoMatchingDocument, "Change stream was configured to require a post-image for all update events, but the post-image was not found for event: %s", ent.db+"."+ent.coll)
		}
		return nil, nil
	}
	return nil, nil
}
