package mql

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// ApplyForQuery is Apply for an update statement whose query is known: when
// the update uses the positional "$" operator, the position is the first
// element of the array before "$" that satisfies the query's conditions on
// that array (see PositionalIndex).
func (u *Update) ApplyForQuery(doc bson.D, vars *Vars, insert bool, query bson.D) (bson.D, *UpdateDescription, error) {
	pos := -1
	if u.positional && !insert {
		if prefix := u.positionalPrefix(); prefix != "" {
			p, err := PositionalIndex(query, doc, prefix, vars)
			if err != nil {
				return nil, nil, err
			}
			pos = p
		}
	}
	return u.ApplyPositional(doc, vars, insert, pos)
}

func (u *Update) positionalPrefix() string {
	for _, op := range u.ops {
		for i, p := range op.parts {
			if p == "$" {
				return strings.Join(op.parts[:i], ".")
			}
		}
	}
	return ""
}

// PositionalIndex returns the index the positional "$" operator stands
// for: the first element of the array at arrayPath that satisfies every
// condition of query (top level or inside $and) on arrayPath or below it.
// It returns -1 when the array is absent or no element qualifies.
func PositionalIndex(query bson.D, doc bson.D, arrayPath string, vars *Vars) (int, error) {
	v, ok := Lookup(doc, arrayPath)
	if !ok {
		return -1, nil
	}
	arr, ok := v.(bson.A)
	if !ok {
		return -1, nil
	}
	var conds bson.D
	collectPathConds(normalize(query).(bson.D), arrayPath, &conds)
	if len(conds) == 0 {
		return -1, nil
	}
	f, err := CompileFilter(conds)
	if err != nil {
		return -1, err
	}
	for i, el := range arr {
		// The element is matched as a one-element array so that
		// element conditions, sub-paths and $elemMatch all apply to it.
		if f.Match(bson.D{{Key: "v", Value: bson.A{el}}}, vars) {
			return i, nil
		}
	}
	return -1, nil
}

// collectPathConds gathers the conditions on arrayPath (rewritten to the
// placeholder field "v") from a query and its $and members.
func collectPathConds(q bson.D, arrayPath string, out *bson.D) {
	for _, e := range q {
		switch {
		case e.Key == "$and":
			if arr, ok := e.Value.(bson.A); ok {
				for _, c := range arr {
					if d, ok := c.(bson.D); ok {
						collectPathConds(d, arrayPath, out)
					}
				}
			}
		case e.Key == arrayPath:
			*out = append(*out, bson.E{Key: "v", Value: e.Value})
		case strings.HasPrefix(e.Key, arrayPath+"."):
			*out = append(*out, bson.E{Key: "v." + e.Key[len(arrayPath)+1:], Value: e.Value})
		}
	}
}
