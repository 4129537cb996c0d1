package ferry

// Exported for the external tests.
var (
	NewBackfillEvent = newBackfillEvent
	DeadLetterEntry  = deadLetterEntry
	OldestReachable  = oldestReachable
	OplogStartOf     = oplogStart
)

// DriverAliasable is driverAliasable, for TestDriverAliasable.
var DriverAliasable = driverAliasable
