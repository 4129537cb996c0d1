// Package lease keeps the membership of a consumer group and the ownership
// of its partitions in MongoDB, with every expiry judged by the database
// server's clock.
//
//	store, _ := lease.New(client.Database("ferry"))
//	me, _ := store.Join(ctx, "orders", lease.DefaultMemberID(), nil)
//	defer me.Leave(context.Background())
//
//	h, err := store.Hold(ctx, "orders", 3, me.ID(), 10*time.Second)
//	if errors.Is(err, lease.ErrHeld) { ... someone else owns partition 3 ... }
//	defer h.Release(context.Background())
//	// work on partition 3 with fencing token h.Epoch(), while h.Valid();
//	// stop at once when <-h.Done().
//
// # Guarantees
//
//   - Only the server's clock decides expiry. Acquire, Renew and Release
//     are single atomic findAndModify/update operations whose conditions
//     and new expiry are computed on the server from $$NOW (one value per
//     command). No instance's wall clock is ever sent or compared, so
//     instances whose clocks differ by minutes cannot both own a partition:
//     at any server instant at most one owner holds an unexpired lease.
//   - Every tenure has a new epoch. The epoch grows by one whenever the
//     lease is acquired by someone who did not hold it live: another owner,
//     or the same owner after a release or an expiry. Renewing, or
//     re-acquiring one's own live lease, keeps it. The epoch is the fencing
//     token: a write made under the lease carries it, and the checkpoint
//     store rejects a write with an epoch lower than the highest it has
//     seen, so a paused "zombie" owner that wakes up after losing the
//     lease cannot overwrite its successor's work.
//   - A Held stops trusting its lease before the server can hand it to
//     anyone else (self-fencing). It records its local monotonic clock just
//     before sending each renewal; the server's expiry is $$NOW + ttl with
//     $$NOW read after the request arrived, so it is later. Valid turns
//     false, and Done closes, when ttl minus SafetyMargin has passed since
//     the last successful renewal was sent. The margin covers differences
//     in clock rate between this process and the server, and the clock
//     offset between replica-set members when a failover moves the primary.
//     Checking Valid before a side effect narrows the window in which a
//     paused process acts on a lost lease; the epoch closes it.
//   - A transaction can fence itself: Held.VerifyEpoch, called with the
//     transaction's context, reads the lease document in the
//     transaction's snapshot and fails (ErrLost, naming the new holder)
//     when another member has taken the partition over, so the
//     transaction aborts instead of committing a zombie's effects.
//   - A membership is a lease too: a member is live while its last
//     heartbeat ($$NOW) plus its timeout is not before the server's $$NOW.
//     Members lists the live ones by a server-side $expr.
//   - A member id belongs to one live process. Join never takes a live
//     registration of another Store (process): it watches it until it
//     heartbeats (the id is in use: ErrDuplicateMember, the other process
//     undisturbed) or expires by the server's clock (its process is gone:
//     Join takes the id over, so a process restarted after a crash under
//     its old id joins within one member timeout).
//   - Every background goroutine (a Held's renewals, a Member's heartbeats)
//     ends before Release or Leave returns, or by itself when the lease or
//     membership is lost, closing Done.
//   - A document edited by hand or damaged (a field of the wrong type)
//     never hides the others: List and Members return every usable lease
//     and member beside a CorruptRecords error naming each corrupt document
//     by collection and _id. A member puts its own document right at its
//     next heartbeat; Repair replaces a lease that cannot be renewed or
//     acquired any more, fenced (see Repair).
//
// # Options
//
// New takes Options and Hold takes HoldOptions, in the style of package
// ferry: they only record values; New (or Hold, against its ttl)
// validates once, before it sends anything, and its error matches
// ErrInvalid and lists every problem, each naming its option
// ("HeartbeatInterval: 4s must be shorter than MemberTimeout (3s)").
//
// # Layout
//
// Leases: one document per (group, partition) in collection "leases",
// {_id: "<group>/<partition>", group, partition, owner, epoch, expiresAt,
// acquiredAt}. Members: one per (group, member) in "members", {_id: {group,
// member}, incarnation, instance, beats, meta, status, joinedAt, heartbeatAt,
// expiresAt} (incarnation: one Join's; instance: one Store's; beats: the
// heartbeats of the incarnation):
// meta is fixed at Join, status is what the member last reported about
// itself (Member.SetStatus), gone with the document when the member
// leaves or expires. New creates no index.
//
// # Assumptions and limits
//
//   - The server's clock runs at about the rate of each instance's
//     monotonic clock (NTP-disciplined clocks drift by parts per million;
//     the default SafetyMargin, ttl/5, allows for far more).
//   - After a primary failover, $$NOW is the new primary's clock. Leases
//     are shortened or lengthened by the offset between the two primaries'
//     clocks; keep SafetyMargin above the offset your replica set's NTP
//     allows, and keep writes with majority write concern so that a
//     failover does not roll back an acquire.
//   - The owner string should be unique per process incarnation
//     (DefaultMemberID is): two processes acquiring under one owner share a
//     tenure and an epoch.
//   - Requires MongoDB 4.2+ (pipeline updates, $$NOW); Ferry targets 6.0+.
package lease
