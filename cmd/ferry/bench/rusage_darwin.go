package main

import "syscall"

// maxRSSBytes is getrusage's ru_maxrss in bytes (macOS counts bytes).
func maxRSSBytes(ru syscall.Rusage) int64 { return ru.Maxrss }
