package ferry

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// identityVersion changes only if the canonical encoding below changes.
const identityVersion = 1

// scheme is the partitioning the configuration sets, HashRange when none.
func (c *config) scheme() Partitioning {
	if c.partitioning == "" {
		return HashRange
	}
	return c.partitioning
}

// definition is the canonical description of a stream under partitioning
// scheme: everything that changes which events it sees or how they look.
// It is encoded as BSON (deterministic for an ordered bson.D), so its
// digest is stable across runs and Go versions.
func (c *config) definition(scheme Partitioning) bson.D {
	pipeline := bson.A{}
	for _, st := range c.pipeline {
		pipeline = append(pipeline, st)
	}
	opts := bson.D{
		{Key: "fullDocument", Value: normalizeMode(c.fullDocument, "default")},
		{Key: "fullDocumentBeforeChange", Value: normalizeMode(c.fullDocBefore, "off")},
		{Key: "showExpandedEvents", Value: c.showExpanded},
	}
	if c.noSplit {
		// Splitting large events (the default) is part of the identity only
		// when it is turned off: an event under 16 MB has the same token
		// with or without the stage, so checkpoints written before Ferry
		// split events stay valid, while a fragment's token is only valid
		// under a definition that splits.
		opts = append(opts, bson.E{Key: "splitLargeEvents", Value: false})
	}
	def := bson.D{
		{Key: "v", Value: identityVersion},
		{Key: "name", Value: c.name},
		{Key: "scope", Value: bson.D{{Key: "db", Value: c.scope.DB}, {Key: "coll", Value: c.scope.Coll}}},
		{Key: "pipeline", Value: pipeline},
		{Key: "options", Value: opts},
		{Key: "partitions", Value: c.partitions},
	}
	if c.partitions > 1 && scheme != HashMod {
		// The partitioning is part of the identity only as HashRange, so
		// that a HashMod stream's digest is the one computed before Ferry
		// had partitionings (its checkpoints stay valid); with one
		// partition it changes nothing.
		def = append(def, bson.E{Key: "partitioning", Value: string(HashRange)})
	}
	return def
}

func normalizeMode(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// streamDef is a stream's definition under one partitioning: its identity
// digest and its canonical encoding.
type streamDef struct {
	scheme   Partitioning
	identity string
	raw      bson.Raw
}

// identity returns the stream's identity digest and its canonical encoding
// under partitioning scheme.
func (c *config) identity(scheme Partitioning) (*streamDef, error) {
	raw, err := bson.Marshal(c.definition(scheme))
	if err != nil {
		return nil, fmt.Errorf("ferry: encode stream definition: %w", err)
	}
	sum := sha256.Sum256(raw)
	return &streamDef{scheme: scheme, identity: hex.EncodeToString(sum[:]), raw: raw}, nil
}

// describeChange says which parts of two definitions differ.
func describeChange(old, cur bson.Raw) string {
	if old == nil {
		return "the stored checkpoint does not say what its definition was"
	}
	var parts []string
	for _, key := range []string{"scope", "pipeline", "options", "partitions", "name", "v"} {
		a, errA := old.LookupErr(key)
		b, errB := cur.LookupErr(key)
		if errA != nil || errB != nil || !a.Equal(b) {
			parts = append(parts, fmt.Sprintf("%s was %s, is now %s", key, shortValue(a, errA), shortValue(b, errB)))
		}
	}
	if a, b := partitioningOf(old), partitioningOf(cur); a != "" && b != "" && a != b {
		parts = append(parts, fmt.Sprintf("partitioning was %s, is now %s", a, b))
	}
	if len(parts) == 0 {
		return "the definition encoding differs"
	}
	return strings.Join(parts, "; ")
}

// partitioningOf is the partitioning an encoded definition says: its
// partitioning field, else (written before partitionings, or under
// HashMod) HashMod when it has more than one partition; "" with one
// partition, where none applies.
func partitioningOf(def bson.Raw) Partitioning {
	if s, ok := def.Lookup("partitioning").StringValueOK(); ok {
		return Partitioning(s)
	}
	if n, ok := def.Lookup("partitions").AsInt64OK(); ok && n > 1 {
		return HashMod
	}
	return ""
}

// shortValue is a definition's value as an operator reads it: relaxed
// Extended JSON (2, "orders", [{"$match": ...}], not {"$numberInt": "2"}),
// cut at 200 bytes.
func shortValue(v bson.RawValue, err error) string {
	if err != nil {
		return "(absent)"
	}
	s := v.String()
	if doc, err := bson.MarshalExtJSON(bson.D{{Key: "v", Value: v}}, false, false); err == nil {
		s = strings.TrimSuffix(strings.TrimPrefix(string(doc), `{"v":`), "}")
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
