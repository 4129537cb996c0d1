package pubsub

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/api/option"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/internal/optcheck"
)

// ErrInvalidOption is wrapped by every error New returns about its
// arguments and options.
var ErrInvalidOption = errors.New("pubsub: invalid option")

// An Option configures a Sink. Option functions only record their values:
// New applies the options in order (a later one overrides an earlier one;
// ClientOptions adds) and then validates the result once; its error
// matches ErrInvalidOption and lists every problem, each naming its
// option. A nil option is a problem. Only this package makes Options.
type Option interface{ apply(*config) }

type opt func(*config)

func (f opt) apply(c *config) { f(c) }

type config struct {
	stream      string
	canonical   bool
	timeout     time.Duration
	emulator    string
	emulatorSet bool
	clientOpts  []option.ClientOption
	// Test hooks (export_test.go).
	fault     func(*ferry.Event) error
	noPublish bool
}

func (c *config) validate(p *optcheck.Problems) {
	if c.timeout <= 0 {
		p.Add("Timeout", "must be positive, got %v", c.timeout)
	}
	if c.emulatorSet && (c.emulator == "" || strings.Contains(c.emulator, "/") || !strings.Contains(c.emulator, ":")) {
		p.Add("Emulator", "want host:port, such as localhost:8085, got %s", quote(c.emulator))
	}
	for i, o := range c.clientOpts {
		if o == nil {
			p.Add("ClientOptions", "option %d is nil", i)
		}
	}
}

// Stream names the ferry stream the sink publishes for: every message
// carries it in the ferry-stream attribute, so a subscriber serving several
// streams keys its idempotency records by (stream, event id). The daemon
// sets it to the stream's name. Empty (the default): no such attribute.
func Stream(name string) Option { return opt(func(c *config) { c.stream = name }) }

// Canonical renders message data as canonical rather than relaxed Extended
// JSON. Ordering keys are canonical always.
func Canonical() Option { return opt(func(c *config) { c.canonical = true }) }

// Timeout bounds each publish, until Pub/Sub's ack (default 10s).
func Timeout(d time.Duration) Option { return opt(func(c *config) { c.timeout = d }) }

// Emulator connects to a Pub/Sub emulator (or pstest) at host:port, without
// TLS and without credentials.
func Emulator(hostport string) Option {
	return opt(func(c *config) { c.emulator, c.emulatorSet = hostport, true })
}

// ClientOptions adds options to pubsub.NewClient (credentials, a regional
// endpoint, ...). They come after the sink's own, so they override them.
func ClientOptions(opts ...option.ClientOption) Option {
	return opt(func(c *config) { c.clientOpts = append(c.clientOpts, opts...) })
}

// CheckProject reports why p cannot be a Google Cloud project id or
// number, or nil.
func CheckProject(p string) error {
	switch {
	case p == "":
		return errors.New("empty project id: name the Google Cloud project of the topic, such as my-project")
	case strings.ContainsAny(p, "/ \t\r\n"):
		return fmt.Errorf("must be a project id such as my-project, without '/' or whitespace, got %s", quote(p))
	}
	return nil
}

// CheckTopic reports why topic cannot be the topic of project, or nil: a
// topic id, or its full name projects/<project>/topics/<id> (in project,
// when project is not empty). A topic id has 3 to 255 characters, starts
// with a letter, is made of ASCII letters, digits and - _ . ~ + %, and
// does not start with "goog" (Pub/Sub's resource-name rules).
func CheckTopic(project, topic string) error {
	id := topic
	if strings.HasPrefix(topic, "projects/") {
		parts := strings.Split(topic, "/")
		if len(parts) != 4 || parts[2] != "topics" || parts[3] == "" {
			return fmt.Errorf("must be a topic id such as ferry-events or projects/<project>/topics/<id>, got %s", quote(topic))
		}
		if project != "" && parts[1] != project {
			return fmt.Errorf("names project %s but project is %s: use the topic id alone, or make them agree", quote(parts[1]), quote(project))
		}
		id = parts[3]
	}
	switch {
	case len(id) < 3 || len(id) > 255:
		return fmt.Errorf("a topic id has 3 to 255 characters, got %d (%s)", len(id), quote(id))
	case !(id[0] >= 'a' && id[0] <= 'z' || id[0] >= 'A' && id[0] <= 'Z'):
		return fmt.Errorf("a topic id starts with a letter, got %s", quote(id))
	case strings.HasPrefix(strings.ToLower(id), "goog"):
		return fmt.Errorf(`a topic id cannot start with "goog" (Google reserves it), got %s`, quote(id))
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.~+%", r)) {
			return fmt.Errorf("character %q is not allowed in a topic id (only ASCII letters, digits and - _ . ~ + %%)", r)
		}
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
