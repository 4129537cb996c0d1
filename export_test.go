package ferry

import "time"

// Exported for the external tests.
var (
	NewBackfillEvent = newBackfillEvent
	DeadLetterEntry  = deadLetterEntry
	OldestReachable  = oldestReachable
	OplogStartOf     = oplogStart
)

// DriverAliasable is driverAliasable, for TestDriverAliasable.
var DriverAliasable = driverAliasable

// SetRenoteEvery sets how often at most a changed outage error is
// reported again, until the test ends.
func SetRenoteEvery(tb interface{ Cleanup(func()) }, d time.Duration) {
	old := renoteEvery
	renoteEvery = d
	tb.Cleanup(func() { renoteEvery = old })
}

// MaxAliasedReplies is maxAliasedReplies.
const MaxAliasedReplies = maxAliasedReplies
