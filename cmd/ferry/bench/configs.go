package main

import (
	"fmt"
	"strings"
	"time"
)

// A configuration is one way of running `ferry run` the bench measures:
// a sink, a delivery mode, a partition count and a state store. Every
// other setting is the daemon's default: nothing is tuned for the bench.
// The library configuration is the Go library without the daemon, for
// the ceiling the daemon's rows stand under.
type configuration struct {
	name       string // what -only takes
	title      string // the table's first column
	sink       string // the receiver's destination: stdout, webhook, kafka, nats, pubsub or mongodb
	mode       string // delivery.mode
	partitions int    // group.partitions, all in this one process
	bolt       bool   // the state in a bolt file (the single-consumer path) instead of MongoDB
	library    bool   // not the daemon: a ferry.Consumer with a no-op handler (runLibrary)
}

// configurations are every configuration, in the table's order.
var configurations = []configuration{
	{name: "stdout", title: "stdout, at-least-once, bolt state", sink: "stdout", mode: "at-least-once", partitions: 1, bolt: true},
	{name: "webhook", title: "webhook, at-least-once, 1 partition", sink: "webhook", mode: "at-least-once", partitions: 1},
	{name: "webhook-4p", title: "webhook, at-least-once, 4 partitions", sink: "webhook", mode: "at-least-once", partitions: 4},
	{name: "webhook-idempotent", title: "webhook, idempotent, 1 partition", sink: "webhook", mode: "idempotent", partitions: 1},
	{name: "kafka", title: "Kafka (kfake), at-least-once", sink: "kafka", mode: "at-least-once", partitions: 1},
	{name: "nats", title: "NATS JetStream (embedded), at-least-once", sink: "nats", mode: "at-least-once", partitions: 1},
	{name: "pubsub", title: "Pub/Sub (pstest), at-least-once", sink: "pubsub", mode: "at-least-once", partitions: 1},
	{name: "mongodb", title: "MongoDB projection, transactional", sink: "mongodb", mode: "transactional", partitions: 1},
	{name: "library", title: "library, no-op handler, bolt checkpoints", mode: "at-least-once", partitions: 1, bolt: true, library: true},
}

func configurationNames() []string {
	names := make([]string, len(configurations))
	for i, c := range configurations {
		names[i] = c.name
	}
	return names
}

// selectConfigurations returns the configurations a -only list names, in
// the table's order.
func selectConfigurations(list string) ([]configuration, error) {
	want := map[string]bool{}
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" || name == "raw" {
			continue // the raw loop always runs
		}
		found := false
		for _, c := range configurations {
			found = found || c.name == name
		}
		if !found {
			return nil, fmt.Errorf("-only: unknown configuration %q; the configurations are %s", name, strings.Join(configurationNames(), ", "))
		}
		want[name] = true
	}
	var out []configuration
	for _, c := range configurations {
		if want[c.name] {
			out = append(out, c)
		}
	}
	return out, nil
}

// place is where one configuration run's data lives and goes: the source
// cluster, the backlog's namespace, the state store and the receiver's
// addresses.
type place struct {
	uri      string // the source and state cluster
	db, coll string // the backlog
	stateDB  string // the state store's database
	boltPath string // the bolt state file, for bolt configurations
	projDB   string // the mongodb sink's target database (collection "events")
	startAt  time.Time
	logLevel string
	receiver ready
	secret   string // the webhook signing secret
}

// yaml renders the `ferry run` configuration file of c at p.
func (c configuration) yaml(p place) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by ferry bench (%s); every setting not here is ferry run's default.\n", c.name)
	fmt.Fprintf(&b, "listen: \"127.0.0.1:0\"\nlog: {level: %s}\n", p.logLevel)
	if c.bolt {
		fmt.Fprintf(&b, "state: {bolt: {path: %s}}\n", quote(p.boltPath))
	} else {
		fmt.Fprintf(&b, "state: {uri: %s, database: %s}\n", quote(p.uri), quote(p.stateDB))
	}
	fmt.Fprintf(&b, "streams:\n  - name: bench\n    source:\n      uri: %s\n", quote(p.uri))
	fmt.Fprintf(&b, "      scope: {collection: %s}\n", quote(p.db+"."+p.coll))
	fmt.Fprintf(&b, "      start_at: %s\n", p.startAt.UTC().Format(time.RFC3339))
	if c.sink == "mongodb" {
		fmt.Fprintf(&b, "      full_document: updateLookup\n") // the projection requires it
	}
	fmt.Fprintf(&b, "    group: {partitions: %d}\n    delivery: {mode: %s}\n", c.partitions, c.mode)
	if c.bolt {
		fmt.Fprintf(&b, "    on_poison: stall\n") // bolt keeps no dead-letter collection
	}
	switch c.sink {
	case "stdout":
		fmt.Fprintf(&b, "    sink: {stdout: {}}\n")
	case "webhook":
		fmt.Fprintf(&b, "    sink: {webhook: {url: %s, secret: %s}}\n", quote(p.receiver.WebhookURL), quote(p.secret))
	case "kafka":
		fmt.Fprintf(&b, "    sink: {kafka: {brokers: [%s], topic: %s}}\n", quote(p.receiver.KafkaBroker), quote(p.receiver.KafkaTopic))
	case "nats":
		fmt.Fprintf(&b, "    sink: {nats: {url: %s}}\n", quote(p.receiver.NATSURL))
	case "pubsub":
		fmt.Fprintf(&b, "    sink: {pubsub: {project: %s, topic: %s, emulator: %s}}\n",
			quote(pubsubProject), quote(pubsubTopic), quote(p.receiver.PubSubAddr))
	case "mongodb":
		fmt.Fprintf(&b, "    sink: {mongodb: {database: %s, collection: %s}}\n", quote(p.projDB), quote(projCollection))
	default:
		return "", fmt.Errorf("configuration %s: no sink %q", c.name, c.sink)
	}
	return b.String(), nil
}

// quote renders s as a YAML double-quoted scalar whose ${ is not expanded
// (the configuration expands ${NAME} in every value).
func quote(s string) string {
	return fmt.Sprintf("%q", strings.ReplaceAll(s, "${", "$${"))
}
