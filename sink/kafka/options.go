package kafka

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/internal/optcheck"
)

// ErrInvalidOption is wrapped by every error New returns about its
// arguments and options.
var ErrInvalidOption = errors.New("kafka: invalid option")

// An Option configures a Sink. Option functions only record their values:
// New applies the options in order (a later one overrides an earlier one;
// ClientOptions adds) and then validates the result once; its error
// matches ErrInvalidOption and lists every problem, each naming its
// option. A nil option is a problem. Only this package makes Options.
type Option interface{ apply(*config) }

type option func(*config)

func (f option) apply(c *config) { f(c) }

type config struct {
	topic      string
	topicSet   bool
	canonical  bool
	timeout    time.Duration
	clientOpts []kgo.Opt
	// Test hooks (export_test.go).
	fault     func(*ferry.Event) error
	noProduce bool
}

func (c *config) validate(p *optcheck.Problems) {
	if !c.topicSet {
		p.Add("Topic", "required: the topic every event is produced to, such as ferry.events")
	} else {
		p.AddErr("Topic", CheckTopic(c.topic))
	}
	if c.timeout <= 0 {
		p.Add("Timeout", "must be positive, got %v", c.timeout)
	}
	for i, o := range c.clientOpts {
		if o == nil {
			p.Add("ClientOptions", "option %d is nil", i)
		}
	}
}

// Topic sets the topic every event is produced to (required; see
// CheckTopic).
func Topic(name string) Option { return option(func(c *config) { c.topic, c.topicSet = name, true }) }

// Canonical renders record values as canonical rather than relaxed Extended
// JSON. Keys are canonical always.
func Canonical() Option { return option(func(c *config) { c.canonical = true }) }

// Timeout bounds each produce, until the broker's ack (default 10s). The
// records of one Write share one deadline, Timeout after the first is
// produced.
func Timeout(d time.Duration) Option { return option(func(c *config) { c.timeout = d }) }

// ClientOptions adds options to kgo.NewClient (SASL, TLS, client id,
// linger, ...). They come after the sink's own, so they override them;
// do not disable idempotence or lower the required acks, or the guarantees
// of the package doc no longer hold.
func ClientOptions(opts ...kgo.Opt) Option {
	return option(func(c *config) { c.clientOpts = append(c.clientOpts, opts...) })
}

// maxTopicLen is Kafka's limit on a topic name's length.
const maxTopicLen = 249

// CheckTopic reports why name cannot be a Kafka topic, or nil: Kafka's
// rules are 1 to 249 ASCII letters, digits, '.', '_' and '-', and not "."
// or "..".
func CheckTopic(name string) error {
	switch {
	case name == "":
		return errors.New("must not be empty: name the topic every event is produced to, such as ferry.events")
	case name == "." || name == "..":
		return errors.New(`cannot be "." or ".." (Kafka reserves them); choose a name such as ferry.events`)
	case len(name) > maxTopicLen:
		return fmt.Errorf("must be at most %d characters, got %d", maxTopicLen, len(name))
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("may contain only ASCII letters, digits, '.', '_' and '-', got %s", quote(name))
		}
	}
	return nil
}

// CheckBroker reports why addr cannot be a seed broker, or nil: one
// host:port address, the port required (Kafka clients disagree on a
// default), without a scheme.
func CheckBroker(addr string) error {
	const example = `"kafka-1:9092"`
	switch {
	case strings.TrimSpace(addr) == "":
		return fmt.Errorf("must not be empty: write a host:port address such as %s", example)
	case strings.Contains(addr, ","):
		return fmt.Errorf("holds several addresses (%s): list each broker as its own item", quote(addr))
	case strings.Contains(addr, "://"):
		return fmt.Errorf("must be host:port without a scheme, such as %s, got %s", example, quote(addr))
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		if !strings.Contains(addr, ":") {
			return fmt.Errorf("has no port: write host:port, such as %s (Kafka's default port is 9092), got %s", example, quote(addr))
		}
		return fmt.Errorf(`must be a host:port address such as %s (an IPv6 host in brackets: "[::1]:9092"), got %s`, example, quote(addr))
	}
	if host == "" || strings.ContainsAny(host, " /\t") {
		return fmt.Errorf("must name a host before the port, such as %s, got %s", example, quote(addr))
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("the port must be a number from 1 to 65535, got %s", quote(port))
	}
	return nil
}

// quote quotes s for an error, cut to 60 bytes.
func quote(s string) string {
	if len(s) > 60 {
		s = s[:60] + "…"
	}
	return strconv.Quote(s)
}
