package mongotest

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
	"github.com/ferry-io/ferry/mongotest/internal/mql"
)

// Options shared by the CRUD commands: let variables, collations, hints,
// and reads that report $expr errors and read through views.

// cmdVars returns the variables of a command: $$NOW, $$CLUSTER_TIME and
// the user variables of its let option (evaluated once, as the server
// does), plus extra variables (an update statement's constants).
func (e *engine) cmdVars(r *request) (*mql.Vars, error) {
	vars := e.vars()
	letV, ok := r.arg("let")
	if !ok {
		return vars, nil
	}
	if err := addLet(vars, letV, "let"); err != nil {
		return nil, err
	}
	return vars, nil
}

// addLet evaluates a let document into vars.User.
func addLet(vars *mql.Vars, v any, field string) error {
	d, ok := v.(bson.D)
	if !ok {
		return errorf(mongoerr.CodeTypeMismatch, "BSON field '%s' is the wrong type '%s', expected type 'object'", field, typeName(v))
	}
	if len(d) == 0 {
		return nil
	}
	user := make(map[string]any, len(vars.User)+len(d))
	for k, x := range vars.User {
		user[k] = x
	}
	for _, el := range d {
		if err := validVarName(el.Key); err != nil {
			return err
		}
		x, err := mql.CompileExpr(el.Value)
		if err != nil {
			return err
		}
		val, err := x.Eval(bson.D{}, vars)
		if err != nil {
			return err
		}
		user[el.Key] = val
	}
	vars.User = user
	return nil
}

// validVarName applies MongoDB's rules for user variable names.
func validVarName(name string) error {
	if name == "" {
		return errorf(mongoerr.CodeFailedToParse, "empty variable names are not allowed")
	}
	first, _ := utf8.DecodeRuneInString(name)
	if first < utf8.RuneSelf && !unicode.IsLower(first) {
		return errorf(mongoerr.CodeFailedToParse, "'%s' starts with an invalid character for a user variable name", name)
	}
	for _, c := range name {
		if c < utf8.RuneSelf && !(unicode.IsLetter(c) || unicode.IsDigit(c) || c == '_') {
			return errorf(mongoerr.CodeFailedToParse, "'%s' contains an invalid character for a variable name: '%c'", name, c)
		}
	}
	return nil
}

// withCollation returns vars with the collation of an operation (nil
// spec: the simple collation; collections and indexes never have another
// default, see refuseCollation).
func withCollation(vars *mql.Vars, spec any) (*mql.Vars, error) {
	coll, err := mql.ParseCollation(spec)
	if err != nil || coll == vars.Collation {
		return vars, err
	}
	cp := *vars
	cp.Collation = coll
	return &cp, nil
}

// refuseCollation accepts only the simple collation where mongotest does
// not implement others: collection and view defaults (which the _id index
// would follow) and index collations (which decide uniqueness).
func refuseCollation(spec any, what string) error {
	coll, err := mql.ParseCollation(spec)
	if err != nil {
		return err
	}
	if coll != nil {
		return errorf(mongoerr.CodeNotImplemented, "%s other than the simple collation is not supported by mongotest", what)
	}
	return nil
}

// checkHint fails like the server when a hint names no index of the
// collection. Hints only choose a plan, so a valid one changes no result.
func checkHint(c *collection, hint any) error {
	if hint == nil || c == nil || c.isView {
		return nil
	}
	switch h := hint.(type) {
	case string:
		if h == "" || c.findIndex(h, nil) != nil {
			return nil
		}
	case bson.D:
		if len(h) == 0 || len(h) == 1 && h[0].Key == "$natural" || c.findIndex(nil, h) != nil {
			return nil
		}
	default:
		return errorf(mongoerr.CodeFailedToParse, "hint must be a string or an object")
	}
	return errorf(mongoerr.CodeBadValue, "error processing query: ns=%s planner returned error :: caused by :: hint provided does not correspond to an existing index", c.ns())
}

// scanDocs returns the documents of c matching f as the command sees them, like
// e.read, and also:
//   - fails with the error of an $expr that cannot be evaluated, as the
//     server fails the command (e.read counts it as "no match");
//   - reads a view through its pipeline;
//   - under a collation, never answers from the _id map (whose keys
//     compare bytewise).
func (e *engine) scanDocs(r *request, c *collection, f *mql.Filter, filter bson.D, vars *mql.Vars, limit int) ([]docRef, error) {
	if c == nil {
		return nil, nil
	}
	if vars.Collation != nil || e.idScanOnly {
		filter = nil
	}
	if c.isView {
		docs, err := e.viewDocs(r, c, vars, 0)
		if err != nil {
			return nil, err
		}
		var out []docRef
		for _, d := range docs {
			ok, err := f.MatchErr(d, vars)
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, docRef{doc: d})
				if limit > 0 && len(out) >= limit {
					break
				}
			}
		}
		return out, nil
	}
	if !f.HasExpr() {
		return e.read(r, c, f, filter, vars, limit), nil
	}
	if r == nil || r.txn == nil {
		var out []docRef
		for _, rec := range c.records {
			if rec == nil || rec.deleted {
				continue
			}
			e.metrics.scan.docs++
			ok, err := f.MatchErr(rec.doc, vars)
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, docRef{rec: rec, doc: rec.doc, raw: rec.raw})
				if limit > 0 && len(out) >= limit {
					break
				}
			}
		}
		return out, nil
	}
	// In a transaction, the committed documents tell whether the $expr
	// fails; the transaction's own read decides what matches.
	for _, rec := range c.records {
		if rec == nil || rec.deleted {
			continue
		}
		if _, err := f.MatchErr(rec.doc, vars); err != nil {
			return nil, err
		}
	}
	return e.read(r, c, f, filter, vars, limit), nil
}

// maxViewDepth is MongoDB's limit on views defined on views.
const maxViewDepth = 20

// viewDocs returns the documents of a view: its source's documents through
// its pipeline (views on views resolved in turn).
func (e *engine) viewDocs(r *request, v *collection, vars *mql.Vars, depth int) ([]bson.D, error) {
	if depth >= maxViewDepth {
		return nil, errorf(mongoerr.CodeViewDepthLimitExceeded, "View depth too deep or view cycle detected; maximum depth is %d", maxViewDepth)
	}
	on, _ := lookupD(v.options, "viewOn").(string)
	src := e.coll(v.db, on)
	var docs []bson.D
	switch {
	case src == nil:
	case src.isView:
		var err error
		if docs, err = e.viewDocs(r, src, vars, depth+1); err != nil {
			return nil, err
		}
	default:
		all, _ := mql.CompileFilter(bson.D{})
		for _, ref := range e.read(r, src, all, nil, vars, 0) {
			docs = append(docs, ref.doc)
		}
	}
	pl, _ := lookupD(v.options, "pipeline").(bson.A)
	if len(pl) == 0 {
		return docs, nil
	}
	p, err := mql.CompilePipeline(pl)
	if err != nil {
		return nil, err
	}
	// A view's pipeline runs with the view's collation (always simple,
	// see refuseCollation), not the operation's.
	vv := *vars
	vv.Collation = nil
	return p.Run(docs, &vv)
}

func viewWriteError(c *collection) error {
	return errorf(mongoerr.CodeCommandNotSupportedOnView, "Namespace %s is a view, not a collection", c.ns())
}

// idFieldNames rejects $-prefixed names anywhere inside _id, as the
// server does. Elsewhere, since MongoDB 5.0, stored names may contain dots
// and start with "$" at any level (updates reach such fields only through
// $getField/$setField).
func idFieldNames(v any) error {
	switch x := v.(type) {
	case bson.D:
		for _, el := range x {
			if strings.HasPrefix(el.Key, "$") {
				return errorf(mongoerr.CodeDollarPrefixedFieldName, "_id fields may not contain '$'-prefixed fields: %s is not valid for storage.", el.Key)
			}
			if err := idFieldNames(el.Value); err != nil {
				return err
			}
		}
	case bson.A:
		for _, y := range x {
			if err := idFieldNames(y); err != nil {
				return err
			}
		}
	}
	return nil
}

// validation is a collection's document validation: a query-operator
// validator ($jsonSchema is refused with NotImplemented when the
// collection is created or modified), validationLevel and
// validationAction.
type validation struct {
	filter   *mql.Filter
	spec     bson.D
	moderate bool // validationLevel "moderate": existing invalid documents may stay invalid
	off      bool // validationLevel "off"
	warn     bool // validationAction "warn": accept, as the server does (it only logs)
}

// parseValidation reads the validation options of a create or collMod
// (opts holds the collection's options after the change).
func parseValidation(opts bson.D) (*validation, error) {
	v, ok := lookupTop(opts, "validator")
	if !ok {
		return nil, nil
	}
	spec, ok := v.(bson.D)
	if !ok {
		return nil, errorf(mongoerr.CodeTypeMismatch, "BSON field 'validator' is the wrong type '%s', expected type 'object'", typeName(v))
	}
	if len(spec) == 0 {
		return nil, nil
	}
	if mqlContainsKey(spec, "$jsonSchema") {
		return nil, errorf(mongoerr.CodeNotImplemented, "$jsonSchema validators are not supported by mongotest (query-operator validators are)")
	}
	f, err := mql.CompileFilter(spec)
	if err != nil {
		return nil, err
	}
	val := &validation{filter: f, spec: spec}
	switch lvl := lookupD(opts, "validationLevel"); lvl {
	case nil, "strict":
	case "moderate":
		val.moderate = true
	case "off":
		val.off = true
	default:
		return nil, errorf(mongoerr.CodeBadValue, "Enumeration value '%v' for field 'validationLevel' is not a valid value.", lvl)
	}
	switch act := lookupD(opts, "validationAction"); act {
	case nil, "error", "errorAndLog":
	case "warn":
		val.warn = true
	default:
		return nil, errorf(mongoerr.CodeBadValue, "Enumeration value '%v' for field 'validationAction' is not a valid value.", act)
	}
	return val, nil
}

func mqlContainsKey(v any, key string) bool {
	switch x := v.(type) {
	case bson.D:
		for _, el := range x {
			if el.Key == key || mqlContainsKey(el.Value, key) {
				return true
			}
		}
	case bson.A:
		for _, y := range x {
			if mqlContainsKey(y, key) {
				return true
			}
		}
	}
	return false
}

// validate checks a document about to be written to c (old is the
// document it replaces, nil for an insert) against c's validator, unless
// the command bypasses validation.
func (e *engine) validate(r *request, c *collection, old, doc bson.D) error {
	val := c.validation
	if val == nil || val.off || val.warn || r != nil && boolArg(r, "bypassDocumentValidation", false) {
		return nil
	}
	vars := e.vars()
	if old != nil && val.moderate && !val.filter.Match(old, vars) {
		return nil
	}
	ok, err := val.filter.MatchErr(doc, vars)
	if err != nil {
		return err
	}
	if ok {
		return nil
	}
	id, _ := lookupTop(doc, "_id")
	return &cmdError{Code: mongoerr.CodeDocumentValidationFailure, Msg: "Document failed validation",
		Extra: bson.D{{Key: "errInfo", Value: bson.D{
			{Key: "failingDocumentId", Value: id},
			{Key: "details", Value: bson.D{
				{Key: "operatorName", Value: "$and"},
				{Key: "specifiedAs", Value: val.spec},
				{Key: "reason", Value: "the document does not match the validator (mongotest reports no per-clause details)"},
			}},
		}}}}
}
