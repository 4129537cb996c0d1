package main

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"
)

// usage is a process's CPU time so far and its peak resident set size.
type usage struct {
	UserNS  int64 `json:"user_ns"`
	SysNS   int64 `json:"sys_ns"`
	PeakRSS int64 `json:"peak_rss_bytes"` // since the last resetPeakRSS (Linux), else the process's lifetime peak
}

// cpu is the user plus system CPU time.
func (u usage) cpu() time.Duration { return time.Duration(u.UserNS + u.SysNS) }

// selfUsage is this process's usage (getrusage RUSAGE_SELF: every thread).
func selfUsage() usage {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	u := usage{UserNS: ru.Utime.Nano(), SysNS: ru.Stime.Nano(), PeakRSS: maxRSSBytes(ru)}
	if hwm, ok := statusKB("VmHWM:"); ok {
		u.PeakRSS = hwm << 10
	}
	return u
}

// peakRSSResettable says whether resetPeakRSS works here: the peak RSS
// figures are then per configuration, not the process's lifetime peak.
func peakRSSResettable() bool {
	_, ok := statusKB("VmHWM:")
	return ok && resetPeakRSS() == nil
}

// resetPeakRSS returns the memory the Go runtime holds but does not use to
// the operating system, then resets the kernel's peak RSS of this process
// (VmHWM) to its current RSS (Linux 4.0+: clear_refs 5).
func resetPeakRSS() error {
	runtime.GC()
	debug.FreeOSMemory()
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// currentRSS is this process's resident set size now (Linux), or 0.
func currentRSS() int64 {
	kb, _ := statusKB("VmRSS:")
	return kb << 10
}

// statusKB reads one "Name: N kB" line of /proc/self/status.
func statusKB(name string) (int64, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte(name)) {
			continue
		}
		f := bytes.Fields(line[len(name):])
		if len(f) == 0 {
			return 0, false
		}
		n, err := strconv.ParseInt(string(f[0]), 10, 64)
		return n, err == nil
	}
	return 0, false
}
