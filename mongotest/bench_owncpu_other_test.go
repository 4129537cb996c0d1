//go:build !unix

package mongotest

import "time"

// ownCPU is not measured on this platform.
func ownCPU() time.Duration { return 0 }
