package mql

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry/mongoerr"
)

// UpsertSeed builds the document an upsert starts from: the equality
// conditions of filter ({a: 1}, {a: {$eq: 1}}, single-value $in, members of
// $and and single-clause $or/$nor-free conjunctions), with dotted paths
// turned into nested documents ({"b.c": 2} → {b: {c: 2}}). Two conditions on
// the same path, or on a path and its prefix, fail with 54
// NotSingleValueField like MongoDB. _id, when present, comes first.
func UpsertSeed(filter bson.D) (bson.D, error) {
	var eqs []seedEq
	if err := collectEqualities(normalize(filter).(bson.D), &eqs); err != nil {
		return nil, err
	}
	for i := range eqs {
		for j := 0; j < i; j++ {
			p, q := eqs[i].parts, eqs[j].parts
			n := min(len(p), len(q))
			same := true
			for k := 0; k < n; k++ {
				if p[k] != q[k] {
					same = false
					break
				}
			}
			if !same {
				continue
			}
			if len(p) == len(q) {
				return nil, errf(mongoerr.CodeNotSingleValueField, "cannot infer query fields to set, path '%s' is matched twice", eqs[i].path)
			}
			return nil, errf(mongoerr.CodeNotSingleValueField, "cannot infer query fields to set, both paths '%s' and '%s' are matched", eqs[i].path, eqs[j].path)
		}
	}
	a := &applier{root: bson.D{}}
	for _, e := range eqs {
		n := a.nav(e.parts)
		if err := a.create(e.parts, n, cloneValue(e.value)); err != nil {
			return nil, err
		}
	}
	return moveIDFirst(a.root.(bson.D)), nil
}

type seedEq struct {
	path  string
	parts []string
	value any
}

func collectEqualities(filter bson.D, out *[]seedEq) error {
	for _, e := range filter {
		switch e.Key {
		case "$and":
			arr, _ := e.Value.(bson.A)
			for _, c := range arr {
				if d, ok := c.(bson.D); ok {
					if err := collectEqualities(d, out); err != nil {
						return err
					}
				}
			}
			continue
		case "$or":
			arr, _ := e.Value.(bson.A)
			if len(arr) == 1 {
				if d, ok := arr[0].(bson.D); ok {
					if err := collectEqualities(d, out); err != nil {
						return err
					}
				}
			}
			continue
		}
		if strings.HasPrefix(e.Key, "$") {
			continue
		}
		v, ok := equalityValue(e.Value)
		if !ok {
			continue
		}
		*out = append(*out, seedEq{path: e.Key, parts: strings.Split(e.Key, "."), value: v})
	}
	return nil
}

// equalityValue extracts the value of an equality condition.
func equalityValue(v any) (any, bool) {
	switch t := v.(type) {
	case bson.Regex:
		return nil, false
	case bson.D:
		if len(t) == 0 || !strings.HasPrefix(t[0].Key, "$") {
			return t, true
		}
		if _, isRef := getField(t, "$ref"); isRef {
			return t, true
		}
		for _, op := range t {
			switch op.Key {
			case "$eq":
				if _, isRe := op.Value.(bson.Regex); !isRe {
					return op.Value, true
				}
			case "$in":
				if arr, ok := op.Value.(bson.A); ok && len(arr) == 1 {
					if _, isRe := arr[0].(bson.Regex); !isRe {
						return arr[0], true
					}
				}
			}
		}
		return nil, false
	}
	return v, true
}
