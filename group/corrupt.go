package group

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry/checkpoint/mongostore"
	"github.com/ferry-io/ferry/lease"
)

// Corrupt records of the group's state. A lease or member document edited
// by hand or damaged (a field of the wrong type) must neither stall the
// group nor hide the others:
//
//   - a member document is read with its damaged fields taken as absent
//     (the member still counts while it heartbeats), and its member puts
//     it right at its next heartbeat (lease.Store.Members);
//   - a lease whose owner, epoch or expiry cannot be read blocks its
//     partition: nobody can renew it, and acquiring it fails. The member
//     the partition is assigned to replaces it (lease.Store.Repair) with a
//     lease held by nobody (lease.RepairOwner) for one lease TTL — the
//     owner of the damaged lease, which can no longer renew it, stops by
//     itself before then — at an epoch no lower than any the partition's
//     checkpoint and fence documents record, so the next owner, at the
//     epoch above, fences off every earlier writer and is fenced by none;
//   - a lease with only its acquiredAt (or group, partition) damaged is
//     still used, and put right in place by the same member.
//
// Meanwhile Status.Corrupt names each record and what is done about it,
// the member logs each new one once, and the status document shows the
// stream degraded with the records named.

// CorruptAction says what the members do about a corrupt lease or member
// document, for an operator.
func CorruptAction(ce *lease.CorruptError) string {
	switch {
	case ce.Partition >= 0 && !ce.Usable:
		return fmt.Sprintf("partition %d cannot be leased until it is replaced: the member it is assigned to replaces it "+
			"with a lease held by nobody for one lease_ttl, then taken at an epoch above any the partition recorded", ce.Partition)
	case ce.Partition >= 0:
		return fmt.Sprintf("the lease is still used; the member partition %d is assigned to puts the field right", ce.Partition)
	case ce.Usable:
		return fmt.Sprintf("the damaged fields are read as absent (member %s still counts); it puts them right at its next heartbeat", ce.Member)
	}
	return "ignored (no member counts by it); it is deleted once it expires"
}

// noteCorrupt records the corrupt records of the group's state this member
// read (nil: none), logging each new one once.
func (g *Group) noteCorrupt(bad lease.CorruptRecords) {
	var notes []string
	for _, ce := range bad {
		notes = append(notes, fmt.Sprintf("corrupt record %s: %s; %s", ce.Record, ce.Problem, CorruptAction(ce)))
	}
	prev := g.st.get().Corrupt
	if slices.Equal(prev, notes) {
		return
	}
	for _, n := range notes {
		if !slices.Contains(prev, n) {
			g.log.Warn("the group's state holds a corrupt record", "record", n)
		}
	}
	g.st.update(func(s *Status) { s.Corrupt = notes })
}

// corruptLeases are the partitions among bad whose lease is corrupt.
func corruptLeases(bad lease.CorruptRecords) map[int]bool {
	out := map[int]bool{}
	for _, ce := range bad {
		if ce.Partition >= 0 {
			out[ce.Partition] = true
		}
	}
	return out
}

// repairLease repairs partition p's lease document if it is corrupt (see
// above). It reports whether it was (false: it reads, or there is none).
func (g *Group) repairLease(ctx context.Context, p int) bool {
	cfg := &g.cfg
	ce, err := g.leases.Inspect(ctx, cfg.name, p)
	if err != nil || ce == nil {
		return false
	}
	floor := int64(0)
	if !ce.Usable {
		if floor, err = g.epochFloor(ctx, p); err != nil {
			g.transient(fmt.Sprintf("read the epochs partition %d recorded, to repair its lease", p), err)
			return true
		}
	}
	done, err := g.leases.Repair(ctx, cfg.name, p, floor, cfg.ttl)
	if err != nil {
		g.transient(fmt.Sprintf("repair the corrupt lease of partition %d", p), err)
		return true
	}
	if done {
		if ce.Usable {
			g.log.Warn("repaired a corrupt lease record in place", "record", ce.Record, "problem", ce.Problem)
		} else {
			g.log.Warn("replaced a corrupt lease record: the partition is leased again once the replacement expires",
				"record", ce.Record, "problem", ce.Problem, "epoch", floor, "expires_in", cfg.ttl)
		}
	}
	return true
}

// epochFloor is the highest lease epoch partition p's writes record: its
// checkpoint's (read even from a corrupt record, where its epoch reads)
// and its fence documents'.
func (g *Group) epochFloor(ctx context.Context, p int) (int64, error) {
	floor := int64(0)
	if ms, ok := g.cps.(*mongostore.Store); ok {
		recs, err := ms.Records(ctx, g.cfg.name)
		if err != nil {
			return 0, err
		}
		for _, r := range recs {
			if r.Partition == p {
				floor = max(floor, r.Epoch)
			}
		}
	}
	raw, err := g.fences().FindOne(ctx, bson.D{{Key: "_id.group", Value: g.cfg.name}, {Key: "_id.partition", Value: p}},
		options.FindOne().SetSort(bson.D{{Key: "epoch", Value: -1}}).SetProjection(bson.D{{Key: "epoch", Value: 1}})).Raw()
	switch {
	case errors.Is(err, mongo.ErrNoDocuments):
	case err != nil:
		return 0, err
	default:
		if e, ok := raw.Lookup("epoch").AsInt64OK(); ok {
			floor = max(floor, e)
		}
	}
	return floor, nil
}
