package unified

import (
	"context"
	"errors"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/xoptions"
)

// More CRUD operations (count, findOne, modifyCollection) and the
// arguments the v2 driver takes only as internal options.

func init() {
	register(kindCollection, "count", opCount)
	register(kindCollection, "findOne", opFindOne)
	register(kindDatabase, "modifyCollection", opModifyCollection)
}

// internalArgs are arguments of the format that the v2 driver accepts only
// through its internal options (package xoptions):
//
//   - rawData (8.2+ servers; the driver drops it for older ones);
//   - bypassDocumentValidation: false, which the driver never sends
//     (GODRIVER-3407), passed as an extra command field so that the server
//     still receives it as the test says;
//   - maxTimeMS for operations that do not return a cursor (the v2 driver
//     derives maxTimeMS from context deadlines only), also passed as an
//     extra command field.
type internalArgs struct {
	rawData *bool
	fields  bson.D
}

// read takes rawData and maxTimeMS from the arguments.
func (in *internalArgs) read(a *fields) {
	in.rawData = a.boolPtr("rawData")
	if n := a.int64Ptr("maxTimeMS"); n != nil {
		in.fields = append(in.fields, bson.E{Key: "maxTimeMS", Value: *n})
	}
}

// bypassFalse records bypassDocumentValidation: false.
func (in *internalArgs) bypassFalse(b bool) {
	if !b {
		in.fields = append(in.fields, bson.E{Key: "bypassDocumentValidation", Value: false})
	}
}

// apply sets the internal options with an xoptions setter.
func (in *internalArgs) apply(set func(key string, v any) error) error {
	if in.rawData != nil {
		if err := set("rawData", *in.rawData); err != nil {
			return rerr("unified runner: rawData: %v", err)
		}
	}
	if len(in.fields) > 0 {
		if err := set("addCommandFields", in.fields); err != nil {
			return rerr("unified runner: %s: %v", in.fields[0].Key, err)
		}
	}
	return nil
}

// collationArg reads a collation document, checking its fields.
func collationArg(a *fields) *options.Collation {
	d := a.doc("collation")
	if d == nil {
		return nil
	}
	r := newFields(d, a.where+".collation")
	c := &options.Collation{
		Locale:          r.reqStr("locale"),
		CaseLevel:       r.boolean("caseLevel"),
		CaseFirst:       r.str("caseFirst"),
		NumericOrdering: r.boolean("numericOrdering"),
		Alternate:       r.str("alternate"),
		MaxVariable:     r.str("maxVariable"),
		Normalization:   r.boolean("normalization"),
		Backwards:       r.boolean("backwards"),
	}
	if n := r.int64Ptr("strength"); n != nil {
		c.Strength = int(*n)
	}
	if err := r.done("field"); err != nil {
		a.fail("%v", err)
	}
	return c
}

func opCount(tr *testRun, ctx context.Context, e *entity, a *fields) (opResult, error) {
	filter := filterArg(a, false)
	o := options.Count()
	var in internalArgs
	if n := a.int64Ptr("skip"); n != nil {
		o.SetSkip(*n)
	}
	if n := a.int64Ptr("limit"); n != nil {
		o.SetLimit(*n)
	}
	if c := rawArg(a, "comment"); c != nil {
		o.SetComment(c)
	}
	if h := hintArg(a); h != nil {
		o.SetHint(h)
	}
	if c := collationArg(a); c != nil {
		o.SetCollation(c)
	}
	in.read(a)
	if err := a.ready(); err != nil {
		return opResult{}, err
	}
	// The deprecated count helper is the count command; the v2 driver
	// only has CountDocuments (an aggregate) and EstimatedDocumentCount
	// (count without a filter), so the command is run directly, with
	// rawData only for 8.2+ servers as a driver sends it.
	cmd := bson.D{{Key: "count", Value: e.coll.Name()}, {Key: "query", Value: filter}}
	args, err := mongoCountFields(o)
	if err != nil {
		return opResult{}, err
	}
	cmd = append(cmd, args...)
	if in.rawData != nil && tr.info.version[0]*100+tr.info.version[1] >= 802 {
		cmd = append(cmd, bson.E{Key: "rawData", Value: *in.rawData})
	}
	cmd = append(cmd, in.fields...)
	var reply struct {
		N int64 `bson:"n"`
	}
	if err := e.coll.Database().RunCommand(ctx, cmd).Decode(&reply); err != nil {
		return opResult{}, err
	}
	return valueResult(reply.N)
}

// mongoCountFields turns count options into count command fields.
func mongoCountFields(o *options.CountOptionsBuilder) (bson.D, error) {
	var co options.CountOptions
	for _, set := range o.List() {
		if err := set(&co); err != nil {
			return nil, rerr("unified runner: count options: %v", err)
		}
	}
	var d bson.D
	if co.Skip != nil {
		d = append(d, bson.E{Key: "skip", Value: *co.Skip})
	}
	if co.Limit != nil {
		d = append(d, bson.E{Key: "limit", Value: *co.Limit})
	}
	if co.Comment != nil {
		d = append(d, bson.E{Key: "comment", Value: co.Comment})
	}
	if co.Hint != nil {
		d = append(d, bson.E{Key: "hint", Value: co.Hint})
	}
	if co.Collation != nil {
		d = append(d, bson.E{Key: "collation", Value: co.Collation})
	}
	return d, nil
}

func opFindOne(_ *testRun, ctx context.Context, e *entity, a *fields) (opResult, error) {
	filter := filterArg(a, false)
	o := options.FindOne()
	if s := a.doc("sort"); s != nil {
		o.SetSort(s)
	}
	if p := a.doc("projection"); p != nil {
		o.SetProjection(p)
	}
	if n := a.int64Ptr("skip"); n != nil {
		o.SetSkip(*n)
	}
	if c := rawArg(a, "comment"); c != nil {
		o.SetComment(c)
	}
	if h := hintArg(a); h != nil {
		o.SetHint(h)
	}
	if c := collationArg(a); c != nil {
		o.SetCollation(c)
	}
	var in internalArgs
	in.read(a)
	if err := a.ready(); err != nil {
		return opResult{}, err
	}
	if err := in.apply(func(k string, v any) error { return xoptions.SetInternalFindOneOptions(o, k, v) }); err != nil {
		return opResult{}, err
	}
	doc, err := e.coll.FindOne(ctx, filter, o).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return opResult{value: bson.RawValue{Type: bson.TypeNull}}, nil
	}
	if err != nil {
		return opResult{}, err
	}
	return docResult(doc), nil
}

// opModifyCollection runs collMod; the Go driver has no helper for it.
func opModifyCollection(_ *testRun, ctx context.Context, e *entity, a *fields) (opResult, error) {
	cmd := bson.D{{Key: "collMod", Value: a.reqStr("collection")}}
	for _, k := range []string{"validator", "validationLevel", "validationAction", "changeStreamPreAndPostImages", "index", "expireAfterSeconds"} {
		if v, ok := a.value(k); ok {
			cmd = append(cmd, bson.E{Key: k, Value: v})
		}
	}
	if err := a.ready(); err != nil {
		return opResult{}, err
	}
	reply, err := e.db.RunCommand(ctx, cmd).Raw()
	if err != nil {
		return opResult{}, err
	}
	return docResult(reply), nil
}

// letArg returns the let document (the driver takes let as a document,
// never a bare value), or nil when absent.
func letArg(a *fields) any {
	if d := a.doc("let"); d != nil {
		return d
	}
	return nil
}
