package mongotest

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
	"github.com/ferry-io/ferry/mongotest/internal/mql"
)

// The aggregation stages that write: $out and $merge, and the
// $listLocalSessions source stage.

// outputStage is a parsed final $out or $merge stage.
type outputStage struct {
	stage    string // "$out" or "$merge"
	db, coll string
	// $merge only:
	on             []string
	whenMatched    string      // replace, keepExisting, merge, fail, or "" with pipeline
	pipeline       *mql.Update // whenMatched given as a pipeline
	whenNotMatched string      // insert, discard, fail
	let            bson.D      // variables of the whenMatched pipeline; nil: {new: "$$ROOT"}
}

// parseOutputStage parses {$out: ...} or {$merge: ...} of a pipeline run
// in database db.
func parseOutputStage(db, stage string, spec any) (*outputStage, error) {
	o := &outputStage{stage: stage, db: db}
	target := func(v any, field string) error {
		switch t := v.(type) {
		case string:
			o.coll = t
		case bson.D:
			for _, el := range t {
				s, ok := el.Value.(string)
				switch {
				case el.Key == "db" && ok:
					o.db = s
				case el.Key == "coll" && ok:
					o.coll = s
				case el.Key == "timeseries" && stage == "$out":
					return errorf(mongoerr.CodeNotImplemented, "$out to a time-series collection is not supported by mongotest")
				default:
					return errorf(mongoerr.CodeFailedToParse, "BSON field '%s.%s' is an unknown field or has the wrong type", field, el.Key)
				}
			}
		default:
			return errorf(mongoerr.CodeFailedToParse, "%s must be a string or an object, not %s", field, typeName(v))
		}
		if o.coll == "" {
			return errorf(mongoerr.CodeFailedToParse, "%s requires a collection name", field)
		}
		return validCollName(o.db, o.coll)
	}
	if stage == "$out" {
		return o, target(spec, "$out")
	}
	o.on, o.whenMatched, o.whenNotMatched = []string{"_id"}, "merge", "insert"
	d, isDoc := spec.(bson.D)
	if !isDoc {
		return o, target(spec, "$merge")
	}
	hasInto := false
	for _, el := range d {
		switch el.Key {
		case "into":
			hasInto = true
			if err := target(el.Value, "$merge.into"); err != nil {
				return nil, err
			}
		case "on":
			switch v := el.Value.(type) {
			case string:
				o.on = []string{v}
			case bson.A:
				o.on = o.on[:0]
				for _, x := range v {
					s, ok := x.(string)
					if !ok {
						return nil, errorf(51134, "$merge 'on' array elements must be strings, but found %s", typeName(x))
					}
					o.on = append(o.on, s)
				}
				if len(o.on) == 0 {
					return nil, errorf(51187, "If explicitly specifying $merge 'on', must include at least one field")
				}
			default:
				return nil, errorf(51186, "$merge 'on' field must be either a string or an array of strings, but found %s", typeName(el.Value))
			}
		case "whenMatched":
			switch v := el.Value.(type) {
			case string:
				switch v {
				case "replace", "keepExisting", "merge", "fail":
					o.whenMatched = v
				default:
					return nil, errorf(mongoerr.CodeBadValue, "Enumeration value '%s' for field '$merge.whenMatched' is not a valid value.", v)
				}
			case bson.A:
				u, err := mql.CompileUpdate(v)
				if err != nil {
					return nil, err
				}
				o.whenMatched, o.pipeline = "", u
			default:
				return nil, errorf(51191, "$merge 'whenMatched' field must be either a string or an array, but found %s", typeName(el.Value))
			}
		case "whenNotMatched":
			v, _ := el.Value.(string)
			switch v {
			case "insert", "discard", "fail":
				o.whenNotMatched = v
			default:
				return nil, errorf(mongoerr.CodeBadValue, "Enumeration value '%v' for field '$merge.whenNotMatched' is not a valid value.", el.Value)
			}
		case "let":
			l, ok := el.Value.(bson.D)
			if !ok {
				return nil, errorf(mongoerr.CodeTypeMismatch, "BSON field '$merge.let' is the wrong type '%s', expected type 'object'", typeName(el.Value))
			}
			o.let = l
		default:
			return nil, errorf(mongoerr.CodeIDLUnknownField, "BSON field '$merge.%s' is an unknown field.", el.Key)
		}
	}
	if !hasInto {
		return nil, errorf(mongoerr.CodeIDLFailedToParse, "BSON field '$merge.into' is missing but a required field")
	}
	if o.let != nil && o.pipeline == nil {
		return nil, errorf(51199, "Cannot use 'let' variables with 'whenMatched: %s' mode", o.whenMatched)
	}
	return o, nil
}

// writeOutput writes the results of a pipeline to its $out or $merge
// target.
func (e *engine) writeOutput(r *request, o *outputStage, docs []bson.D, vars *mql.Vars) error {
	if c := e.coll(o.db, o.coll); c != nil && c.isView {
		return errorf(mongoerr.CodeCommandNotSupportedOnView, "Cannot write the results of an aggregation into a view: %s", c.ns())
	}
	if o.stage == "$out" {
		return e.writeOut(r, o, docs)
	}
	return e.writeMerge(r, o, docs, vars)
}

// writeOut replaces the target collection with docs as the server does:
// the documents go into a temporary collection that has the target's
// options and indexes, which is then renamed over the target, so readers
// see the old contents or the new ones and a failure (a duplicate _id, a
// unique index violation) leaves the target unchanged.
func (e *engine) writeOut(r *request, o *outputStage, docs []bson.D) error {
	old := e.coll(o.db, o.coll)
	id := newUUID()
	tmpName := "tmp.agg_out." + hex.EncodeToString(id[:])
	var opts bson.D
	if old != nil {
		opts = old.options
	}
	tmp := e.createColl(o.db, tmpName, opts)
	fail := func(err error) error {
		e.dropColl(tmp)
		return err
	}
	if old != nil {
		for _, ix := range old.indexes[1:] {
			cp, err := parseIndexSpec(ix.spec)
			if err != nil {
				return fail(err)
			}
			if cp.unique {
				cp.keys = make(map[string]int)
			}
			tmp.indexes = append(tmp.indexes, cp)
		}
	}
	for _, d := range docs {
		doc, err := prepareInsert(d)
		if err != nil {
			return fail(err)
		}
		if err := e.validate(r, tmp, nil, doc); err != nil {
			return fail(err)
		}
		if err := e.insertDoc(tmp, doc, nil); err != nil {
			return fail(err)
		}
	}
	e.renameColl(tmp, o.db, o.coll, true)
	return nil
}

// writeMerge merges docs into the target, one write per document, each
// logged like the insert, update or replace it is.
func (e *engine) writeMerge(r *request, o *outputStage, docs []bson.D, vars *mql.Vars) error {
	c := e.coll(o.db, o.coll)
	onID := len(o.on) == 1 && o.on[0] == "_id"
	if !onID && !hasUniqueIndexOn(c, o.on) {
		return errorf(51183, "Cannot find index to verify that join fields will be unique")
	}
	for _, d := range docs {
		if _, ok := lookupTop(d, "_id"); !ok {
			d = append(bson.D{{Key: "_id", Value: bson.NewObjectID()}}, d...)
		}
		match := bson.D{}
		for _, f := range o.on {
			v, ok := lookupPath(d, f)
			if _, isArr := v.(bson.A); !ok || v == nil || isArr {
				return errorf(51132, "$merge write error: 'on' field '%s' cannot be missing, null, undefined or an array", f)
			}
			match = append(match, bson.E{Key: f, Value: bson.D{{Key: "$eq", Value: v}}})
		}
		var refs []docRef
		if c != nil {
			f, err := mql.CompileFilter(match)
			if err != nil {
				return err
			}
			if refs, err = e.scanDocs(r, c, f, nil, vars, 1); err != nil {
				return err
			}
		}
		if len(refs) == 0 {
			switch o.whenNotMatched {
			case "discard":
				continue
			case "fail":
				return errorf(mongoerr.CodeMergeStageNoMatchingDocument, "$merge could not find a matching document in the target collection for at least one document in the source collection")
			}
			if c == nil {
				var err error
				if c, err = e.ensureColl(o.db, o.coll); err != nil {
					return err
				}
			}
			doc, err := prepareInsert(d)
			if err != nil {
				return err
			}
			if err := e.validate(r, c, nil, doc); err != nil {
				return err
			}
			if err := e.writeInsert(r, c, doc, nil); err != nil {
				return err
			}
			continue
		}
		ref := refs[0]
		var u *mql.Update
		var err error
		uvars := vars
		switch o.whenMatched {
		case "keepExisting":
			continue
		case "fail":
			// The server inserts and reports the duplicate key.
			return c.dupKeyError(c.indexes[0], bson.D{{Key: "_id", Value: d[0].Value}})
		case "replace":
			u, err = mql.CompileUpdate(withoutID(d))
		case "merge":
			u, err = mql.CompileUpdate(bson.D{{Key: "$set", Value: withoutID(d)}})
		default:
			u = o.pipeline
			cp := *vars
			let := o.let
			if let == nil {
				let = bson.D{{Key: "new", Value: "$$ROOT"}}
			}
			user := map[string]any{}
			for k, v := range vars.User {
				user[k] = v
			}
			for _, el := range let {
				x, err := mql.CompileExpr(el.Value)
				if err != nil {
					return err
				}
				v, err := x.Eval(d, vars)
				if err != nil {
					return err
				}
				user[el.Key] = v
			}
			cp.User = user
			uvars = &cp
		}
		if err != nil {
			return err
		}
		newDoc, desc, err := u.Apply(ref.doc, uvars, false)
		if err != nil {
			return err
		}
		if err := checkIDUnchanged(ref.doc, newDoc); err != nil {
			return err
		}
		if desc != nil && desc.Empty() {
			continue
		}
		op := opUpdate
		if u.Kind() == mql.UpdateReplacement || desc != nil && desc.Replacement {
			op = opReplace
		}
		if err := e.validate(r, c, ref.doc, newDoc); err != nil {
			return err
		}
		if err := e.writeUpdate(r, c, ref, newDoc, op, desc); err != nil {
			return err
		}
	}
	return nil
}

func withoutID(d bson.D) bson.D {
	out := make(bson.D, 0, len(d))
	for _, el := range d {
		if el.Key != "_id" {
			out = append(out, el)
		}
	}
	return out
}

// hasUniqueIndexOn reports whether c has a unique index on exactly the
// fields on (in any order).
func hasUniqueIndexOn(c *collection, on []string) bool {
	if c == nil {
		return false
	}
	want := slices.Sorted(slices.Values(on))
	for _, ix := range c.indexes {
		if !ix.unique || len(ix.key) != len(want) {
			continue
		}
		var got []string
		for _, k := range ix.key {
			got = append(got, k.Key)
		}
		slices.Sort(got)
		if slices.Equal(got, want) {
			return true
		}
	}
	return false
}

// listLocalSessions is the $listLocalSessions source: the sessions this
// server has seen, the current command's included. The emulator has no
// users, so every session belongs to the unauthenticated user.
func (e *engine) listLocalSessions(r *request, spec any) ([]bson.D, error) {
	d, ok := spec.(bson.D)
	if !ok {
		return nil, errorf(mongoerr.CodeTypeMismatch, "$listLocalSessions must be an object")
	}
	for _, el := range d {
		switch el.Key {
		case "allUsers":
		case "users":
			if a, ok := el.Value.(bson.A); !ok || len(a) > 0 {
				return nil, errorf(mongoerr.CodeNotImplemented, "$listLocalSessions users: mongotest has no users")
			}
		default:
			return nil, errorf(mongoerr.CodeIDLUnknownField, "BSON field '$listLocalSessions.%s' is an unknown field.", el.Key)
		}
	}
	uid := sha256.Sum256(nil)
	now := bson.NewDateTimeFromTime(e.nowLocked())
	seen := map[string]bool{}
	var out []bson.D
	add := func(lsid bson.D) {
		id, ok := lookupTop(lsid, "id")
		if !ok || seen[keyOf(id)] {
			return
		}
		seen[keyOf(id)] = true
		out = append(out, bson.D{
			{Key: "_id", Value: bson.D{{Key: "id", Value: id}, {Key: "uid", Value: bson.Binary{Data: uid[:]}}}},
			{Key: "lastUse", Value: now},
		})
	}
	if r.lsid != nil {
		add(r.lsid)
	}
	keys := make([]string, 0, len(e.sessions))
	for k := range e.sessions {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		add(e.sessions[k].lsid)
	}
	return out, nil
}

// renameColl renames src to db.name, replacing an existing collection
// there when dropTarget is set, and logs the rename. Callers hold e.mu and
// have checked the names.
func (e *engine) renameColl(src *collection, tdb, tcoll string, dropTarget bool) {
	fdb, fcoll := src.db, src.name
	var dropped *[16]byte
	if tgt := e.coll(tdb, tcoll); tgt != nil && dropTarget {
		u := tgt.uuid
		dropped = &u
		delete(e.dbs[tdb].colls, tcoll)
	}
	delete(e.dbs[fdb].colls, fcoll)
	src.db, src.name = tdb, tcoll
	e.db(tdb, true).colls[tcoll] = src
	u := src.uuid
	desc := bson.D{{Key: "to", Value: bson.D{{Key: "db", Value: tdb}, {Key: "coll", Value: tcoll}}}}
	if dropped != nil {
		desc = append(desc, bson.E{Key: "dropTarget", Value: bson.Binary{Subtype: 4, Data: dropped[:]}})
	}
	e.appendOplog(&oplogEntry{op: opRename, db: fdb, coll: fcoll, uuid: &u, toDB: tdb, toColl: tcoll, dropTarget: dropped, opDesc: desc})
}
