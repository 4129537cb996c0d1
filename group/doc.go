// Package group runs a Ferry consumer group: many instances of a service
// (Cloud Run, Kubernetes) share one stream's partitions, and each change's
// effect happens once.
//
//	g, _ := group.New(client, handle,
//		group.Name("orders"), group.Partitions(8),
//		group.StateDatabase(client.Database("ferry")),
//		group.DeliveryMode(group.Transactional),
//		group.ConsumerOptions(ferry.WatchCollection("shop", "orders")),
//	)
//	err := g.Run(ctx) // cancel ctx (SIGTERM) to hand off and leave
//
// # How it works
//
//   - Membership: each member registers under an id (MemberID, else
//     lease.DefaultMemberID: Cloud Run's K_SERVICE/K_REVISION or the host
//     name, plus a random suffix) and heartbeats; a member silent for the
//     member timeout is dropped, judged by the database server's clock.
//     An id is one live process's: Run returns an error matching
//     lease.ErrDuplicateMember, and the process holding the id goes on
//     undisturbed, when another live process is a member under it. A
//     process restarted after a crash under its old id joins once the dead
//     registration expires, and takes the leases the dead process held
//     under the id when they expire, at new epochs (never its epochs).
//   - Leases: each partition has a lease {owner, epoch, expiresAt} taken and
//     renewed by single atomic updates judged by $$NOW, never by comparing
//     instance clocks; every new tenure increments the epoch, the fencing
//     token. A holder renews at a third of the TTL and stops working on a
//     partition by itself once it cannot prove the lease still valid
//     (monotonic time since its last successful renewal), before the server
//     could expire it.
//   - Assignment: every member computes the same target from the live
//     members and the current owners (see Assign: balanced within one;
//     a join moves exactly the newcomer's share, a leave only the leaver's
//     partitions). A member claims free partitions it targets and hands off
//     the others cooperatively: stop reading, drain, final checkpoint,
//     release. Partitions that do not move keep running. OnAssigned,
//     OnRevoked and OnLost are never called concurrently.
//   - Each owned partition runs a ferry.Consumer with the partition filter
//     and the lease epoch. Every partition runs with one partitioning
//     (ferry.Partitioning): the one Partitioning sets, else the one the
//     member resolves from the stream's checkpoints before it runs any
//     partition (ferry.HashRange for a new stream; ferry.HashMod, logged
//     once, for a stream that checkpointed under it), so partitions agree
//     even where one has no checkpoint of its own; checkpoints of both
//     fail the stream. A new owner claims the partition's checkpoint
//     under its epoch before reading, so a previous owner's checkpoint
//     writes are rejected (ferry.ErrFenced) from then on.
//   - Control events (drop, rename, dropDatabase, invalidate) have no
//     documentKey; every partition sees them and applies the invalidate
//     policy, and partition 0 hands them to the handler (see package ferry).
//   - One origin: a new group (consumer options starting at StartNow, the
//     default) records the source's cluster time as the start of every
//     partition that has no checkpoint yet, before any member runs a
//     partition. A partition that first opens late (its member slow to
//     start, a hand-off before the first owner opened it) still delivers
//     every event written since the group started. An origin that has
//     fallen off the oplog by then is lost history, handled like any other.
//   - Lost history: with ferry.OnHistoryLost(ferry.HistoryLostBackfill) a
//     partition whose checkpoint fell off the oplog rescans its own slice of
//     the source, under its lease and delivery mode. Its sweeper (what the
//     scan did not touch) must be given per partition with Sweeper (which
//     passes the partitioning, the partition and the count), not
//     through ConsumerOptions(ferry.WithSweeper(...)): a shared sweeper
//     does not know which partition swept, and would delete the others'
//     documents.
//   - Leaving: on cancellation a member drains, checkpoints and releases its
//     leases, so others take over at once instead of waiting for expiry.
//   - Repartition changes the partition count explicitly, with the group
//     stopped: every new partition starts from the oldest old checkpoint and
//     the ledger absorbs the replay. It never happens implicitly.
//
// # Delivery modes
//
//	mode           how                                               guarantee
//	at-least-once  effect, then checkpoint                           no loss; a crash replays the events after the checkpoint
//	idempotent     ledger consulted before the effect, written       no loss; a duplicate only if the process dies between the
//	               after; Event.ID() is the idempotency key,         effect and the ledger write and the sink ignores the key
//	               Event.Epoch the fencing token
//	transactional  ledger insert + lease-epoch check + the           exactly-once effects for writes the handler makes through
//	               handler's writes + a fence write in one MongoDB   the context it is given, with StateDatabase's client (the
//	               transaction (the handler gets a session context   transaction's), in the state store's cluster; a fenced-off
//	               of StateDatabase's client)                        zombie's transaction
//	                                                                 aborts, even one stopped after its lease check
//
// Every handler call first checks that the partition's lease is still
// provably valid; if not, the partition stops without finishing the event
// (ferry.StopPartition), so its next owner applies it.
//
// # Transactional mode
//
// This is the one description of what the transactional mode's
// transaction holds; package ledger and checkpoint/mongostore point here.
// One MongoDB transaction, on StateDatabase's client, per event (per batch
// with NewBatch), holds, in this order:
//
//  1. the ledger insert of the event id (ledger.RecordNew; with NewBatch,
//     SeenMany then RecordMany of the events absent): an id already
//     recorded means a committed transaction applied it, and this one
//     makes no effect;
//  2. the check that the partition's lease still names this member at its
//     epoch (lease.Held.VerifyEpoch, a read);
//  3. the handler's writes, through the session context it is given;
//  4. the fence write: its lane's fence document incremented under its
//     own epoch, the last statement before the commit.
//
// The checkpoint is not in it. The consumer writes it after the commit,
// batched, compare-and-set on (version, epoch), as in every mode: a crash
// between the commit and the checkpoint replays the event, and the ledger
// entry the transaction committed makes the replay a no-op. What fences a
// stale owner off is the fence write (4), not the checkpoint: a new owner
// raises every fence document of the partition to its epoch before it
// reads, so a transaction of an older epoch either committed before that
// or its fence write conflicts or matches nothing, and it commits nothing
// (see "Operational notes"). A transient error (WriteConflict) retries the
// whole transaction (ledger.RunTransaction).
//
// NewBatch takes a ferry.BatchHandler and applies the mode per batch, with
// the same orders: idempotent mode reads the ledger once for the batch
// (ledger SeenMany: one find), hands the handler only the events not
// applied before, and records the ones it acknowledged in one unordered
// insertMany (RecordMany) after their effects; transactional mode runs
// that find, the insert, the lease-epoch check and the handler's writes
// for the whole batch in one transaction. A handler failure aborts the
// whole transaction: the failed events keep their errors, the others are
// reported ferry.ErrNotAttempted, and each is retried alone (package
// ferry), so a poison event is dead-lettered by itself. The idempotent
// mode's window between effect and ledger write is now a batch: a process
// killed in it replays up to a batch per lane, which the receiver's use of
// the idempotency key absorbs.
//
// # Operational notes
//
//   - A member killed in the middle of a transaction leaves it open on the
//     server until transactionLifetimeLimitSeconds (60 s by default) has
//     passed; the documents it wrote stay locked, and the new owner's
//     transactions on them meet write conflicts. Ferry retries transient
//     errors for as long as they last and never dead-letters an event
//     because of them; lowering the server parameter shortens the wait.
//     Killed between its fence write and its commit (the transaction's
//     last round trip), it also holds a fence document, and the new
//     owner's start waits for the transaction to end.
//   - Fencing in transactional mode is a write, not a read: the
//     transaction's snapshot keeps showing the lease it read, however long
//     the member is stopped (SIGSTOP, a pause) before it commits. Each
//     partition has 64 fence documents in the state database's fences
//     collection ({_id: {group, partition, slot}, epoch}); a new owner
//     raises them to its epoch before reading, and each transaction
//     increments its lane's one under its own epoch just before the
//     commit: it then either commits before the takeover or not at all.
//   - Connections: New's client reads the partitions' change streams, and
//     each holds one of its pooled connections while a getMore waits for
//     events (up to ferry.MaxAwaitTime, 1 s by default), nearly all the
//     time. Everything else goes through StateDatabase's client: leases,
//     heartbeats, checkpoints, the ledger, dead letters, transactions.
//     Give StateDatabase a client of its own, so that lease renewals never
//     queue behind the change streams; with one client for both, its
//     maxPoolSize (the driver's default is 100) must exceed the number of
//     partitions this member may run (all of them, once the others are
//     gone) plus a few, or renewals time out waiting for a connection and
//     leases are lost. The group logs what to do the first time a
//     state-store operation times out waiting for a pooled connection
//     (mongoerr.IsPoolTimeout). The ferry daemon opens a client for each.
//   - Takeover after a crash takes up to the lease TTL plus a rebalance
//     interval (a quarter of the TTL): the member timeout defaults to the
//     lease TTL, so a dead member's leases and membership lapse together.
//     After a graceful leave it is immediate.
//
// # States and failures
//
// A member's stream is Starting, Running (WaitingForSink while a sink fails
// for every event; nothing is dead-lettered then), Draining and Stopped
// (Status, OnStateChange). The partitions waiting for their sink, with the
// delivery error, are also published in the member's document in the
// state store when they change (lease.Member.SetStatus; read them with
// WaitingPartitions), so that `ferry status` shows a sink outage from any
// machine; they vanish with the member document. A partition that stops with a failure a retry
// cannot fix (ferry.AsFailure: a changed definition, lost history under
// HistoryLostFail, an invalidated stream under InvalidateStop, a pipeline
// that modifies _id, a required image missing, missing privileges, a
// poison event under PoisonStall, a corrupt checkpoint) makes the stream
// Failed on that member: it hands every partition off, leaves the group
// (the other members take its partitions and keep their own state, so
// during a rolling deploy the members with the old definition keep
// running), records the failure in the state store (Failures, written
// before Status reports Failed; `ferry status` shows it from any machine)
// and takes no lease of the stream
// while failed. It logs one line per state change, not per attempt. A
// failure that can clear (pre-images enabled, a privilege granted, the
// sink fixed) is re-checked by joining again after a backoff from 1 s
// doubling to 5 min; one that cannot stays until the member restarts with
// a new configuration. Any other stop (a lost lease, a network error) is
// retried partition by partition, after a backoff from 1 s to 30 s.
// MongoDB refusing the source's credentials (AuthenticationFailed) fails
// the stream too, before any partition runs, and is re-checked.
//
// A corrupt lease or member document of the group (a field of the wrong
// type) neither stalls the group nor hides the others: members are read
// without their damaged fields, a lease that cannot be renewed or
// acquired is replaced by the member its partition is assigned to, fenced
// above every epoch the partition recorded (CorruptAction says what is
// done; Status.Corrupt names the records).
//
// # Options
//
// New takes Options in the style of package ferry (see its doc): they
// only record values, New validates once and its *ferry.ConfigError lists
// every problem, each naming its option. The options the group passes on
// are checked by New too: ConsumerOptions as ferry.NewConsumer checks
// them (problems prefixed "ConsumerOptions: "), LeaseOptions as lease.New
// does ("LeaseOptions: "), so a bad consumer option fails New rather than
// the first partition's start. The consumer options the group sets itself
// (Stream, Partition, Epoch, Checkpoints, DeadLetters, DrainTimeout,
// LogStops) are problems in ConsumerOptions, each named with where the
// group takes its value from (group.Name, group.Partitions and the leases,
// StateDatabase, group.DrainTimeout), never replaced silently.
//
// # Moving to a new definition
//
// A changed definition (pipeline, options, partition count) never reuses
// the old checkpoints' tokens. The lossless path: give the new definition a
// new stream name that starts with ferry.StartAtCheckpointsOf(store, old)
// (in the daemon, source.start_at: {checkpoints_of: old}) and restart the
// members. The new group's origin is the old stream's oldest position; in
// the idempotent and transactional modes the ledger entries of the old
// stream count as applied, so the overlap is absorbed.
package group
