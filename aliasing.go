package ferry

import (
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/version"
)

// The fetcher hands the reader events that alias the driver's reply
// buffers instead of copies of them, when the driver is known to give
// each reply a buffer of its own that it never writes again:
// go.mongodb.org/mongo-driver/v2 reads every server reply into a new
// slice (x/mongo/driver/topology connection.read: make([]byte, size);
// decompression makes a new one too), and a cursor's batch and
// ChangeStream.Current are slices of it. The ChangeStream documents
// Current as valid only until the next Next, which leaves it free to
// reuse buffers one day, so aliasing is on only for the driver versions
// whose source was read (aliasingDrivers); any other version gets copies,
// as does a consumer with CopyEvents. TestDriverRepliesStayPut checks the
// behaviour on the driver this module builds with.
//
// Copying each event was the fetcher's largest cost: an allocation and a
// copy per event on the goroutine whose pace the next getMore waits for,
// and twice the garbage. Aliasing keeps a reply alive while any of its
// events, or a token of one (the tracker's checkpoint position), is
// referenced: the memory held is that of the replies spanning the events
// in flight, about what their copies held.
var aliasingDrivers = []string{"2.10"}

// driverAliasable reports whether the driver of version v (version.Driver)
// is one whose replies events may alias.
func driverAliasable(v string) bool {
	major, rest, ok := strings.Cut(v, ".")
	if !ok {
		return false
	}
	minor, _, _ := strings.Cut(rest, ".")
	if _, err := strconv.Atoi(major); err != nil {
		return false
	}
	if _, err := strconv.Atoi(minor); err != nil {
		return false
	}
	for _, ok := range aliasingDrivers {
		if ok == major+"."+minor {
			return true
		}
	}
	return false
}

// aliasReplies is whether this process's driver is aliasable.
var aliasReplies = driverAliasable(version.Driver)
