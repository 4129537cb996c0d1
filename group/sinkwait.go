package group

import (
	"context"
	"errors"
	"maps"
	"regexp"
	"slices"
	"time"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/lease"
)

// A member publishes which of its partitions wait for their sink in its
// member document's status (lease.Member.SetStatus), so that every member
// and tool reading the state store (ferry status, /status) sees a sink
// outage, not only the member's own metrics and logs:
//
//	{waitingForSink: [{partition: 0, error: "webhook: ... 503 ..."}, ...]}
//
// Only waiting partitions are listed; a member none of whose partitions
// waits publishes no status (null). It is written on the change — the
// session writes it once a consumer reports its sink down or up again —
// and a write that failed is retried at the session's next tick (the
// rebalance interval). The status is part of the member document, so a
// member that leaves, or dies and expires, reports nothing.
const fWaitingForSink = "waitingForSink"

// eventIDs matches an event id (ferry.EventID: 64 lowercase hex digits)
// standing alone.
var eventIDs = regexp.MustCompile(`\b[0-9a-f]{64}\b`)

// maxSinkProblem bounds a published delivery error, in bytes.
const maxSinkProblem = 300

// SinkProblem renders a delivery error as Status.SinkErrors and the
// member's published status carry it: resume tokens shortened
// (ferry.RedactTokens), event ids (64 hex digits) shortened to their first
// 16 as ferry dlq list shows them, and at most 300 bytes. Sinks name no credential in
// their errors (the webhook sink's name the URL without user info or
// query, and quote at most 200 bytes of the receiver's answer).
func SinkProblem(err error) string {
	if err == nil {
		return ""
	}
	s := eventIDs.ReplaceAllStringFunc(ferry.RedactTokens(err.Error()), func(id string) string { return id[:16] + "…" })
	if len(s) <= maxSinkProblem {
		return s
	}
	cut := maxSinkProblem
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// waitsStatus is the member status publishing waits (nil when empty).
func waitsStatus(waits map[int]string) bson.D {
	if len(waits) == 0 {
		return nil
	}
	list := bson.A{}
	for _, p := range slices.Sorted(maps.Keys(waits)) {
		list = append(list, bson.D{{Key: "partition", Value: p}, {Key: "error", Value: waits[p]}})
	}
	return bson.D{{Key: fWaitingForSink, Value: list}}
}

// WaitingPartitions returns the partitions member m reports waiting for
// their sink (its MemberInfo.Status, as a group member publishes it),
// each with the delivery error that made it wait; nil when none.
func WaitingPartitions(m lease.MemberInfo) map[int]string {
	var doc struct {
		Waiting []struct {
			Partition int    `bson:"partition"`
			Error     string `bson:"error"`
		} `bson:"waitingForSink"`
	}
	if m.Status == nil {
		return nil
	}
	raw, err := bson.Marshal(m.Status)
	if err != nil || bson.Unmarshal(raw, &doc) != nil || len(doc.Waiting) == 0 {
		return nil
	}
	out := make(map[int]string, len(doc.Waiting))
	for _, w := range doc.Waiting {
		out[w.Partition] = w.Error
	}
	return out
}

// published is what this membership last wrote as its status.
type published struct {
	waits  map[int]string
	failed bool // the last write failed (and was logged)
}

// publishWaits writes the member's waiting partitions to its member
// document when they differ from what was last written. A failed write
// is logged once and retried at the next call.
func (g *Group) publishWaits(ctx context.Context, member *lease.Member, pub *published) {
	want := g.st.get().SinkErrors
	if maps.Equal(want, pub.waits) || ctx.Err() != nil {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := member.SetStatus(wctx, waitsStatus(want)); err != nil {
		if !pub.failed && !errors.Is(err, lease.ErrLost) && ctx.Err() == nil {
			g.log.Warn("cannot publish the partitions waiting for the sink in the state store; retrying", "err", err)
		}
		pub.failed = true
		return
	}
	pub.waits, pub.failed = want, false
}
