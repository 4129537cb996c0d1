package cli

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/checkpoint/mongostore"
	"github.com/ferry-io/ferry/cmd/ferry/config"
	"github.com/ferry-io/ferry/group"
	"github.com/ferry-io/ferry/lease"
)

// The /status document: what every member's ops port serves at /status and
// `ferry status -json` prints, read from the state store, so any member
// (and any machine reaching the store) shows the whole group. Its schema
// is docs/status.md; a test decodes it with DisallowUnknownFields, so a
// field added here without being documented there fails it.
//
// The document never holds a resume token, a document body, a URI or any
// other credential: only names, ids, times, counts, digests and messages
// (server messages quoting a token are shortened by ferry.RedactTokens).

// statusSchema names the document's schema and its version.
const statusSchema = "ferry.status/v1"

// lagThreshold is the lag from which a partition is marked lagging.
const lagThreshold = 30 * time.Second

// dlqRecent is the window of dlq.recent: entries dead-lettered that
// recently make the page mark the DLQ as growing.
const dlqRecent = 15 * time.Minute

type statusDoc struct {
	Schema      string    `json:"schema"`
	GeneratedAt time.Time `json:"generated_at"`
	StateStore  string    `json:"state_store"`
	// LedgerEntries is the state store's ledger size (an estimate from the
	// collection's metadata); null when unknown (the bolt state store).
	LedgerEntries *int64      `json:"ledger_entries"`
	Streams       []streamDoc `json:"streams"`
}

type streamDoc struct {
	Name           string         `json:"name"`
	State          string         `json:"state"`
	Reason         string         `json:"reason"`
	Delivery       string         `json:"delivery"`
	Sink           string         `json:"sink"`
	PartitionCount int            `json:"partition_count"`
	Definition     definitionDoc  `json:"definition"`
	Members        []memberDoc    `json:"members"`
	Partitions     []partitionDoc `json:"partitions"`
	Failures       []failureDoc   `json:"failures"`
	DLQ            dlqDoc         `json:"dlq"`
	Recovery       *recoveryDoc   `json:"recovery"`
	CorruptRecords []corruptDoc   `json:"corrupt_records"`
}

// corruptDoc is a record of the stream's state that cannot be read as
// stored: named by collection and _id, never quoted.
type corruptDoc struct {
	Record  string `json:"record"`
	Problem string `json:"problem"`
	Action  string `json:"action"`
}

type definitionDoc struct {
	Configured  string   `json:"configured"`
	Checkpoints []string `json:"checkpoints"`
	Matches     bool     `json:"matches"`
}

type memberDoc struct {
	ID                  string    `json:"id"`
	JoinedAt            time.Time `json:"joined_at"`
	HeartbeatAt         time.Time `json:"heartbeat_at"`
	HeartbeatAgeSeconds float64   `json:"heartbeat_age_seconds"`
	Partitions          []int     `json:"partitions"`
}

type partitionDoc struct {
	Partition            int        `json:"partition"`
	Owner                string     `json:"owner"`
	Epoch                int64      `json:"epoch"`
	LeaseExpiresAt       *time.Time `json:"lease_expires_at"`
	CheckpointAt         *time.Time `json:"checkpoint_at"`
	CheckpointAgeSeconds *float64   `json:"checkpoint_age_seconds"`
	LagSeconds           *float64   `json:"lag_seconds"`
	ReadDelaySeconds     *float64   `json:"read_delay_seconds"` // checkpoint.ReadDelay; null: not measured
	Lagging              bool       `json:"lagging"`
	State                string     `json:"state"`
	Note                 string     `json:"note"`
	LastError            string     `json:"last_error"`
	// Snapshot is the partition's snapshot in progress, or its last one
	// (null: none recorded).
	Snapshot *snapshotProgressDoc `json:"snapshot"`
}

// snapshotProgressDoc is a partition's snapshot as its checkpoint records it
// (ferry.SnapshotOf), after every finished chunk. It names the request
// and whether it has a filter, never the filter itself (it may quote
// values of the documents).
type snapshotProgressDoc struct {
	ID        string `json:"id"`
	State     string `json:"state"`  // running, finished or cancelled
	Reason    string `json:"reason"` // start, history-lost or request
	Request   string `json:"request"`
	Filtered  bool   `json:"filtered"`
	Namespace string `json:"namespace"`
	Mode      string `json:"mode"`
	// DocumentsEstimated, Percent, DocumentsPerSecond and ETASeconds are
	// null when not known.
	DocumentsDone      int64      `json:"documents_done"`
	DocumentsEstimated *int64     `json:"documents_estimated"`
	Percent            *float64   `json:"percent"`
	ChunksDone         int64      `json:"chunks_done"`
	DocumentsPerSecond *float64   `json:"documents_per_second"`
	ETASeconds         *float64   `json:"eta_seconds"`
	StartedAt          time.Time  `json:"started_at"`
	FinishedAt         *time.Time `json:"finished_at"`
	// ChunkFailures counts the failed tries of the chunk the snapshot is
	// at (0 once a chunk finished), LastError the last one's error.
	ChunkFailures int    `json:"chunk_failures"`
	LastError     string `json:"last_error"`
}

// Snapshot states (snapshotProgressDoc.State).
const (
	snapshotRunning   = "running"
	snapshotFinished  = "finished"
	snapshotCancelled = "cancelled"
)

// newSnapshotProgressDoc is the status document's view of a snapshot's progress.
func newSnapshotProgressDoc(p ferry.SnapshotProgress) *snapshotProgressDoc {
	d := &snapshotProgressDoc{ID: p.ID, State: snapshotRunning, Reason: p.Reason, Request: p.Request, Filtered: p.Filter != "",
		Namespace: p.Namespace, Mode: p.Mode, DocumentsDone: p.Done, ChunksDone: p.Chunks, StartedAt: p.Started.UTC(),
		ChunkFailures: p.Failures, LastError: p.Error}
	switch {
	case p.Cancelled:
		d.State = snapshotCancelled
	case !p.Running():
		d.State = snapshotFinished
	}
	if !p.Finished.IsZero() {
		t := p.Finished.UTC()
		d.FinishedAt = &t
	}
	if p.Total > 0 {
		total := p.Total
		d.DocumentsEstimated = &total
	}
	if p.Total > 0 || d.State == snapshotFinished {
		pc := math.Floor(p.Percent()*10) / 10
		d.Percent = &pc
	}
	if p.Rate > 0 {
		r := math.Round(p.Rate*10) / 10
		d.DocumentsPerSecond = &r
	}
	if eta := p.ETA(); eta > 0 {
		e := seconds(eta)
		d.ETASeconds = &e
	}
	return d
}

type failureDoc struct {
	Member    string     `json:"member"`
	Partition int        `json:"partition"`
	Class     string     `json:"class"`
	Message   string     `json:"message"`
	Clears    bool       `json:"clears"`
	Since     time.Time  `json:"since"`
	RetryAt   *time.Time `json:"retry_at"`
	Advice    string     `json:"advice"`
}

type dlqDoc struct {
	Size     *int64     `json:"size"`
	Recent   *int64     `json:"recent"`
	NewestAt *time.Time `json:"newest_at"`
}

type recoveryDoc struct {
	Command string `json:"command"`
	Advice  string `json:"advice"`
	Recheck string `json:"recheck"`
}

// statusSource is what a status document is read from: the configuration
// and the state store (MongoDB: db and ls set; bolt: only cps, with the
// local member's view from local).
type statusSource struct {
	cfg     *config.Config
	cfgPath string
	db      *mongo.Database
	ls      *lease.Store
	cps     checkpoint.Store
	// digest returns a stream's configured definition digest ("" when it
	// cannot be computed).
	digest func(context.Context, *config.Stream) string
	// local is the local member's view of a stream (bolt: the only member).
	local func(name string) (group.Status, string, bool)
}

// build reads the status document. Ages are measured by the state
// store's clock when it is MongoDB (the members' clocks never compare).
func (s statusSource) build(ctx context.Context) (*statusDoc, error) {
	now := time.Now()
	doc := &statusDoc{Schema: statusSchema, StateStore: "bolt", Streams: []streamDoc{}}
	if s.db != nil {
		doc.StateStore = "mongodb"
		var hello struct {
			LocalTime time.Time `bson:"localTime"`
		}
		if err := s.db.Client().Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err == nil && !hello.LocalTime.IsZero() {
			now = hello.LocalTime
		}
		n, err := s.db.Collection("ledger").EstimatedDocumentCount(ctx)
		if err != nil {
			return nil, fmt.Errorf("ledger size: %w", err)
		}
		doc.LedgerEntries = &n
	}
	doc.GeneratedAt = now.UTC()
	for i := range s.cfg.Streams {
		sd, err := s.stream(ctx, &s.cfg.Streams[i], now)
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("stream %s: %w", s.cfg.Streams[i].Name, err)
			}
			// One stream's records that cannot be read do not hide the
			// others'.
			sd.State, sd.Reason = "unknown", "its state cannot be read: "+ferry.RedactTokens(err.Error())
		}
		doc.Streams = append(doc.Streams, sd)
	}
	return doc, nil
}

func (s statusSource) stream(ctx context.Context, sc *config.Stream, now time.Time) (streamDoc, error) {
	sd := streamDoc{Name: sc.Name, Delivery: string(sc.Delivery.Mode), Sink: sc.Sink.Type, PartitionCount: sc.Group.Partitions,
		Members: []memberDoc{}, Partitions: []partitionDoc{}, Failures: []failureDoc{}, CorruptRecords: []corruptDoc{}}
	if sd.PartitionCount < 1 {
		sd.PartitionCount = 1
	}
	if sd.Sink == "" {
		sd.Sink = sinkType(&sc.Sink)
	}
	cps, badCheckpoints, err := s.checkpoints(ctx, sc.Name)
	if err != nil {
		return sd, err
	}
	for _, ce := range badCheckpoints {
		sd.CorruptRecords = append(sd.CorruptRecords, corruptDoc{Record: ce.Record, Problem: ce.Problem,
			Action: "the partition's members fail on it (corrupt-checkpoint); ferry position set and ferry reset work over it"})
	}
	var leases []lease.Lease
	var members []lease.MemberInfo
	var failures []group.FailureRecord
	badLease := map[int]*lease.CorruptError{}
	if s.db != nil {
		// Corrupt member and lease documents are named; the readable
		// ones are shown.
		var badMembers, badLeases lease.CorruptRecords
		members, err = s.ls.Members(ctx, sc.Name)
		if badMembers, _ = lease.AsCorruptRecords(err); err != nil && badMembers == nil {
			return sd, err
		}
		leases, err = s.ls.List(ctx, sc.Name)
		if badLeases, _ = lease.AsCorruptRecords(err); err != nil && badLeases == nil {
			return sd, err
		}
		for _, ce := range append(badMembers, badLeases...) {
			sd.CorruptRecords = append(sd.CorruptRecords, corruptDoc{Record: ce.Record, Problem: ce.Problem, Action: group.CorruptAction(ce)})
			if ce.Partition >= 0 {
				badLease[ce.Partition] = ce
			}
		}
		if failures, err = group.Failures(ctx, s.db, sc.Name); err != nil {
			return sd, err
		}
		if err := s.dlq(ctx, sc.Name, now, &sd.DLQ); err != nil {
			return sd, err
		}
	} else if s.local != nil {
		failures, members, leases = s.localView(sc, now)
	}
	// The partitions each member reports waiting for the sink: from its
	// member document (MongoDB), or the local member's own view (bolt).
	waiting := map[string]map[int]string{}
	for _, m := range members {
		if w := group.WaitingPartitions(m); len(w) > 0 {
			waiting[m.ID] = w
		}
	}
	if s.db == nil && s.local != nil {
		if st, member, ok := s.local(sc.Name); ok && st.State != group.Failed && st.State != group.Stopped && len(st.SinkErrors) > 0 {
			waiting[member] = st.SinkErrors
		}
	}

	// Definition: the configured digest against the checkpoints'.
	if s.digest != nil {
		sd.Definition.Configured = s.digest(ctx, sc)
	}
	sd.Definition.Checkpoints = []string{}
	for _, cp := range cps {
		if cp.Identity != "" && !slices.Contains(sd.Definition.Checkpoints, cp.Identity) {
			sd.Definition.Checkpoints = append(sd.Definition.Checkpoints, cp.Identity)
		}
	}
	slices.Sort(sd.Definition.Checkpoints)
	sd.Definition.Matches = sd.Definition.Configured != "" &&
		!slices.ContainsFunc(sd.Definition.Checkpoints, func(d string) bool { return d != sd.Definition.Configured })

	// Members, and the partitions each owns live.
	owned := map[string][]int{}
	byP := map[int]lease.Lease{}
	for _, l := range leases {
		byP[l.Partition] = l
		if !l.Free() {
			owned[l.Owner] = append(owned[l.Owner], l.Partition)
		}
	}
	for _, m := range members {
		parts := owned[m.ID]
		if parts == nil {
			parts = []int{}
		}
		slices.Sort(parts)
		sd.Members = append(sd.Members, memberDoc{ID: m.ID, JoinedAt: m.JoinedAt.UTC(), HeartbeatAt: m.HeartbeatAt.UTC(),
			HeartbeatAgeSeconds: seconds(age(now, m.HeartbeatAt)), Partitions: parts})
	}

	// Failures, with what to do in the configuration's terms.
	lastErr := map[int]string{}
	for _, f := range failures {
		ff := ferry.Failure{Class: ferry.FailureClass(f.Class), Clears: f.Clears, Detail: f.Message}
		fd := failureDoc{Member: f.Member, Partition: f.Partition, Class: f.Class, Message: f.Message, Clears: f.Clears,
			Since: f.Since.UTC(), Advice: advice(s.cfgPath, sc, ff)}
		if !f.RetryAt.IsZero() {
			t := f.RetryAt.UTC()
			fd.RetryAt = &t
		}
		sd.Failures = append(sd.Failures, fd)
		if _, ok := lastErr[f.Partition]; !ok {
			lastErr[f.Partition] = f.Class + ": " + f.Message
		}
	}

	// Partitions.
	cpByP := map[int]checkpoint.Checkpoint{}
	var waitingParts []int // waiting for the sink
	var sinkErr string     // the first one's delivery error
	for _, cp := range cps {
		cpByP[cp.Partition] = cp
	}
	cpBad := map[int]*checkpoint.CorruptError{}
	for _, ce := range badCheckpoints {
		cpBad[ce.Partition] = ce
	}
	for p := 0; p < sd.PartitionCount; p++ {
		pd := partitionDoc{Partition: p, State: "no-checkpoint", LastError: lastErr[p]}
		if l, ok := byP[p]; ok {
			pd.Epoch = l.Epoch
			if !l.Free() && l.Owner != lease.RepairOwner {
				pd.Owner = l.Owner
				t := l.ExpiresAt.UTC()
				pd.LeaseExpiresAt = &t
			}
		}
		if ce := cpBad[p]; ce != nil {
			pd.State, pd.Note = "corrupt-checkpoint", fmt.Sprintf("record %s: %s", ce.Record, ce.Problem)
			if pd.LastError == "" {
				pd.LastError = "corrupt checkpoint " + pd.Note
			}
		}
		if ce := badLease[p]; ce != nil && pd.LastError == "" {
			pd.LastError = fmt.Sprintf("corrupt lease record %s: %s", ce.Record, ce.Problem)
		}
		if l, ok := byP[p]; ok && l.Owner == lease.RepairOwner && !l.Free() && pd.LastError == "" {
			pd.LastError = fmt.Sprintf("its lease was found corrupt and replaced: held by nobody until %s, then taken at the next epoch",
				l.ExpiresAt.UTC().Format(time.RFC3339))
		}
		if cp, ok := cpByP[p]; ok {
			at := cp.UpdatedAt.UTC()
			pd.CheckpointAt = &at
			a := seconds(age(now, cp.UpdatedAt))
			pd.CheckpointAgeSeconds = &a
			// The one definition of lag (ferry.LagOf), as ferry_lag_seconds:
			// 0 when nothing was pending at the last checkpoint write.
			var oldest time.Time
			if !cp.Pending.IsZero() {
				oldest = time.Unix(int64(cp.Pending.T), 0)
			}
			lag := ferry.LagOf(now, oldest)
			l := seconds(lag)
			pd.LagSeconds = &l
			pd.Lagging = lag >= lagThreshold
			if cp.ReadDelay > 0 {
				d := seconds(cp.ReadDelay)
				pd.ReadDelaySeconds = &d
			}
			pd.State = string(cp.State)
			if cp.State == checkpoint.StateRunning {
				pd.State = "running"
			}
			pd.Note = ferry.RedactTokens(cp.Note)
			if pd.LastError == "" && cp.State != "" && cp.State != checkpoint.StateRunning {
				pd.LastError = pd.Note
			}
			if sp, ok, err := ferry.SnapshotOf(cp); err == nil && ok {
				pd.Snapshot = newSnapshotProgressDoc(sp)
			}
		}
		// Its live owner says it waits for the sink (a partition stopped
		// by its checkpoint's state cannot be delivering).
		if msg, ok := waiting[pd.Owner][p]; ok && pd.Owner != "" && (pd.State == "running" || pd.State == "no-checkpoint") {
			pd.State = string(group.WaitingForSink)
			pd.Note = sinkWaitNote
			if pd.LastError == "" {
				pd.LastError = msg
			}
			waitingParts = append(waitingParts, p)
			if sinkErr == "" {
				sinkErr = msg
			}
		}
		if pd.State == "running" && pd.Owner == "" {
			// Resumable, but no live member holds its lease: nobody reads it.
			pd.State = "stopped"
		}
		sd.Partitions = append(sd.Partitions, pd)
	}

	// The stream's state, from the whole group's records.
	switch {
	case len(failures) > 0 && len(members) == 0:
		sd.State = "failed"
	case len(failures) > 0:
		sd.State = "degraded" // failed on some members, running on others (a rolling deploy)
	case len(members) == 0:
		sd.State = "stopped"
	case len(sd.CorruptRecords) > 0:
		sd.State = "degraded" // running, over a corrupt record of its state
	case len(waitingParts) > 0:
		sd.State = string(group.WaitingForSink)
		sd.Reason = sinkWaitReason(waitingParts, sinkErr)
	default:
		sd.State = "running"
	}
	if len(failures) == 0 && len(sd.CorruptRecords) > 0 {
		c := sd.CorruptRecords[0]
		sd.Reason = fmt.Sprintf("corrupt record %s: %s; %s", c.Record, c.Problem, c.Action)
	}
	if len(failures) > 0 {
		f := failures[0]
		ff := ferry.Failure{Class: ferry.FailureClass(f.Class), Clears: f.Clears, Detail: f.Message}
		sd.Reason = f.Class + ": " + f.Message
		rs := group.Status{RetryAt: f.RetryAt}
		sd.Recovery = &recoveryDoc{Command: recoveryCommand(s.cfgPath, sc, ff), Advice: advice(s.cfgPath, sc, ff), Recheck: recheckText(rs)}
	}
	return sd, nil
}

// checkpoints reads a stream's checkpoints: the readable ones, and the
// records that cannot be read (MongoDB state store: named by collection
// and _id; the bolt store fails on one, naming it).
func (s statusSource) checkpoints(ctx context.Context, stream string) ([]checkpoint.Checkpoint, []*checkpoint.CorruptError, error) {
	ms, ok := s.cps.(*mongostore.Store)
	if !ok {
		list, err := s.cps.List(ctx, stream)
		return list, nil, err
	}
	recs, err := ms.Records(ctx, stream)
	if err != nil {
		return nil, nil, err
	}
	var bad []*checkpoint.CorruptError
	for _, r := range recs {
		if r.Corrupt != nil {
			bad = append(bad, r.Corrupt)
		}
	}
	return readable(recs), bad, nil
}

// sinkWaitNote explains a partition waiting for its sink.
const sinkWaitNote = "the sink fails every delivery (transiently): events wait, in order, with backoff; none is dead-lettered; delivery resumes by itself when the sink is back"

// sinkWaitReason is a stream's reason while partitions wait for the sink.
func sinkWaitReason(parts []int, sinkErr string) string {
	ps := make([]string, len(parts))
	for i, p := range parts {
		ps[i] = fmt.Sprint(p)
	}
	what := "partition " + ps[0]
	if len(ps) > 1 {
		what = "partitions " + strings.Join(ps, ", ")
	}
	r := "sink down: every delivery of " + what + " fails; events wait, none is dead-lettered"
	if sinkErr != "" {
		r += "; last error: " + sinkErr
	}
	return r
}

// dlq fills the dead-letter counts of a stream.
func (s statusSource) dlq(ctx context.Context, stream string, now time.Time, d *dlqDoc) error {
	coll := s.db.Collection("dlq")
	n, err := coll.CountDocuments(ctx, bson.D{{Key: "stream", Value: stream}})
	if err != nil {
		return fmt.Errorf("dlq size: %w", err)
	}
	d.Size = &n
	recent, err := coll.CountDocuments(ctx, bson.D{{Key: "stream", Value: stream},
		{Key: "lastAttemptAt", Value: bson.D{{Key: "$gte", Value: now.Add(-dlqRecent)}}}})
	if err != nil {
		return fmt.Errorf("dlq size: %w", err)
	}
	d.Recent = &recent
	if n == 0 {
		return nil
	}
	var newest struct {
		LastAt time.Time `bson:"lastAttemptAt"`
	}
	err = coll.FindOne(ctx, bson.D{{Key: "stream", Value: stream}},
		options.FindOne().SetSort(bson.D{{Key: "lastAttemptAt", Value: -1}}).SetProjection(bson.D{{Key: "lastAttemptAt", Value: 1}})).Decode(&newest)
	if err != nil && err != mongo.ErrNoDocuments {
		return fmt.Errorf("dlq newest entry: %w", err)
	}
	if !newest.LastAt.IsZero() {
		t := newest.LastAt.UTC()
		d.NewestAt = &t
	}
	return nil
}

// localView is the bolt state store's group: this process alone.
func (s statusSource) localView(sc *config.Stream, now time.Time) ([]group.FailureRecord, []lease.MemberInfo, []lease.Lease) {
	st, member, ok := s.local(sc.Name)
	if !ok {
		return nil, nil, nil
	}
	if st.State == group.Failed && st.Failure != nil {
		f := st.Failure
		return []group.FailureRecord{{Stream: sc.Name, Member: member, Partition: st.FailedPartition, Class: string(f.Class),
			Message: f.Detail, Clears: f.Clears, Since: st.FailedSince, RetryAt: st.RetryAt}}, nil, nil
	}
	if st.State == group.Stopped {
		return nil, nil, nil
	}
	var leases []lease.Lease
	for p := range st.Partitions {
		leases = append(leases, lease.Lease{Group: sc.Name, Partition: p, Owner: member, ExpiresAt: now})
	}
	return nil, []lease.MemberInfo{{Group: sc.Name, ID: member, JoinedAt: st.Since, HeartbeatAt: now}}, leases
}

// recoveryCommand is the command to run for a failure, with the
// configuration file's path: the ferry command (or the server command)
// that recovers the stream; where the way out is a change of
// configuration (advice says which), `ferry validate` to check the edited
// file before the members are restarted; where the condition clears by
// itself, `ferry status` to watch it.
func recoveryCommand(cfgPath string, sc *config.Stream, f ferry.Failure) string {
	if cfgPath == "" {
		cfgPath = "ferry.yaml"
	}
	reset := fmt.Sprintf("ferry reset -c %s -stream %s", cfgPath, sc.Name)
	switch f.Class {
	case ferry.FailIdentityChanged, ferry.FailInvalidated, ferry.FailCorruptCheckpoint:
		return reset
	case ferry.FailHistoryLost:
		if f.Clears {
			break // the oplog is too short for a backfill: enlarge it
		}
		return reset
	case ferry.FailStalled:
		return fmt.Sprintf("ferry dlq list -c %s -stream %s", cfgPath, sc.Name)
	case ferry.FailImageMissing:
		coll := "<collection>"
		if sc.Source.Scope.Collection != "" {
			coll = sc.Source.Scope.Collection
		}
		return fmt.Sprintf("db.runCommand({collMod: %q, changeStreamPreAndPostImages: {enabled: true}})", coll)
	case ferry.FailUnauthorized:
		if strings.Contains(f.Detail, "AuthenticationFailed") {
			// The credentials in the URI: edit it, check the file, restart.
			return "ferry validate -c " + cfgPath
		}
		return `db.grantRolesToUser("<source.uri's user>", [{role: "read", db: "<watched database>"}])`
	case ferry.FailStartPosition:
		return "ferry status -c " + cfgPath
	}
	if f.Clears {
		// Nothing to run: it is re-checked with backoff; watch it.
		return "ferry status -c " + cfgPath
	}
	// A change of configuration (advice says which), checked, then a
	// restart of the members.
	return "ferry validate -c " + cfgPath
}

// sinkType names the configured sink's type.
func sinkType(s *config.Sink) string {
	switch {
	case s.Webhook != nil:
		return "webhook"
	case s.Stdout != nil:
		return "stdout"
	case s.MongoDB != nil:
		return "mongodb"
	case s.NATS != nil:
		return "nats"
	case s.Kafka != nil:
		return "kafka"
	case s.PubSub != nil:
		return "pubsub"
	}
	return ""
}

// configuredDigest is a stream's definition digest as its members compute
// it (the partition count is part of it; the partition index is not),
// under the partitioning they run with: group.partitioning when set, else
// the one the stream's checkpoints resolve to (hash-mod for a stream that
// checkpointed under it, ferry.ResolvePartitioning); hash-range when they
// cannot say (checkpoints of both partitionings).
func configuredDigest(client *mongo.Client, cps checkpoint.Store) func(context.Context, *config.Stream) string {
	return func(ctx context.Context, sc *config.Stream) string {
		opts, err := sc.ConsumerOptions(cps)
		if err != nil {
			return ""
		}
		n := max(sc.Group.Partitions, 1)
		// The stores and policies are not part of the definition.
		opts = append(opts, ferry.Partition(0, n), ferry.Checkpoints(cps), ferry.OnPoison(ferry.PoisonStall),
			ferry.OnOversize(ferry.OversizeFail))
		if p, _, err := ferry.ResolvePartitioning(ctx, cps, opts...); err == nil {
			opts = append(opts, ferry.WithPartitioning(p))
		}
		c, err := ferry.NewConsumer(client, func(context.Context, *ferry.Event) error { return nil }, opts...)
		if err != nil {
			return ""
		}
		return c.Identity()
	}
}

func age(now, t time.Time) time.Duration {
	if d := now.Sub(t); d > 0 {
		return d
	}
	return 0
}

// seconds is d in seconds, to the millisecond.
func seconds(d time.Duration) float64 { return float64(d.Milliseconds()) / 1000 }
