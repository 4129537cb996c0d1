package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/checkpoint/mongostore"
	"github.com/ferry-io/ferry/lease"
)

// The tools that change a stream's checkpoints (reset, position set) and
// those that show them (status, position show) read every record of the
// stream, decodable or not: a corrupt record is named (collection and
// _id) and what is wrong with it said, and reset and position set work
// over it — compare-and-set on the record exactly as read, without
// decoding it (mongostore.Store.Remove and Overwrite).

// readable is the decoded checkpoints among recs.
func readable(recs []mongostore.Record) []checkpoint.Checkpoint {
	var out []checkpoint.Checkpoint
	for _, r := range recs {
		if r.Corrupt == nil {
			out = append(out, r.Checkpoint)
		}
	}
	return out
}

// corruptNote says which of recs are corrupt, for a refusal: "" when none
// is.
func corruptNote(recs []mongostore.Record) string {
	var names []string
	for _, r := range recs {
		if r.Corrupt != nil {
			names = append(names, fmt.Sprintf("%s (%s)", r.Corrupt.Record, r.Corrupt.Problem))
		}
	}
	if len(names) == 0 {
		return ""
	}
	return fmt.Sprintf(" Corrupt checkpoint record(s), whose position cannot be read: %s.", strings.Join(names, "; "))
}

// liveMembers are a stream's live members, for the tools that refuse to
// change the checkpoints while some run: a member document with damaged
// fields still counts (its member heartbeats it by its _id).
func liveMembers(ctx context.Context, ls *lease.Store, stream string) ([]lease.MemberInfo, error) {
	members, err := ls.Members(ctx, stream)
	if _, corrupt := lease.AsCorruptRecords(err); corrupt {
		return members, nil
	}
	return members, err
}
