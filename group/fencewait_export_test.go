package group

import "time"

// SetFenceWaitNotice sets how long a fence raise waits before it logs
// why, for a test; it returns the previous value.
func SetFenceWaitNotice(d time.Duration) time.Duration {
	prev := fenceWaitNotice
	fenceWaitNotice = d
	return prev
}
