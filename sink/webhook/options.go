package webhook

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ferry-io/ferry/internal/optcheck"
)

// ErrInvalidOption is wrapped by every error New returns about its
// arguments and options.
var ErrInvalidOption = errors.New("webhook: invalid option")

// An Option configures a Sink. Option functions only record their values:
// New applies the options in order (a later one overrides an earlier one;
// Header adds) and then validates the result once; its error matches
// ErrInvalidOption and lists every problem, each naming its option, never
// a secret or a header value. A nil option is a problem. Only this package
// makes Options.
type Option interface{ apply(*config) }

type option func(*config)

func (f option) apply(c *config) { f(c) }

type header struct{ name, value string }

type config struct {
	secret      string
	secretSet   bool
	canonical   bool
	timeout     time.Duration
	maxRetryAft time.Duration
	maxIdle     int
	headerList  []header
	stream      string
	now         func() time.Time

	// Resolved by validate.
	url     *url.URL
	key     []byte
	headers http.Header
}

func defaultConfig() config {
	return config{timeout: DefaultTimeout, maxRetryAft: DefaultMaxRetryAfter, maxIdle: DefaultMaxIdleConns, now: time.Now}
}

// validate records every problem in p and resolves the URL, the key and
// the headers.
func (c *config) validate(p *optcheck.Problems, rawURL string) {
	if err := CheckURL(rawURL); err != nil {
		p.AddErr("url", err)
	} else {
		c.url, _ = url.Parse(rawURL)
	}
	if !c.secretSet {
		p.Add("Secret", "required: the shared signing secret, %s", secretWant)
	} else if key, err := DecodeSecret(c.secret); err != nil {
		p.AddErr("Secret", err)
	} else {
		c.key = key
	}
	if c.timeout <= 0 {
		p.Add("Timeout", "must be positive, got %v", c.timeout)
	}
	if c.maxRetryAft <= 0 {
		p.Add("MaxRetryAfter", "must be positive, got %v", c.maxRetryAft)
	}
	if !validHeaderValue(c.stream) {
		p.Add("Stream", "the name must not contain line breaks or other control characters")
	}
	if c.maxIdle < 1 {
		p.Add("MaxIdleConns", "must be at least 1, got %d", c.maxIdle)
	}
	if c.now == nil {
		c.now = time.Now
	}
	c.headers = http.Header{}
	for _, h := range c.headerList {
		if err := CheckHeader(h.name, h.value); err != nil {
			p.AddErr(fmt.Sprintf("Header(%q)", h.name), err)
			continue
		}
		c.headers.Add(http.CanonicalHeaderKey(h.name), h.value)
	}
}

// Secret sets the Standard Webhooks signing secret: "whsec_" followed by the
// base64 of 24 to 64 random bytes. Required.
func Secret(secret string) Option {
	return option(func(c *config) { c.secret, c.secretSet = secret, true })
}

const secretWant = `"whsec_" followed by the base64 of 24 to 64 random bytes; generate one with printf 'whsec_%s' "$(head -c 32 /dev/urandom | base64)"`

// DecodeSecret returns the HMAC key of a "whsec_" secret. Its errors say
// what is wrong and how to make a secret; they never contain the secret.
func DecodeSecret(secret string) ([]byte, error) {
	const want = "the secret must be " + secretWant
	rest, ok := strings.CutPrefix(secret, "whsec_")
	if !ok {
		return nil, errors.New(`does not start with "whsec_": ` + want)
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		return nil, errors.New(`the part after "whsec_" is not valid base64: ` + want)
	}
	if len(key) < 24 || len(key) > 64 {
		return nil, fmt.Errorf("encodes %d bytes: %s", len(key), want)
	}
	return key, nil
}

// Stream names the ferry stream the sink delivers for: every request
// carries it in a Ferry-Stream header, so a receiver serving several streams
// keys its idempotency records by (stream, event id) — one change has the
// same event id in every stream that sees it. The daemon sets it to the
// stream's name. Empty (the default): no Ferry-Stream header.
func Stream(name string) Option { return option(func(c *config) { c.stream = name }) }

// Canonical sends canonical Extended JSON ({"$numberInt":"1"}) instead of
// the default relaxed Extended JSON (1), preserving every BSON type exactly.
func Canonical() Option { return option(func(c *config) { c.canonical = true }) }

// Timeout bounds each request, from dialing to reading the response
// (default 10s). A request that times out is a retryable failure.
func Timeout(d time.Duration) Option { return option(func(c *config) { c.timeout = d }) }

// MaxRetryAfter caps the delay taken from a Retry-After header (default
// 60s); a longer or unparsable value is replaced by the cap.
func MaxRetryAfter(d time.Duration) Option { return option(func(c *config) { c.maxRetryAft = d }) }

// MaxIdleConns sets how many idle keep-alive connections to the receiver are
// kept for reuse (default DefaultMaxIdleConns): at least the number of
// lanes that post at once (see the package doc).
func MaxIdleConns(n int) Option { return option(func(c *config) { c.maxIdle = n }) }

// reserved headers are set by the sink itself; Header refuses them.
// User-Agent is not reserved: a Header value replaces the default
// "ferry-webhook/1".
var reserved = map[string]bool{
	"Content-Type": true, "Content-Length": true, "Host": true,
	"Webhook-Id": true, "Webhook-Timestamp": true, "Webhook-Signature": true,
	"Idempotency-Key": true, "Ferry-Epoch": true, "Ferry-Stream": true, "Ferry-Operation": true,
	"Ferry-Namespace": true,
}

// Header adds a header to every request (for example an authorization token
// for a gateway in front of the receiver). Its value is never logged. The
// name and value must pass CheckHeader. A User-Agent header replaces the
// default "ferry-webhook/1".
func Header(name, value string) Option {
	return option(func(c *config) { c.headerList = append(c.headerList, header{name, value}) })
}

// CheckHeader reports why Header(name, value) would be refused, or nil:
// the name must be an HTTP token (RFC 9110) and not one the sink sets
// (Content-Type, Content-Length, Host, webhook-id, webhook-timestamp,
// webhook-signature, Idempotency-Key, Ferry-Epoch, Ferry-Stream,
// Ferry-Operation, Ferry-Namespace; in any case); the value
// must not contain control characters other than tab. Its errors contain
// neither the name nor the value.
func CheckHeader(name, value string) error {
	if !validHeaderName(name) {
		return errors.New("is not a valid HTTP header name (a token of ASCII letters, digits and !#$%&'*+-.^_`|~)")
	}
	if reserved[http.CanonicalHeaderKey(name)] {
		return errors.New("is set by the webhook sink and cannot be overridden")
	}
	if !validHeaderValue(value) {
		return errors.New("the value must not contain line breaks or other control characters (tabs are allowed)")
	}
	return nil
}

// validHeaderValue reports whether v can be sent as a header value as it
// is (no control characters).
func validHeaderValue(v string) bool {
	return !strings.ContainsFunc(v, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f })
}

// validHeaderName reports whether s is an HTTP token (RFC 9110), as
// net/http requires of a header name when it sends the request.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c > 127 || !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", c)) {
			return false
		}
	}
	return true
}

// CheckURL reports why New would refuse raw as the receiver's URL, or nil:
// it must be an absolute http or https URL with a host, a port (if any)
// from 1 to 65535, and no #fragment.
func CheckURL(raw string) error {
	const want = "must be an absolute http(s) URL"
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return errors.New(want)
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return errors.New(want + ": bad port")
		}
	}
	if u.Fragment != "" {
		return errors.New(want + " without a #fragment")
	}
	return nil
}
