package ferryotel

import "runtime/debug"

// version is this module's version as the binary records it ("" when
// unknown: a workspace or replace build).
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, m := range bi.Deps {
		if m.Path == "github.com/ferry-io/ferry/otel" && m.Version != "(devel)" {
			return m.Version
		}
	}
	return ""
}
