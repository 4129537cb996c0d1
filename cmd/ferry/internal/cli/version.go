package cli

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// versionLine describes this binary from the build information the Go
// toolchain embeds: the module version, the VCS revision (as short as git
// log --oneline prints it), its commit time, "dirty" when the work tree had
// uncommitted changes, and the Go version:
//
//	ferry (devel) rev 4a2c5b6 2026-12-01T18:00:00Z dirty go1.26.8
//
// It never fails: what the binary does not record is left out.
func versionLine() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		info = nil
	}
	return formatVersion(info)
}

// formatVersion is versionLine for the build information info (nil: none).
func formatVersion(info *debug.BuildInfo) string {
	version, goVersion := "(unknown)", runtime.Version()
	var rev, when, dirty string
	if info != nil {
		if info.Main.Version != "" {
			version = info.Main.Version
		}
		if info.GoVersion != "" {
			goVersion = info.GoVersion
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
				if len(rev) > 7 {
					rev = rev[:7]
				}
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "dirty"
				}
			}
		}
	}
	parts := []string{"ferry", version}
	if rev != "" {
		parts = append(parts, "rev", rev)
	}
	for _, p := range []string{when, dirty, goVersion} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, " ")
}
