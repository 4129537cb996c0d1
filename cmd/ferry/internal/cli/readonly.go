package cli

import "github.com/ferry-io/ferry/cmd/ferry/config"

// notReadByTools are the parts of a configuration that the commands which
// only read the state store and the source (status, dlq list, verify,
// position, reset, snapshot) never use: the daemon's ops port, logging and
// tracing, the member id, how deliveries are retried and batched and how
// snapshots are paced, and the sinks.
// An unset ${VAR} there does not stop them (config.Unused): an operator
// can run `ferry status` without the webhook's signing secret or the
// member id in the environment. Anywhere else an unset variable is still
// an error naming it.
var notReadByTools = []string{
	"listen", "log", "tracing",
	"streams[].group.member_id", "streams[].group.lease_ttl",
	"streams[].retry", "streams[].queue", "streams[].batch", "streams[].snapshot",
}

// readOnly loads a configuration for status, dlq list, position and
// reset: the sink is not read either.
var readOnly = config.Unused(append([]string{"streams[].sink"}, notReadByTools...)...)

// readOnlyButProjection loads a configuration for verify, which reads the
// mongodb sink's database and collection (to compare the projection with
// the source) but no other sink.
var readOnlyButProjection = config.Unused(append([]string{"streams[].sink.webhook", "streams[].sink.stdout",
	"streams[].sink.nats", "streams[].sink.kafka", "streams[].sink.pubsub"}, notReadByTools...)...)
