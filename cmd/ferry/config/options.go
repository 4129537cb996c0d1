package config

import (
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/group"
)

// ConsumerOptions returns the ferry options of the stream for a single
// consumer: its name (ferry.Stream), GroupConsumerOptions' and, when
// group.partitioning is set, its partitioning (ferry.WithPartitioning).
// Pass them to ferry.NewConsumer with Checkpoints, DeadLetters and
// Partition added.
func (s *Stream) ConsumerOptions(cps checkpoint.Store) ([]ferry.Option, error) {
	opts, err := s.GroupConsumerOptions(cps)
	if err != nil {
		return nil, err
	}
	opts = append([]ferry.Option{ferry.Stream(s.Name)}, opts...)
	if s.Group.Partitioning != "" {
		opts = append(opts, ferry.WithPartitioning(s.Group.Partitioning))
	}
	return opts, nil
}

// GroupConsumerOptions returns the ferry options of the stream's
// definition and policies: scope, pipeline, change-stream options, start
// position, retry policy, handler timeout, poison / lost-history /
// invalidate / oversize policies, queue limits and snapshot pacing
// (snapshot.chunk_size, max_rate, poll_interval); not its name, which
// group.Name gives (GroupOptions). Pass them to group.ConsumerOptions,
// which refuses the options the group sets itself (the stream's name, the
// partition, epoch, checkpoint and dead-letter stores, the drain timeout).
// The error reports a Stream that was not produced by Parse and is
// invalid; for parsed configurations it is always nil.
//
// cps is the state store's checkpoint store, which a stream with
// source.start_at {checkpoints_of: S} reads S's checkpoints from; it may
// be nil for any other start position.
func (s *Stream) GroupConsumerOptions(cps checkpoint.Store) ([]ferry.Option, error) {
	var problems []string
	var scope ferry.Option
	switch sc := s.Source.Scope; {
	case sc.Cluster && sc.Database == "" && sc.Collection == "":
		scope = ferry.WatchCluster()
	case !sc.Cluster && sc.Database != "" && sc.Collection != "":
		scope = ferry.WatchCollection(sc.Database, sc.Collection)
	case !sc.Cluster && sc.Database != "" && sc.Collection == "":
		scope = ferry.WatchDatabase(sc.Database)
	default:
		problems = append(problems, "source.scope: set exactly one of collection, database, cluster")
	}
	if s.Name == "" {
		problems = append(problems, "name: is required")
	}
	var start ferry.StartPosition
	switch s.Source.StartAt.Kind {
	case "", defaultStartAt:
		start = ferry.StartNow()
	case startAtBackfill:
		start = ferry.StartWithBackfill()
	case startAtTime:
		t := s.Source.StartAt.Time.Unix()
		if t < 1 || t > 1<<32-1 {
			problems = append(problems, "source.start_at: the time is out of range")
		}
		start = ferry.StartAtTime(bson.Timestamp{T: uint32(t), I: 0})
	case startAtCheckpoints:
		start = ferry.StartAtCheckpointsOf(cps, s.Source.StartAt.Stream) // NewConsumer refuses a nil store

	default:
		problems = append(problems, fmt.Sprintf("source.start_at: unknown kind %q", s.Source.StartAt.Kind))
	}
	if len(problems) > 0 {
		return nil, &Error{Problems: []Problem{{Path: "stream " + quote(s.Name), Message: strings.Join(problems, "; ")}}}
	}
	fullDoc, before := s.Source.FullDocument, s.Source.FullDocumentBeforeChange
	if fullDoc == fullDocumentDefault {
		fullDoc = ""
	}
	if before == fullDocumentBeforeOff {
		before = ""
	}
	opts := []ferry.Option{
		scope,
		ferry.Pipeline(s.Source.Pipeline...),
		ferry.FullDocument(fullDoc),
		ferry.FullDocumentBeforeChange(before),
		ferry.ShowExpandedEvents(s.Source.ShowExpandedEvents),
		ferry.StartAt(start),
		ferry.Retry(s.Retry.MaxAttempts, s.Retry.InitialBackoff, s.Retry.MaxBackoff),
		ferry.RetryMaxElapsed(s.Retry.MaxElapsed),
		ferry.HandlerTimeout(s.Retry.HandlerTimeout),
		ferry.OnPoison(s.OnPoison),
		ferry.OnHistoryLost(s.OnHistoryLost),
		ferry.OnInvalidate(s.OnInvalidate),
		ferry.OnOversize(s.Oversize),
		ferry.SplitLargeEvents(s.Source.SplitLargeEvents),
		ferry.QueueLimit(s.Queue.Events, s.Queue.Bytes),
		ferry.SnapshotMaxRate(s.Snapshot.MaxRate),
	}
	// A Stream built by hand without its snapshot block keeps ferry's
	// defaults; Parse always fills them in.
	if s.Snapshot.ChunkSize != 0 {
		opts = append(opts, ferry.SnapshotChunkSize(s.Snapshot.ChunkSize))
	}
	if s.Snapshot.PollInterval != 0 {
		opts = append(opts, ferry.SnapshotPollInterval(s.Snapshot.PollInterval))
	}
	return opts, nil
}

// BatchOptions returns the options of the stream's batches (batch.events,
// batch.bytes, batch.linger), for ferry.NewBatchConsumer and
// group.NewBatch (through group.ConsumerOptions); ferry.NewConsumer
// refuses them.
func (s *Stream) BatchOptions() []ferry.Option {
	return []ferry.Option{ferry.BatchSize(s.Batch.Events), ferry.BatchBytes(s.Batch.Bytes), ferry.BatchLinger(s.Batch.Linger)}
}

// GroupOptions returns the consumer-group options of the stream: its name
// (the group's and the stream's), partition count, lease TTL, member id
// and partitioning (when set) and delivery mode. The daemon adds StateDatabase, Consumer
// (with ConsumerOptions), a logger and callbacks.
func (s *Stream) GroupOptions() []group.Option {
	opts := []group.Option{
		group.Name(s.Name),
		group.Partitions(s.Group.Partitions),
		group.LeaseTTL(s.Group.LeaseTTL),
		group.DeliveryMode(s.Delivery.Mode),
	}
	if s.Group.MemberID != "" {
		opts = append(opts, group.MemberID(s.Group.MemberID))
	}
	if s.Group.Partitioning != "" {
		opts = append(opts, group.Partitioning(s.Group.Partitioning))
	}
	return opts
}
