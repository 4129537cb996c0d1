package ferry

import (
	"slices"
	"strings"
	"sync/atomic"

	"go.mongodb.org/mongo-driver/v2/version"
)

// The fetcher hands the reader events that alias the driver's reply
// buffers instead of copies of them, when the driver is known to give
// each reply a buffer of its own that it never writes again:
// go.mongodb.org/mongo-driver/v2 reads every server reply into a new
// slice (x/mongo/driver/topology connection.read: make([]byte, size);
// decompression makes a new one too), and a cursor's batch and
// ChangeStream.Current are slices of it. The ChangeStream documents
// Current as valid only until the next Next, which leaves it free to
// reuse buffers one day, so aliasing is on only for the driver versions
// whose source was read (aliasingDrivers); any other version gets copies,
// as does a consumer with CopyEvents. TestDriverRepliesStayPut checks the
// behaviour on the driver this module builds with.
//
// Copying each event was the fetcher's largest cost: an allocation and a
// copy per event on the goroutine whose pace the next getMore waits for,
// and twice the garbage. But an aliased event keeps its whole reply in
// memory: a lane held up (a slow document, a sink that blocks one lane)
// would keep one reply per few of its events, far more than the queue's
// bounds say. So the replies events alias are counted (reply): a server
// batch is aliased only while fewer than maxAliasedReplies earlier ones
// still have events in flight, and copied otherwise; the tracker keeps
// copies of the tokens (a run's in one block), so a finished event does
// not hold its reply.
var aliasingDrivers = []string{"2.10"}

// maxAliasedReplies is how many server replies, at most, events in
// flight alias, the one being read included. A batch is a quarter of the
// queue's events (serverBatch): when the lanes keep pace, the events in
// flight span about two replies and the fetcher starts on a third; when
// the sink holds the queue full, a reply more than three is copied, so
// that the queue's replies held stay three batches. (With a no-op handler
// every batch of BenchmarkConsumerVsRawStream is aliased; with ferry
// bench's stdout sink, whose lanes take turns at one pipe, about half are
// copied.)
const maxAliasedReplies = 3

// reply counts the references to a server reply that events alias: one
// per event taken from it and not yet released (finished, given back or
// abandoned), and one of the fetcher's while it reads the batch. When
// the count falls to zero the reply is no longer held by Ferry, and its
// window's count of aliased replies drops.
type reply struct {
	refs    atomic.Int64
	aliased *atomic.Int32 // the window's count of aliased replies
}

// newReply counts a new aliased reply in aliased, its reference held by
// the fetcher.
func newReply(aliased *atomic.Int32) *reply {
	aliased.Add(1)
	rp := &reply{aliased: aliased}
	rp.refs.Store(1)
	return rp
}

// hold adds n references (events taken from the reply).
func (rp *reply) hold(n int) {
	if rp != nil {
		rp.refs.Add(int64(n))
	}
}

// release drops n references; a nil reply (copied events) has none.
func (rp *reply) release(n int) {
	if rp != nil && n > 0 && rp.refs.Add(-int64(n)) == 0 {
		rp.aliased.Add(-1)
	}
}

// driverAliasable reports whether the driver of version v (version.Driver)
// is one whose replies events may alias.
func driverAliasable(v string) bool {
	major, rest, _ := strings.Cut(v, ".")
	minor, _, _ := strings.Cut(rest, ".")
	return slices.Contains(aliasingDrivers, major+"."+minor)
}

// aliasReplies is whether this process's driver is aliasable.
var aliasReplies = driverAliasable(version.Driver)
