package lease

import (
	"os"
	"strings"
)

// DefaultMemberID builds a member id for a process that was not given one
// by its configuration: on Cloud Run "<K_SERVICE>:<K_REVISION>:<suffix>",
// elsewhere "<hostname>:<suffix>" (on Kubernetes the hostname is the pod
// name), where suffix is 12 random hex digits. The suffix makes every
// process incarnation a distinct member and a distinct lease owner, which
// fencing relies on: two processes with one owner name would share an
// epoch.
func DefaultMemberID() string {
	suffix := randomHex(6)
	var parts []string
	for _, env := range []string{"K_SERVICE", "K_REVISION"} {
		if v := strings.TrimSpace(os.Getenv(env)); v != "" {
			parts = append(parts, v)
		}
	}
	if len(parts) == 0 {
		host, err := os.Hostname()
		if host = strings.TrimSpace(host); err != nil || host == "" {
			host = "ferry"
		}
		parts = append(parts, host)
	}
	return strings.Join(append(parts, suffix), ":")
}
