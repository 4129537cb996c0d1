package lease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Member documents, one per (group, member id):
//
//	{_id: {group, member}, group, member, incarnation, instance, beats,
//	 meta, status, joinedAt: date, heartbeatAt: date, expiresAt: date}
//
// incarnation is one Join's; instance is the Store's (one per process,
// so a process that rejoins after losing its membership is recognised);
// beats counts the incarnation's heartbeats, so that another process can
// tell a live registration (beats grows) from a dead one whatever the
// server's clock does. meta is fixed at Join; status (null until the
// first SetStatus) is what the member reports about itself as it runs.
// Both live and die with the document: a member that leaves or expires
// reports nothing.
//
// expiresAt = heartbeatAt + the member's timeout, both from $$NOW, so a
// member is live while expiresAt >= $$NOW by the server's clock, whatever
// timeout the reader is configured with.
const (
	fMember      = "member"
	fIncarnation = "incarnation"
	fInstance    = "instance"
	fBeats       = "beats"
	fMeta        = "meta"
	fStatus      = "status"
	fJoinedAt    = "joinedAt"
	fHeartbeatAt = "heartbeatAt"
)

// MemberInfo is a live member as stored. Times are the server's clock.
type MemberInfo struct {
	Group       string
	ID          string
	Meta        bson.D // as given to Join (nil when none)
	Status      bson.D // as last given to SetStatus (nil when none)
	JoinedAt    time.Time
	HeartbeatAt time.Time
	ExpiresAt   time.Time // HeartbeatAt + the member's timeout
}

type memberDoc struct {
	Group       string        `bson:"group"`
	Member      string        `bson:"member"`
	Incarnation string        `bson:"incarnation"`
	Instance    string        `bson:"instance"`
	Beats       int64         `bson:"beats"`
	Meta        bson.D        `bson:"meta"`
	Status      bson.D        `bson:"status"`
	JoinedAt    bson.DateTime `bson:"joinedAt"`
	HeartbeatAt bson.DateTime `bson:"heartbeatAt"`
	ExpiresAt   bson.DateTime `bson:"expiresAt"`
}

func memberKey(group, id string) bson.D {
	return bson.D{{Key: "_id", Value: bson.D{{Key: fGroup, Value: group}, {Key: fMember, Value: id}}}}
}

// Member is this process's membership of a group, kept alive by a
// background heartbeat until Leave. It is lost (Done closed, Err matching
// ErrLost) when the server no longer counts it live — it missed its
// timeout, and another process may then have joined with the same id —
// or when no heartbeat succeeded for a whole timeout by the local
// monotonic clock. A lost member stays lost: join again for a new
// membership.
type Member struct {
	s           *Store
	group, id   string
	incarnation string
	k           keeper
	leaveOnce   sync.Once
	leaveErr    error
}

// Join registers memberID in group and heartbeats it in the background
// every HeartbeatInterval. meta (optional) is stored with the member for
// others to read; its field names must not be empty, start with '$' or
// contain '.' or NUL. Join also deletes the group's members that are no
// longer live. Leave must be called to end the goroutine.
//
// A member id belongs to one live process at a time. If another process
// (another Store) holds a live registration of the id, Join does not take
// it: it watches that registration, by the server's clock and its
// heartbeat count, until either
//
//   - it heartbeats (or yet another process registers the id): the id is
//     in use, and Join fails with a *DuplicateMemberError (ErrDuplicateMember),
//     leaving the other process undisturbed. This takes about one of its
//     heartbeat intervals;
//   - it expires without a heartbeat: its process is gone (a crash, a
//     kill), and Join takes the id over. A process restarted under the id
//     of one that crashed therefore joins at most one member timeout
//     after the crashed one's last heartbeat.
//
// A registration of the id by this Store (a membership of this process
// that was lost, e.g. after a pause) is taken over at once: this
// incarnation replaces it, and the old Member's next heartbeat finds it
// lost.
func (s *Store) Join(ctx context.Context, group, memberID string, meta bson.D) (*Member, error) {
	if err := validName("group", group); err != nil {
		return nil, err
	}
	if err := validName("memberID", memberID); err != nil {
		return nil, err
	}
	if err := validMeta("meta", meta); err != nil {
		return nil, err
	}
	m := &Member{s: s, group: group, id: memberID, incarnation: randomHex(8)}
	timeout := s.cfg.memberTimeout
	update := mongo.Pipeline{{{Key: "$set", Value: bson.D{
		{Key: fGroup, Value: lit(group)},
		{Key: fMember, Value: lit(memberID)},
		{Key: fIncarnation, Value: m.incarnation},
		{Key: fInstance, Value: s.instance},
		{Key: fBeats, Value: int64(0)},
		{Key: fMeta, Value: lit(meta)},
		{Key: fStatus, Value: lit(nil)}, // a new incarnation reports nothing yet
		{Key: fJoinedAt, Value: "$$NOW"},
		{Key: fHeartbeatAt, Value: "$$NOW"},
		{Key: fExpiresAt, Value: nowPlus(timeout)},
	}}}}
	// Only a registration that is absent, expired or this Store's own is
	// taken; another live one makes the upsert's insert collide on _id.
	filter := append(memberKey(group, memberID), bson.E{Key: "$expr", Value: op("$or",
		op("$lt", "$expiresAt", "$$NOW"),
		op("$eq", op("$ifNull", "$"+fInstance, nil), lit(s.instance)))})
	var first *memberDoc // the other process's registration, as first seen
	waitStart := s.cfg.clock.Now()
	var sent time.Time
	for {
		sent = s.cfg.clock.Now()
		_, err := s.members.UpdateOne(ctx, filter, update, options.UpdateOne().SetUpsert(true))
		if err == nil {
			break
		}
		if !mongo.IsDuplicateKeyError(err) {
			return nil, wrapf(err, "join group %q as %q", group, memberID)
		}
		var cur memberDoc
		err = s.members.FindOne(ctx, memberKey(group, memberID)).Decode(&cur)
		switch {
		case errors.Is(err, mongo.ErrNoDocuments):
			continue // it left meanwhile: register
		case err != nil:
			return nil, wrapf(err, "join group %q as %q: read the registration of the id", group, memberID)
		case first == nil:
			first = &cur
			s.log().Info("lease: another process registered this member id; waiting to see whether it is alive (it heartbeats) "+
				"or gone (its registration expires)", "group", group, "member", memberID,
				"its_last_heartbeat", dateOf(cur.HeartbeatAt).Format(time.RFC3339Nano),
				"expires", dateOf(cur.ExpiresAt).Format(time.RFC3339Nano))
		case cur.Incarnation != first.Incarnation || cur.Beats != first.Beats || cur.HeartbeatAt != first.HeartbeatAt:
			// It heartbeat (beats counts even when the server's clock
			// stands still; heartbeatAt moves for any version's
			// heartbeat), or another process registered the id.
			return nil, &DuplicateMemberError{Group: group, Member: memberID, JoinedAt: dateOf(cur.JoinedAt),
				HeartbeatAt: dateOf(cur.HeartbeatAt), Waited: s.cfg.clock.Now().Sub(waitStart)}
		}
		// Poll a few times per timeout of the other registration.
		poll := min(max(dateOf(first.ExpiresAt).Sub(dateOf(first.HeartbeatAt))/10, 10*time.Millisecond), time.Second)
		select {
		case <-ctx.Done():
			return nil, wrapf(ctx.Err(), "join group %q as %q: waiting for another process's registration of the id", group, memberID)
		case <-s.cfg.clock.After(poll):
		}
	}
	if first != nil {
		s.log().Info("lease: the other registration of this member id expired without a heartbeat (its process is gone); "+
			"joined in its place", "group", group, "member", memberID, "waited", s.cfg.clock.Now().Sub(waitStart).Round(time.Millisecond).String())
	}
	reap := bson.D{{Key: fGroup, Value: group}, {Key: "$expr", Value: op("$lt", "$expiresAt", "$$NOW")}}
	if _, err := s.members.DeleteMany(ctx, reap); err != nil {
		s.log().Warn("lease: deleting dead members failed", "group", group, "err", err)
	}
	m.k = keeper{
		clock:    s.cfg.clock,
		validity: timeout,
		interval: s.cfg.heartbeatInterval,
		retry:    max(s.cfg.heartbeatInterval/4, time.Millisecond),
		renew:    m.heartbeat,
		describe: fmt.Sprintf("member %q of group %q", memberID, group),
		failed: func(err error) {
			s.log().Warn("lease: heartbeat failed", "group", group, "member", memberID, "err", err)
		},
	}
	m.k.start(ctx, sent)
	return m, nil
}

func (m *Member) heartbeat(ctx context.Context) error {
	filter := append(memberKey(m.group, m.id),
		bson.E{Key: fIncarnation, Value: m.incarnation},
		bson.E{Key: "$expr", Value: op("$gte", "$expiresAt", "$$NOW")})
	update := mongo.Pipeline{{{Key: "$set", Value: bson.D{
		{Key: fHeartbeatAt, Value: "$$NOW"},
		{Key: fExpiresAt, Value: nowPlus(m.s.cfg.memberTimeout)},
		// A field damaged by hand is put right (its value is lost): the
		// others read it as absent meanwhile (Members).
		{Key: fGroup, Value: lit(m.group)},
		{Key: fMember, Value: lit(m.id)},
		{Key: fJoinedAt, Value: ifType("$"+fJoinedAt, bson.A{"date"}, "$$NOW")},
		{Key: fMeta, Value: ifType("$"+fMeta, bson.A{"object", "null", "missing"}, lit(nil))},
		{Key: fStatus, Value: ifType("$"+fStatus, bson.A{"object", "null", "missing"}, lit(nil))},
		{Key: fBeats, Value: op("$add", ifType("$"+fBeats, bson.A{"long", "int"}, int64(0)), int64(1))},
	}}}}
	res, err := m.s.members.UpdateOne(ctx, filter, update)
	if err != nil {
		return wrapf(err, "heartbeat of member %q of group %q", m.id, m.group)
	}
	if res.MatchedCount == 1 {
		return nil
	}
	what := "it was removed"
	var d memberDoc
	raw, err := m.s.members.FindOne(ctx, memberKey(m.group, m.id)).Raw()
	if err == nil {
		var ce *CorruptError
		if d, ce = m.s.decodeMember(raw); ce != nil && !ce.Usable {
			err = ce
		}
	}
	switch {
	case err == nil && d.Incarnation != m.incarnation:
		what = "another process joined with the same id"
	case err == nil:
		what = "it expired on the server at " + dateOf(d.ExpiresAt).Format(time.RFC3339Nano)
	case !errors.Is(err, mongo.ErrNoDocuments):
		what = "its current state could not be read: " + err.Error()
	}
	return fmt.Errorf("%w: member %q of group %q: %s", ErrLost, m.id, m.group, what)
}

// MaxStatusSize bounds the BSON size of a member's status (SetStatus).
const MaxStatusSize = 16 << 10

// SetStatus replaces what the member reports about itself — for example
// which of its partitions wait for their sink — for the group's other
// members and tools to read (MemberInfo.Status). It writes at once (one
// update of the member document, by this incarnation only, while it is
// live); the caller decides when the status changed. The status is part
// of the member document, so it disappears when the member leaves or
// expires: a dead member's status never lingers. Field names are checked
// as Join's meta; its BSON size must not exceed MaxStatusSize; nil clears
// it. It returns an error matching ErrLost when this incarnation is no
// longer registered or live.
func (m *Member) SetStatus(ctx context.Context, status bson.D) error {
	if err := validMeta("status", status); err != nil {
		return err
	}
	if status != nil {
		b, err := bson.Marshal(status)
		if err != nil {
			return invalid("status: %v", err)
		}
		if len(b) > MaxStatusSize {
			return invalid("status: %d bytes of BSON, more than MaxStatusSize (%d): report a summary, not data", len(b), MaxStatusSize)
		}
	}
	filter := append(memberKey(m.group, m.id),
		bson.E{Key: fIncarnation, Value: m.incarnation},
		bson.E{Key: "$expr", Value: op("$gte", "$expiresAt", "$$NOW")})
	update := mongo.Pipeline{{{Key: "$set", Value: bson.D{{Key: fStatus, Value: lit(status)}}}}}
	res, err := m.s.members.UpdateOne(ctx, filter, update)
	if err != nil {
		return wrapf(err, "set the status of member %q of group %q", m.id, m.group)
	}
	if res.MatchedCount != 1 {
		return fmt.Errorf("%w: member %q of group %q: set status: this incarnation is no longer registered and live", ErrLost, m.id, m.group)
	}
	return nil
}

// ID is the member's id.
func (m *Member) ID() string { return m.id }

// Group is the member's group.
func (m *Member) Group() string { return m.group }

// Done is closed when the membership is lost or left.
func (m *Member) Done() <-chan struct{} { return m.k.done }

// Err is nil while the member is live, then an error matching ErrLost, or
// ErrReleased after Leave.
func (m *Member) Err() error { return m.k.errValue() }

// Leave stops the heartbeat, waits for its goroutine to end and deregisters
// the member (if this incarnation is still registered). Later calls return
// the first call's result.
func (m *Member) Leave(ctx context.Context) error {
	m.leaveOnce.Do(func() {
		m.k.close(ErrReleased)
		filter := append(memberKey(m.group, m.id), bson.E{Key: fIncarnation, Value: m.incarnation})
		if _, err := m.s.members.DeleteOne(ctx, filter); err != nil {
			m.leaveErr = wrapf(err, "leave group %q as %q", m.group, m.id)
		}
	})
	return m.leaveErr
}

// Members returns the live members of a group, ordered by id: those whose
// expiresAt (last heartbeat + timeout) is not before the server's $$NOW.
//
// A member document with a field of the wrong type (edited by hand or
// damaged) does not hide the others: Members returns every live member
// whose id reads, the fields that do not read taken as absent, and a
// CorruptRecords error naming each corrupt document. The member puts its
// own document right at its next heartbeat.
func (s *Store) Members(ctx context.Context, group string) ([]MemberInfo, error) {
	if err := validName("group", group); err != nil {
		return nil, err
	}
	filter := bson.D{{Key: fGroup, Value: group}, {Key: "$expr", Value: op("$gte", "$expiresAt", "$$NOW")}}
	cur, err := s.members.Find(ctx, filter, options.Find().SetSort(bson.D{{Key: fMember, Value: 1}}))
	if err != nil {
		return nil, wrapf(err, "members of group %q", group)
	}
	defer cur.Close(context.WithoutCancel(ctx))
	out := []MemberInfo{}
	var bad CorruptRecords
	for cur.Next(ctx) {
		d, ce := s.decodeMember(cur.Current)
		if ce != nil {
			bad = append(bad, ce)
			if !ce.Usable {
				continue
			}
		}
		out = append(out, MemberInfo{
			Group: group, ID: d.Member, Meta: d.Meta, Status: d.Status,
			JoinedAt: dateOf(d.JoinedAt), HeartbeatAt: dateOf(d.HeartbeatAt), ExpiresAt: dateOf(d.ExpiresAt),
		})
	}
	if err := cur.Err(); err != nil {
		return nil, wrapf(err, "members of group %q", group)
	}
	if len(bad) > 0 {
		return out, bad
	}
	return out, nil
}

// ifType is the expression: v when its BSON type is one of types, else
// the expression otherwise.
func ifType(v string, types bson.A, otherwise any) bson.D {
	return op("$cond", op("$in", op("$type", v), types), v, otherwise)
}

// validMeta checks the field names of a member's metadata, recursively
// through documents and arrays, so that every server stores it as given.
func validMeta(path string, v any) error {
	switch v := v.(type) {
	case bson.D:
		for _, e := range v {
			if e.Key == "" || strings.HasPrefix(e.Key, "$") || strings.ContainsAny(e.Key, ".\x00") {
				return invalid("%s: field name %q must not be empty, start with '$' or contain '.' or NUL", path, e.Key)
			}
			if err := validMeta(path+"."+e.Key, e.Value); err != nil {
				return err
			}
		}
	case bson.A:
		for i, x := range v {
			if err := validMeta(fmt.Sprintf("%s.%d", path, i), x); err != nil {
				return err
			}
		}
	}
	return nil
}
