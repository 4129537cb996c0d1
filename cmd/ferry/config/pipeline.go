package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
	"gopkg.in/yaml.v3"
)

// maxPipelineDepth bounds the nesting of one pipeline stage.
const maxPipelineDepth = 64

// pipeline converts a YAML list of stages into bson.D values, keeping every
// mapping's keys in document order (Go maps would lose it, and MongoDB
// stages such as $sort depend on it). Each stage goes through MongoDB
// Extended JSON (relaxed), so stages may use {$oid: ...}, {$date: ...},
// {$numberLong: ...} and the like. Plain YAML integers become int32 when
// they fit and int64 otherwise; floats become doubles.
func (d *decoder) pipeline(path string, n *yaml.Node) []bson.D {
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		d.add(path, "must be a list of stages, got %s", kindName(n))
		return nil
	}
	var out []bson.D
	for i, st := range n.Content {
		p := fmt.Sprintf("%s[%d]", path, i)
		st = d.deref(p, st)
		if st == nil {
			continue
		}
		if st.Kind != yaml.MappingNode {
			d.add(p, "a stage must be a mapping such as {$match: {...}}, got %s", kindName(st))
			continue
		}
		pairs := d.pairs(p, st, 0)
		if len(pairs) != 1 {
			d.add(p, "a stage must have exactly one key (its operator, such as $match), got %d", len(pairs))
			continue
		}
		if op := pairs[0][0].Value; len(op) < 2 || op[0] != '$' {
			d.add(p, "a stage's key must be an operator such as $match, got %s", quote(op))
			continue
		}
		var buf bytes.Buffer
		before := len(d.problems)
		d.json(p, st, &buf, 0)
		if len(d.problems) > before {
			continue
		}
		var doc bson.D
		if err := bson.UnmarshalExtJSON(buf.Bytes(), false, &doc); err != nil {
			d.add(p, "not a valid stage (Extended JSON): %v", err)
			continue
		}
		out = append(out, doc)
	}
	return out
}

// json writes n as JSON, expanding ${ENV} in scalars.
func (d *decoder) json(path string, n *yaml.Node, w *bytes.Buffer, depth int) {
	n = d.deref(path, n)
	if n == nil {
		return
	}
	if depth > maxPipelineDepth {
		d.add(path, "nested more than %d levels deep", maxPipelineDepth)
		return
	}
	switch n.Kind {
	case yaml.MappingNode:
		w.WriteByte('{')
		for i, kv := range d.pairs(path, n, 0) {
			k := d.deref(path, kv[0])
			if k == nil {
				return
			}
			if k.Kind != yaml.ScalarNode {
				d.add(path, "keys must be strings")
				return
			}
			if i > 0 {
				w.WriteByte(',')
			}
			writeJSONString(w, k.Value)
			w.WriteByte(':')
			d.json(path+"."+k.Value, kv[1], w, depth+1)
		}
		w.WriteByte('}')
	case yaml.SequenceNode:
		w.WriteByte('[')
		for i, e := range n.Content {
			if i > 0 {
				w.WriteByte(',')
			}
			d.json(fmt.Sprintf("%s[%d]", path, i), e, w, depth+1)
		}
		w.WriteByte(']')
	case yaml.ScalarNode:
		d.jsonScalar(path, n, w)
	default:
		d.add(path, "unsupported YAML node")
	}
}

func (d *decoder) jsonScalar(path string, n *yaml.Node, w *bytes.Buffer) {
	s, ok := d.scalar(path, n)
	if !ok {
		return
	}
	tag := n.ShortTag()
	if s != n.Value && n.Style == 0 {
		// An expanded plain scalar is typed by what it expanded to, so
		// `$limit: ${LIMIT}` is a number.
		tag = (&yaml.Node{Kind: yaml.ScalarNode, Value: s}).ShortTag()
	}
	switch tag {
	case "!!null":
		w.WriteString("null")
	case "!!bool":
		var b bool
		if err := (&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: s}).Decode(&b); err != nil {
			d.add(path, "bad boolean")
			return
		}
		w.WriteString(strconv.FormatBool(b))
	case "!!int":
		var v int64
		if err := (&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: s}).Decode(&v); err != nil {
			d.add(path, "integer out of range (use {$numberDecimal: \"...\"} for larger numbers)")
			return
		}
		if v >= math.MinInt32 && v <= math.MaxInt32 {
			w.WriteString(strconv.FormatInt(v, 10))
		} else {
			fmt.Fprintf(w, `{"$numberLong":"%d"}`, v)
		}
	case "!!float":
		var v float64
		if err := (&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!float", Value: s}).Decode(&v); err != nil {
			d.add(path, "bad number")
			return
		}
		switch {
		case math.IsNaN(v):
			w.WriteString(`{"$numberDouble":"NaN"}`)
		case math.IsInf(v, 1):
			w.WriteString(`{"$numberDouble":"Infinity"}`)
		case math.IsInf(v, -1):
			w.WriteString(`{"$numberDouble":"-Infinity"}`)
		default:
			fmt.Fprintf(w, `{"$numberDouble":"%s"}`, strconv.FormatFloat(v, 'g', -1, 64))
		}
	case "!!binary":
		d.add(path, "!!binary values are not supported; use {$binary: {base64: ..., subType: \"00\"}}")
	default: // !!str, !!timestamp (a string: use {$date: ...} for a date)
		writeJSONString(w, s)
	}
}

func writeJSONString(w *bytes.Buffer, s string) {
	b, _ := json.Marshal(s) // a string always marshals
	w.Write(b)
}
