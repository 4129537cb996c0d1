//go:build unix

package mongotest

import (
	"syscall"
	"time"
)

// ownCPU returns the CPU time (user and system) the test process has used.
func ownCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
