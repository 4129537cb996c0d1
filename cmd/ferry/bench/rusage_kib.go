//go:build unix && !darwin && !ios

package main

import "syscall"

// maxRSSBytes is getrusage's ru_maxrss in bytes (Linux and the BSDs count
// KiB).
func maxRSSBytes(ru syscall.Rusage) int64 { return int64(ru.Maxrss) << 10 }
