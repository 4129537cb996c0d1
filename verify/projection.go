package verify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/mongoerr"
	"github.com/ferry-io/ferry/sink/mongoproj"
)

// ProjectionReport compares a source collection with its projection (the
// mongodb sink's target), document by document, by the key the sink gives
// each: its _id, or on a collection sharded on other fields its whole
// documentKey (see package mongoproj, "Keys").
type ProjectionReport struct {
	Source, Target int // documents compared: source documents, live target documents
	Missing        int // in the source, not (or only as a tombstone) in the projection
	Extra          int // live in the projection, not in the source
	Stale          int // in both, with other field values
	// Examples lists up to ListExamples documents of each kind, each by
	// its target _id: the source _id, or the whole documentKey ({region:
	// "eu", _id: 7}) on a collection sharded on other fields, where two
	// documents can share an _id.
	MissingIDs, ExtraIDs, StaleIDs []bson.RawValue
}

// String is the summary line: projection: missing=M extra=E stale=S.
func (r ProjectionReport) String() string {
	return fmt.Sprintf("projection: source=%d target=%d missing=%d extra=%d stale=%d", r.Source, r.Target, r.Missing, r.Extra, r.Stale)
}

// Clean reports whether the projection equals the source.
func (r ProjectionReport) Clean() bool { return r.Missing == 0 && r.Extra == 0 && r.Stale == 0 }

// Projection diffs the source collection and the projection: every source
// document must be live in the projection with the same fields (the
// projection's bookkeeping field, mongoproj.Field, aside; field order does
// not matter), and the projection must hold no live document the source
// lacks. A source document is found in the projection by the key the sink
// gives it: on a collection sharded on other fields than _id (its shard
// key read from config.collections through the mongos), its documentKey,
// so two documents with one _id on two shards are two documents; the
// projection's _id is then that documentKey, which the comparison of
// fields leaves aside. Documents changed while the diff runs can show as
// stale: run it when the stream has no pending events, or read stale as
// "not applied yet". It lists up to examples of each kind.
func Projection(ctx context.Context, source, target *mongo.Collection, examples int) (ProjectionReport, error) {
	var r ProjectionReport
	ns := ferry.Namespace{DB: source.Database().Name(), Coll: source.Name()}
	shardKey, err := ferry.ShardKeyOf(ctx, source.Database().Client(), ns)
	if err != nil {
		var se mongo.ServerError
		if !errors.As(err, &se) || !se.HasErrorCode(int(mongoerr.CodeUnauthorized)) {
			return r, fmt.Errorf("verify: %w", err)
		}
		shardKey = nil // a replica set's user need not read config: documents are keyed by _id
	}
	live := map[string]bson.Raw{}
	cur, err := target.Find(ctx, mongoproj.Live())
	if err != nil {
		return r, fmt.Errorf("verify: read the projection %s: %w", target.Name(), err)
	}
	for cur.Next(ctx) {
		doc := stripField(cur.Current, mongoproj.Field)
		live[idKey(doc.Lookup("_id"))] = doc
	}
	if err := cur.Err(); err != nil {
		return r, fmt.Errorf("verify: read the projection %s: %w", target.Name(), err)
	}
	r.Target = len(live)
	cur, err = source.Find(ctx, bson.D{})
	if err != nil {
		return r, fmt.Errorf("verify: read the source %s: %w", source.Name(), err)
	}
	seen := map[string]bool{}
	for cur.Next(ctx) {
		r.Source++
		doc := append(bson.Raw(nil), cur.Current...)
		id := doc.Lookup("_id")
		if shardKey != nil {
			key, err := ferry.DocumentKeyOf(doc, shardKey)
			if err != nil {
				return r, fmt.Errorf("verify: the documentKey of a document of %s: %w", ns, err)
			}
			if id, _, err = mongoproj.TargetID(key); err != nil {
				return r, fmt.Errorf("verify: the documentKey of a document of %s: %w", ns, err)
			}
		}
		k := idKey(id)
		seen[k] = true
		got, ok := live[k]
		switch {
		case !ok:
			r.Missing++
			if len(r.MissingIDs) < examples {
				r.MissingIDs = append(r.MissingIDs, id)
			}
		case !sameFields(doc, got):
			r.Stale++
			if len(r.StaleIDs) < examples {
				r.StaleIDs = append(r.StaleIDs, id)
			}
		}
	}
	if err := cur.Err(); err != nil {
		return r, fmt.Errorf("verify: read the source %s: %w", source.Name(), err)
	}
	var extra []string
	for k := range live {
		if !seen[k] {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	r.Extra = len(extra)
	for _, k := range extra {
		if len(r.ExtraIDs) >= examples {
			break
		}
		r.ExtraIDs = append(r.ExtraIDs, live[k].Lookup("_id"))
	}
	return r, nil
}

// idKey is an _id as a map key (its type and bytes).
func idKey(v bson.RawValue) string {
	return string(rune(v.Type)) + string(v.Value)
}

func stripField(doc bson.Raw, field string) bson.Raw {
	var d bson.D
	elems, _ := doc.Elements()
	for _, e := range elems {
		if e.Key() != field {
			d = append(d, bson.E{Key: e.Key(), Value: e.Value()})
		}
	}
	out, _ := bson.Marshal(d)
	return out
}

// sameFields compares two documents' top-level fields but _id (the
// documents were matched by it, or by the documentKey that holds it)
// regardless of their order; values compare byte for byte.
func sameFields(a, b bson.Raw) bool {
	ea, errA := a.Elements()
	eb, errB := b.Elements()
	if errA != nil || errB != nil || len(ea) != len(eb) {
		return false
	}
	m := make(map[string]bson.RawValue, len(ea))
	for _, e := range ea {
		m[e.Key()] = e.Value()
	}
	for _, e := range eb {
		if e.Key() == "_id" {
			if _, ok := m["_id"]; !ok {
				return false
			}
			continue
		}
		v, ok := m[e.Key()]
		if !ok || v.Type != e.Value().Type || !bytes.Equal(v.Value, e.Value().Value) {
			return false
		}
	}
	return true
}
