package cli

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/cmd/ferry/config"
	"github.com/ferry-io/ferry/group"
)

// advice says, in the configuration's terms (YAML keys, ferry commands,
// never the Go API), what an operator can do about a failed stream. The
// commands it names carry cfgPath, the configuration file, as -c (or
// "<file>" when it is not known).
func advice(cfgPath string, st *config.Stream, f ferry.Failure) string {
	name := st.Name
	file := fileArg(cfgPath)
	switch f.Class {
	case ferry.FailIdentityChanged:
		return fmt.Sprintf("the stream's definition (source.scope, source.pipeline, source.full_document, "+
			"source.full_document_before_change, source.show_expanded_events, group.partitions or group.partitioning) differs from the one "+
			"that wrote its checkpoints, whose tokens are never reused under another definition. To move without losing "+
			"a change: give the new definition a new name (streams[].name) with source.start_at: {checkpoints_of: %s}, "+
			"then restart the members (the ledger absorbs the overlap in idempotent and transactional delivery). "+
			"To go back: restore the previous definition. To start over: stop every member and run "+
			"`ferry reset -c %s -stream %s`", name, file, name)
	case ferry.FailHistoryLost:
		if f.Clears {
			return "the oplog is shorter than a backfill takes: enlarge it (replSetResizeOplog) or make the backfill " +
				"faster; it is re-checked with backoff"
		}
		return fmt.Sprintf("events were lost from the oplog before they were delivered. Set on_history_lost: backfill "+
			"(rescan the source, then resume) and restart the members, or stop every member and run "+
			"`ferry reset -c %s -stream %s` to start again from source.start_at", file, name)
	case ferry.FailInvalidated:
		return fmt.Sprintf("the watched collection or database was dropped or renamed. Set on_invalidate: restart to "+
			"continue after it and restart the members, or run `ferry reset -c %s -stream %s`", file, name)
	case ferry.FailStalled:
		return "an event keeps failing under on_poison: stall. Fix the receiver (the stream is re-checked with " +
			"backoff), or set on_poison: dead-letter to move past it (`ferry dlq list -c " + file + "` shows it then)"
	case ferry.FailIDModified:
		return "source.pipeline modifies or removes _id, so no resume token can be recorded: remove that stage " +
			"(a changed pipeline is a new definition: rename the stream and start it with source.start_at: " +
			"{checkpoints_of: <old name>})"
	case ferry.FailImageMissing:
		coll := "<collection>"
		if st.Source.Scope.Collection != "" {
			coll = st.Source.Scope.Collection
		}
		return fmt.Sprintf("source.full_document_before_change or source.full_document is required, but a change "+
			"has no pre- or post-image, and never will: enable images on the collection with "+
			"db.runCommand({collMod: %q, changeStreamPreAndPostImages: {enabled: true}}) so that later changes have them, "+
			"then move the stream past this one with `ferry position set -c %s -stream %s "+
			"-time <a time after the change>` (failed members are not live members: they re-check at once), or set them to whenAvailable "+
			"(a changed definition: then adopt it where the stream stands with `ferry position set -c %s -stream %s "+
			"-at-checkpoint-of %s`; the change is delivered without its image)", coll, file, name, file, name, name)
	case ferry.FailUnauthorized:
		if strings.Contains(f.Detail, "AuthenticationFailed") {
			return "MongoDB refused the credentials of source.uri (or of state.uri: the message says which connection): " +
				"check the user name, the password and authSource in that URI (or the user's existence on the cluster); " +
				"the stream is re-checked with backoff, and a changed URI needs a restart of the members"
		}
		return "the user of source.uri lacks a privilege the stream needs (changeStream and find on the watched " +
			"namespace; see docs/deploy.md, least-privilege roles): grant it, and the stream is re-checked with backoff"
	case ferry.FailEventTooLarge:
		return "a change event is larger than 16 MB: project fewer fields in source.pipeline, or set " +
			"source.full_document and source.full_document_before_change to off (a new definition: rename the stream)"
	case ferry.FailCorruptCheckpoint:
		return fmt.Sprintf("the checkpoint record named above (state.database's checkpoints collection, by its _id) "+
			"cannot be resumed from: its fields, or the resume token it holds, cannot be read. Nothing was resumed from it. "+
			"Set where the stream resumes over it with `ferry position set -c %s -stream %s -time <a time>`, "+
			"or delete its checkpoints with `ferry reset -c %s -stream %s` to start again from source.start_at: "+
			"both work over a corrupt record, and the failed members (not live members) re-check within 10 s", file, name, file, name)
	case ferry.FailConfig:
		return "the stream's configuration is invalid: run `ferry validate -c " + file + "`"
	case ferry.FailStartPosition:
		return fmt.Sprintf("source.start_at: {checkpoints_of: %s} names a stream with no checkpoints in the state "+
			"store: check the name (`ferry status -c %s` lists the streams of a configuration)", st.Source.StartAt.Stream, file)
	}
	if f.Clears {
		return "the server refused the change stream; see its message. It is re-checked with backoff"
	}
	return "the server refused the change stream; see its message. Change the stream's configuration (a new " +
		"definition: rename the stream and start it with source.start_at: {checkpoints_of: <old name>})"
}

// fileArg is a configuration file's path as a command-line argument:
// quoted for a POSIX shell when it needs to be, "<file>" when unknown.
func fileArg(path string) string {
	switch {
	case path == "":
		return "<file>"
	case strings.IndexFunc(path, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+,:@%=", r))
	}) < 0:
		return path
	}
	return "'" + strings.ReplaceAll(path, "'", `'\''`) + "'"
}

// recheckText says when a failed stream is re-checked.
func recheckText(s group.Status) string {
	if s.RetryAt.IsZero() {
		return "never by itself: a change of configuration (and a restart) ends it, or ferry position set or ferry reset (a re-check within 10 s)"
	}
	return "at " + s.RetryAt.UTC().Format(time.RFC3339) + " (backoff up to 5m)"
}

// failureNotes remembers the last failure reason logged for a stream, so
// each new reason is logged once, not at every re-check.
type failureNotes struct {
	mu   sync.Mutex
	last string
}

func (n *failureNotes) first(f *ferry.Failure) bool {
	key := string(f.Class) + "\x00" + f.Detail
	n.mu.Lock()
	defer n.mu.Unlock()
	if key == n.last {
		return false
	}
	n.last = key
	return true
}
