package unified

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/xoptions"
)

// Bulk writes: the collection-level bulkWrite (insert, update and delete
// commands under the hood) and the client-level clientBulkWrite (the 8.0
// bulkWrite command).

func init() {
	register(kindCollection, "bulkWrite", opBulkWrite)
	register(kindClient, "clientBulkWrite", opClientBulkWrite)
}

// modelArgs reads one write model of a bulkWrite or clientBulkWrite: a
// document with exactly one key, the model's name.
func modelArgs(v bson.Raw, where string) (string, *fields, error) {
	elems, err := v.Elements()
	if err != nil || len(elems) != 1 {
		return "", nil, rerr("unified runner: %s: a write model must have exactly one key", where)
	}
	d, ok := elems[0].Value().DocumentOK()
	if !ok {
		return "", nil, rerr("unified runner: %s.%s must be a document", where, elems[0].Key())
	}
	return elems[0].Key(), newFields(d, where+"."+elems[0].Key()), nil
}

// arrayFiltersArg returns arrayFilters as the driver takes them.
func arrayFiltersArg(a *fields) []any {
	var out []any
	for _, f := range a.docs("arrayFilters") {
		out = append(out, f)
	}
	return out
}

func opBulkWrite(_ *testRun, ctx context.Context, e *entity, a *fields) (opResult, error) {
	var models []mongo.WriteModel
	for i, r := range a.docs("requests") {
		name, m, err := modelArgs(r, fmt.Sprintf("requests[%d]", i))
		if err != nil {
			return opResult{}, err
		}
		var wm mongo.WriteModel
		switch name {
		case "insertOne":
			wm = mongo.NewInsertOneModel().SetDocument(m.reqDoc("document"))
		case "updateOne", "updateMany":
			filter, update := filterArg(m, true), updateArg(m, "update")
			upsert, coll, hint, af := m.boolPtr("upsert"), collationArg(m), hintArg(m), arrayFiltersArg(m)
			if name == "updateOne" {
				u := mongo.NewUpdateOneModel().SetFilter(filter).SetUpdate(update)
				if s := m.doc("sort"); s != nil {
					u.SetSort(s)
				}
				if upsert != nil {
					u.SetUpsert(*upsert)
				}
				if coll != nil {
					u.SetCollation(coll)
				}
				if hint != nil {
					u.SetHint(hint)
				}
				if af != nil {
					u.SetArrayFilters(af)
				}
				wm = u
			} else {
				u := mongo.NewUpdateManyModel().SetFilter(filter).SetUpdate(update)
				if upsert != nil {
					u.SetUpsert(*upsert)
				}
				if coll != nil {
					u.SetCollation(coll)
				}
				if hint != nil {
					u.SetHint(hint)
				}
				if af != nil {
					u.SetArrayFilters(af)
				}
				wm = u
			}
		case "replaceOne":
			u := mongo.NewReplaceOneModel().SetFilter(filterArg(m, true)).SetReplacement(m.reqDoc("replacement"))
			if b := m.boolPtr("upsert"); b != nil {
				u.SetUpsert(*b)
			}
			if c := collationArg(m); c != nil {
				u.SetCollation(c)
			}
			if h := hintArg(m); h != nil {
				u.SetHint(h)
			}
			if s := m.doc("sort"); s != nil {
				u.SetSort(s)
			}
			wm = u
		case "deleteOne", "deleteMany":
			filter, coll, hint := filterArg(m, true), collationArg(m), hintArg(m)
			if name == "deleteOne" {
				d := mongo.NewDeleteOneModel().SetFilter(filter)
				if coll != nil {
					d.SetCollation(coll)
				}
				if hint != nil {
					d.SetHint(hint)
				}
				wm = d
			} else {
				d := mongo.NewDeleteManyModel().SetFilter(filter)
				if coll != nil {
					d.SetCollation(coll)
				}
				if hint != nil {
					d.SetHint(hint)
				}
				wm = d
			}
		default:
			return opResult{}, rerr("unified runner: requests[%d]: write model %s not supported", i, name)
		}
		if err := m.done("field"); err != nil {
			return opResult{}, asRunnerError(err)
		}
		models = append(models, wm)
	}
	if !a.has("requests") {
		a.fail("requests is required")
	}
	o := options.BulkWrite()
	var in internalArgs
	if b := a.boolPtr("ordered"); b != nil {
		o.SetOrdered(*b)
	}
	if b := a.boolPtr("bypassDocumentValidation"); b != nil {
		o.SetBypassDocumentValidation(*b)
		in.bypassFalse(*b)
	}
	if c := rawArg(a, "comment"); c != nil {
		o.SetComment(c)
	}
	if l := letArg(a); l != nil {
		o.SetLet(l)
	}
	in.read(a)
	if err := a.ready(); err != nil {
		return opResult{}, err
	}
	if err := in.apply(func(k string, v any) error { return xoptions.SetInternalBulkWriteOptions(o, k, v) }); err != nil {
		return opResult{}, err
	}
	res, err := e.coll.BulkWrite(ctx, models, o)
	if res == nil {
		return opResult{}, err
	}
	r, rerr := bulkWriteResult(res)
	if rerr != nil {
		return opResult{}, rerr
	}
	return r, err
}

// bulkWriteResult is the format's BulkWriteResult. The Go driver keeps no
// insertedIds, which the tests only ever match with $$unsetOrMatches.
func bulkWriteResult(res *mongo.BulkWriteResult) (opResult, error) {
	up := bson.D{}
	for i := int64(0); len(up) < len(res.UpsertedIDs); i++ {
		if id, ok := res.UpsertedIDs[i]; ok {
			up = append(up, bson.E{Key: strconv.FormatInt(i, 10), Value: id})
		}
	}
	return valueResult(bson.D{
		{Key: "deletedCount", Value: res.DeletedCount},
		{Key: "insertedCount", Value: res.InsertedCount},
		{Key: "matchedCount", Value: res.MatchedCount},
		{Key: "modifiedCount", Value: res.ModifiedCount},
		{Key: "upsertedCount", Value: res.UpsertedCount},
		{Key: "upsertedIds", Value: up},
	})
}

// clientModel converts one clientBulkWrite model.
func clientModel(name string, m *fields) (mongo.ClientBulkWrite, error) {
	ns := m.reqStr("namespace")
	db, coll, ok := strings.Cut(ns, ".")
	if !ok && m.err == nil {
		m.fail("namespace %q is not db.collection", ns)
	}
	w := mongo.ClientBulkWrite{Database: db, Collection: coll}
	switch name {
	case "insertOne":
		w.Model = mongo.NewClientInsertOneModel().SetDocument(m.reqDoc("document"))
	case "updateOne", "updateMany":
		filter, update := filterArg(m, true), updateArg(m, "update")
		upsert, c, hint, af := m.boolPtr("upsert"), collationArg(m), hintArg(m), arrayFiltersArg(m)
		if name == "updateOne" {
			u := mongo.NewClientUpdateOneModel().SetFilter(filter).SetUpdate(update)
			if s := m.doc("sort"); s != nil {
				u.SetSort(s)
			}
			if upsert != nil {
				u.SetUpsert(*upsert)
			}
			if c != nil {
				u.SetCollation(c)
			}
			if hint != nil {
				u.SetHint(hint)
			}
			if af != nil {
				u.SetArrayFilters(af)
			}
			w.Model = u
		} else {
			u := mongo.NewClientUpdateManyModel().SetFilter(filter).SetUpdate(update)
			if upsert != nil {
				u.SetUpsert(*upsert)
			}
			if c != nil {
				u.SetCollation(c)
			}
			if hint != nil {
				u.SetHint(hint)
			}
			if af != nil {
				u.SetArrayFilters(af)
			}
			w.Model = u
		}
	case "replaceOne":
		u := mongo.NewClientReplaceOneModel().SetFilter(filterArg(m, true)).SetReplacement(m.reqDoc("replacement"))
		if b := m.boolPtr("upsert"); b != nil {
			u.SetUpsert(*b)
		}
		if c := collationArg(m); c != nil {
			u.SetCollation(c)
		}
		if h := hintArg(m); h != nil {
			u.SetHint(h)
		}
		if s := m.doc("sort"); s != nil {
			u.SetSort(s)
		}
		w.Model = u
	case "deleteOne", "deleteMany":
		filter, c, hint := filterArg(m, true), collationArg(m), hintArg(m)
		if name == "deleteOne" {
			d := mongo.NewClientDeleteOneModel().SetFilter(filter)
			if c != nil {
				d.SetCollation(c)
			}
			if hint != nil {
				d.SetHint(hint)
			}
			w.Model = d
		} else {
			d := mongo.NewClientDeleteManyModel().SetFilter(filter)
			if c != nil {
				d.SetCollation(c)
			}
			if hint != nil {
				d.SetHint(hint)
			}
			w.Model = d
		}
	default:
		return w, rerr("unified runner: %s: write model %s not supported", m.where, name)
	}
	return w, asRunnerError(m.done("field"))
}

func opClientBulkWrite(_ *testRun, ctx context.Context, e *entity, a *fields) (opResult, error) {
	var writes []mongo.ClientBulkWrite
	for i, r := range a.docs("models") {
		name, m, err := modelArgs(r, fmt.Sprintf("models[%d]", i))
		if err != nil {
			return opResult{}, err
		}
		w, err := clientModel(name, m)
		if err != nil {
			return opResult{}, err
		}
		writes = append(writes, w)
	}
	if !a.has("models") {
		a.fail("models is required")
	}
	o := options.ClientBulkWrite()
	var in internalArgs
	if b := a.boolPtr("ordered"); b != nil {
		o.SetOrdered(*b)
	}
	if b := a.boolPtr("verboseResults"); b != nil {
		o.SetVerboseResults(*b)
	}
	if b := a.boolPtr("bypassDocumentValidation"); b != nil {
		o.SetBypassDocumentValidation(*b)
		in.bypassFalse(*b)
	}
	if c := rawArg(a, "comment"); c != nil {
		o.SetComment(c)
	}
	if l := letArg(a); l != nil {
		o.SetLet(l)
	}
	if d := a.doc("writeConcern"); d != nil {
		wc, err := parseWriteConcern(d, a.where+".writeConcern")
		if err != nil {
			return opResult{}, asRunnerError(err)
		}
		o.SetWriteConcern(wc)
	}
	in.read(a)
	if err := a.ready(); err != nil {
		return opResult{}, err
	}
	if err := in.apply(func(k string, v any) error { return xoptions.SetInternalClientBulkWriteOptions(o, k, v) }); err != nil {
		return opResult{}, err
	}
	res, err := e.client.client.BulkWrite(ctx, writes, o)
	var cbe mongo.ClientBulkWriteException
	if errors.As(err, &cbe) {
		res = cbe.PartialResult
	}
	if res == nil {
		return opResult{}, err
	}
	r, rerr := clientBulkWriteResult(res)
	if rerr != nil {
		return opResult{}, rerr
	}
	return r, err
}

// clientBulkWriteResult is the format's ClientBulkWriteResult; the verbose
// maps are present only when the driver has verbose results.
func clientBulkWriteResult(res *mongo.ClientBulkWriteResult) (opResult, error) {
	d := bson.D{
		{Key: "acknowledged", Value: res.Acknowledged},
		{Key: "insertedCount", Value: res.InsertedCount},
		{Key: "upsertedCount", Value: res.UpsertedCount},
		{Key: "matchedCount", Value: res.MatchedCount},
		{Key: "modifiedCount", Value: res.ModifiedCount},
		{Key: "deletedCount", Value: res.DeletedCount},
	}
	if res.HasVerboseResults {
		ins, upd, del := bson.D{}, bson.D{}, bson.D{}
		for _, i := range sortedKeys(res.InsertResults) {
			ins = append(ins, bson.E{Key: strconv.Itoa(i), Value: bson.D{{Key: "insertedId", Value: res.InsertResults[i].InsertedID}}})
		}
		for _, i := range sortedKeys(res.UpdateResults) {
			u := res.UpdateResults[i]
			ud := bson.D{{Key: "matchedCount", Value: u.MatchedCount}, {Key: "modifiedCount", Value: u.ModifiedCount}}
			if u.UpsertedID != nil {
				ud = append(ud, bson.E{Key: "upsertedId", Value: u.UpsertedID})
			}
			upd = append(upd, bson.E{Key: strconv.Itoa(i), Value: ud})
		}
		for _, i := range sortedKeys(res.DeleteResults) {
			del = append(del, bson.E{Key: strconv.Itoa(i), Value: bson.D{{Key: "deletedCount", Value: res.DeleteResults[i].DeletedCount}}})
		}
		d = append(d, bson.E{Key: "insertResults", Value: ins}, bson.E{Key: "updateResults", Value: upd}, bson.E{Key: "deleteResults", Value: del})
	}
	return valueResult(d)
}

func sortedKeys[V any](m map[int]V) []int { return slices.Sorted(maps.Keys(m)) }

// verifyBulkErrors checks expectError.writeErrors and writeConcernErrors
// against a ClientBulkWriteException: the same indexes and count, each
// error matched as a root-level document {code, message, details}.
func (tr *testRun) verifyBulkErrors(x *ExpectedError, err error) error {
	var cbe mongo.ClientBulkWriteException
	if !errors.As(err, &cbe) {
		return fmt.Errorf("expectError: writeErrors/writeConcernErrors need a client bulk write error, got %q", shorten(err.Error()))
	}
	if x.WriteErrors != nil {
		elems, _ := x.WriteErrors.Elements()
		if len(elems) != len(cbe.WriteErrors) {
			return fmt.Errorf("expectError.writeErrors: expected %d, got %d (%s)", len(elems), len(cbe.WriteErrors), shorten(err.Error()))
		}
		for _, el := range elems {
			i, convErr := strconv.Atoi(el.Key())
			we, ok := cbe.WriteErrors[i]
			if convErr != nil || !ok {
				return fmt.Errorf("expectError.writeErrors: no write error for model %s (%s)", el.Key(), shorten(err.Error()))
			}
			got, gerr := writeErrorDoc(we.Code, we.Message, we.Details)
			if gerr != nil {
				return gerr
			}
			if e := tr.match.match("writeErrors."+el.Key(), el.Value(), got, true, true); e != nil {
				return fmt.Errorf("expectError: %w", e)
			}
		}
	}
	if x.WriteConcernErrors != nil {
		if len(x.WriteConcernErrors) != len(cbe.WriteConcernErrors) {
			return fmt.Errorf("expectError.writeConcernErrors: expected %d, got %d", len(x.WriteConcernErrors), len(cbe.WriteConcernErrors))
		}
		for i, want := range x.WriteConcernErrors {
			wce := cbe.WriteConcernErrors[i]
			got, gerr := writeErrorDoc(wce.Code, wce.Message, wce.Details)
			if gerr != nil {
				return gerr
			}
			if e := tr.match.match(fmt.Sprintf("writeConcernErrors[%d]", i), docValue(want), got, true, true); e != nil {
				return fmt.Errorf("expectError: %w", e)
			}
		}
	}
	return nil
}

func writeErrorDoc(code int, msg string, details bson.Raw) (bson.RawValue, error) {
	d := bson.D{{Key: "code", Value: int32(code)}, {Key: "message", Value: msg}}
	if details != nil {
		d = append(d, bson.E{Key: "details", Value: details})
	}
	r, err := valueResult(d)
	return r.value, err
}
