package lease

import "time"

// Clock is the local clock a Held (or a Member) reads to judge, by itself,
// how long ago its last successful renewal was sent. Only differences
// between its readings matter, so it must be monotonic: time.Now's readings
// carry Go's monotonic clock, which ignores wall-clock steps. It is never
// used to decide expiry on the server, which only the server's own clock
// ($$NOW) does. Tests inject a fake clock with WithClock.
type Clock interface {
	// Now returns the current reading.
	Now() time.Time
	// After returns a channel that receives once d has passed.
	After(d time.Duration) <-chan time.Time
}

// systemClock is the real clock: time.Now carries a monotonic reading, so
// Sub between two readings is immune to wall-clock changes.
type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
