package lease

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// ErrCorrupt is matched by the errors about a stored lease or member
// document that cannot be read as the layout says (a field of the wrong
// type, edited by hand or damaged): a *CorruptError, or CorruptRecords.
var ErrCorrupt = errors.New("lease: corrupt record")

// CorruptError is one lease or member document that cannot be read as
// stored. It names the document by collection and _id and says which
// fields are wrong, never quoting their values.
type CorruptError struct {
	// Record is where the document is: the collection and the _id, as in
	// ferry.leases _id "orders/0" or ferry.members _id {group: "orders",
	// member: "m1"}.
	Record string
	// Collection is the collection's name (without the database).
	Collection string
	Group      string
	// Partition is a lease's partition, -1 for a member document.
	Partition int
	// Member is a member document's member id ("" for a lease, or when the
	// id itself cannot be read).
	Member string
	// Fields are the fields that cannot be read, and Problem says what is
	// wrong with each ("field epoch has BSON type string").
	Fields  []string
	Problem string
	// Usable reports whether the record can still be used: a lease whose
	// owner, epoch and expiry read (only a field shown for information is
	// wrong), or a member whose id reads (its other fields are then taken
	// as absent). A lease that is not usable blocks its partition until it
	// is repaired (Store.Repair).
	Usable bool
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("%v %s: %s", ErrCorrupt, e.Record, e.Problem)
}

// Unwrap makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// CorruptRecords is the error List and Members return beside what they
// could read when some documents of the group are corrupt: every usable
// lease or member is still returned, and the error lists each corrupt
// document. It matches ErrCorrupt.
type CorruptRecords []*CorruptError

func (c CorruptRecords) Error() string {
	parts := make([]string, len(c))
	for i, e := range c {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "; ")
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (c CorruptRecords) Is(target error) bool { return target == ErrCorrupt }

// AsCorruptRecords returns the corrupt documents err reports (a
// CorruptRecords or a *CorruptError), and whether it reports only those:
// a caller may then go on with the usable records it was given.
func AsCorruptRecords(err error) (CorruptRecords, bool) {
	var cr CorruptRecords
	if errors.As(err, &cr) {
		return cr, true
	}
	var ce *CorruptError
	if errors.As(err, &ce) {
		return CorruptRecords{ce}, true
	}
	return nil, false
}

// fields reads the fields of one stored document, collecting every one of
// the wrong type.
type fields struct {
	raw     bson.Raw
	bad     []string
	problem []string
}

func (f *fields) wrong(key string, v bson.RawValue) {
	f.bad = append(f.bad, key)
	f.problem = append(f.problem, fmt.Sprintf("field %s has BSON type %v", key, v.Type))
}

func (f *fields) has(key string) (bson.RawValue, bool) {
	v, err := f.raw.LookupErr(key)
	return v, err == nil
}

// str reads a string; absent is "" (ok).
func (f *fields) str(key string) string {
	v, ok := f.has(key)
	if !ok {
		return ""
	}
	s, ok := v.StringValueOK()
	if !ok {
		f.wrong(key, v)
	}
	return s
}

// nullableStr reads a string that may be null or absent.
func (f *fields) nullableStr(key string) string {
	if v, ok := f.has(key); ok && v.Type == bson.TypeNull {
		return ""
	}
	return f.str(key)
}

// integer reads an integer (int32, int64, or a double holding an
// integer); absent is 0.
func (f *fields) integer(key string) int64 {
	v, ok := f.has(key)
	if !ok {
		return 0
	}
	switch v.Type {
	case bson.TypeInt32:
		return int64(v.Int32())
	case bson.TypeInt64:
		return v.Int64()
	case bson.TypeDouble:
		if d := v.Double(); d == math.Trunc(d) && math.Abs(d) < 1<<53 {
			return int64(d)
		}
	}
	f.wrong(key, v)
	return 0
}

// date reads a date; absent (or null) is 0.
func (f *fields) date(key string) bson.DateTime {
	v, ok := f.has(key)
	if !ok || v.Type == bson.TypeNull {
		return 0
	}
	d, ok := v.DateTimeOK()
	if !ok {
		f.wrong(key, v)
	}
	return bson.DateTime(d)
}

// doc reads an embedded document that may be null or absent.
func (f *fields) doc(key string) bson.D {
	v, ok := f.has(key)
	if !ok || v.Type == bson.TypeNull {
		return nil
	}
	if v.Type == bson.TypeEmbeddedDocument {
		var d bson.D
		if err := bson.Unmarshal(v.Document(), &d); err == nil {
			return d
		}
	}
	f.wrong(key, v)
	return nil
}

func (f *fields) boolean(key string) bool {
	v, ok := f.has(key)
	if !ok {
		return false
	}
	b, ok := v.BooleanOK()
	if !ok {
		f.wrong(key, v)
	}
	return b
}

func (f *fields) wrongAny(keys ...string) bool {
	for _, k := range keys {
		for _, b := range f.bad {
			if b == k {
				return true
			}
		}
	}
	return false
}

// recordName is how messages name a document of coll: the collection and
// the _id.
func recordName(coll *mongo.Collection, id bson.RawValue) string {
	return fmt.Sprintf("%s.%s _id %s", coll.Database().Name(), coll.Name(), idText(id))
}

// idText renders an _id: a string quoted, a {group, member} key as
// {group: "g", member: "m"}, anything else by its type.
func idText(id bson.RawValue) string {
	if s, ok := id.StringValueOK(); ok {
		return strconv.Quote(s)
	}
	if d, ok := id.DocumentOK(); ok {
		elems, err := d.Elements()
		if err == nil {
			parts := make([]string, 0, len(elems))
			for _, e := range elems {
				text := "<" + e.Value().Type.String() + ">"
				if s, ok := e.Value().StringValueOK(); ok {
					text = strconv.Quote(s)
				}
				parts = append(parts, e.Key()+": "+text)
			}
			return "{" + strings.Join(parts, ", ") + "}"
		}
	}
	return "<" + id.Type.String() + ">"
}

// decodeLease reads a stored lease document. A field of the wrong type
// makes a *CorruptError; the lease is still returned when it is Usable
// (owner, epoch and expiresAt read): its group and partition then come
// from its _id where their own fields do not read.
func (s *Store) decodeLease(raw bson.Raw) (Lease, *CorruptError) {
	f := fields{raw: raw}
	id, _ := raw.LookupErr("_id")
	l := Lease{
		Group:     f.str(fGroup),
		Partition: int(f.integer(fPartition)),
		Owner:     f.nullableStr(fOwner),
		Epoch:     f.integer(fEpoch),
		ExpiresAt: dateOf(f.date(fExpiresAt)),
	}
	l.AcquiredAt = dateOf(f.date(fAcquiredAt))
	l.Expired = f.boolean(fExpired)
	if l.Epoch < 0 {
		f.bad = append(f.bad, fEpoch)
		f.problem = append(f.problem, "field epoch is negative")
	}
	if len(f.bad) == 0 {
		return l, nil
	}
	if idStr, ok := id.StringValueOK(); ok {
		if i := strings.LastIndexByte(idStr, '/'); i > 0 {
			if f.wrongAny(fGroup) {
				l.Group = idStr[:i]
			}
			if p, err := strconv.Atoi(idStr[i+1:]); err == nil && f.wrongAny(fPartition) {
				l.Partition = p
			}
		}
	}
	ce := &CorruptError{Record: recordName(s.leases, id), Collection: s.leases.Name(), Group: l.Group, Partition: l.Partition,
		Fields: f.bad, Problem: strings.Join(f.problem, "; "), Usable: !f.wrongAny(fOwner, fEpoch, fExpiresAt)}
	return l, ce
}

// decodeMember reads a stored member document. A field of the wrong type
// makes a *CorruptError; the member is still returned when its id reads
// (Usable), with the fields that do not read taken as absent.
func (s *Store) decodeMember(raw bson.Raw) (memberDoc, *CorruptError) {
	f := fields{raw: raw}
	id, _ := raw.LookupErr("_id")
	d := memberDoc{
		Group:       f.str(fGroup),
		Member:      f.str(fMember),
		Incarnation: f.str(fIncarnation),
		Meta:        f.doc(fMeta),
		Status:      f.doc(fStatus),
		JoinedAt:    f.date(fJoinedAt),
		HeartbeatAt: f.date(fHeartbeatAt),
		ExpiresAt:   f.date(fExpiresAt),
	}
	if len(f.bad) == 0 {
		return d, nil
	}
	// The _id ({group, member}) names the member when its own fields do
	// not: the member's heartbeats address it by _id, so it is live.
	if key, ok := id.DocumentOK(); ok {
		if g, ok := key.Lookup(fGroup).StringValueOK(); ok && f.wrongAny(fGroup) {
			d.Group = g
		}
		if m, ok := key.Lookup(fMember).StringValueOK(); ok && f.wrongAny(fMember) {
			d.Member = m
		}
	}
	return d, &CorruptError{Record: recordName(s.members, id), Collection: s.members.Name(), Group: d.Group, Partition: -1,
		Member: d.Member, Fields: f.bad, Problem: strings.Join(f.problem, "; "), Usable: d.Member != ""}
}
