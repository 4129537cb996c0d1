package webhook

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// ErrInvalidOption is wrapped by every option validation error.
var ErrInvalidOption = errors.New("webhook: invalid option")

// Option configures a Sink; New validates all of them.
type Option func(*config) error

type config struct {
	url         *url.URL
	key         []byte
	canonical   bool
	timeout     time.Duration
	maxRetryAft time.Duration
	maxIdle     int
	headers     http.Header
	now         func() time.Time
}

func optErr(option, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidOption, option, fmt.Sprintf(format, args...))
}

// Secret sets the Standard Webhooks signing secret: "whsec_" followed by the
// base64 of 24 to 64 random bytes. Required.
func Secret(secret string) Option {
	return func(c *config) error {
		key, err := DecodeSecret(secret)
		if err != nil {
			return err
		}
		c.key = key
		return nil
	}
}

// DecodeSecret returns the HMAC key of a "whsec_" secret. Its errors never
// contain the secret.
func DecodeSecret(secret string) ([]byte, error) {
	rest, ok := strings.CutPrefix(secret, "whsec_")
	if !ok {
		return nil, optErr("Secret", `must start with "whsec_" followed by base64`)
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		return nil, optErr("Secret", "the part after \"whsec_\" is not valid base64")
	}
	if len(key) < 24 || len(key) > 64 {
		return nil, optErr("Secret", "must encode 24 to 64 bytes, got %d", len(key))
	}
	return key, nil
}

// Canonical sends canonical Extended JSON ({"$numberInt":"1"}) instead of
// the default relaxed Extended JSON (1), preserving every BSON type exactly.
func Canonical() Option {
	return func(c *config) error { c.canonical = true; return nil }
}

// Timeout bounds each request, from dialing to reading the response
// (default 10s). A request that times out is a retryable failure.
func Timeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return optErr("Timeout", "must be positive, got %s", d)
		}
		c.timeout = d
		return nil
	}
}

// MaxRetryAfter caps the delay taken from a Retry-After header (default
// 60s); a longer or unparsable value is replaced by the cap.
func MaxRetryAfter(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return optErr("MaxRetryAfter", "must be positive, got %s", d)
		}
		c.maxRetryAft = d
		return nil
	}
}

// MaxIdleConns sets how many idle keep-alive connections to the receiver are
// kept for reuse (default 16).
func MaxIdleConns(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return optErr("MaxIdleConns", "must be at least 1, got %d", n)
		}
		c.maxIdle = n
		return nil
	}
}

// reserved headers are set by the sink itself; Header refuses them (package
// config keeps the same list, so `ferry validate` refuses them too).
// User-Agent is not reserved: a Header value replaces the default
// "ferry-webhook/1".
var reserved = map[string]bool{
	"Content-Type": true, "Content-Length": true, "Host": true,
	"Webhook-Id": true, "Webhook-Timestamp": true, "Webhook-Signature": true,
	"Idempotency-Key": true, "Ferry-Epoch": true,
}

// Header adds a header to every request (for example an authorization token
// for a gateway in front of the receiver). Its value is never logged. The
// name must be an HTTP token and not one the sink sets (Content-Type,
// Content-Length, Host, webhook-id, webhook-timestamp, webhook-signature,
// Idempotency-Key, Ferry-Epoch); the value must not contain control
// characters other than tab. A User-Agent header replaces the default
// "ferry-webhook/1".
func Header(name, value string) Option {
	return func(c *config) error {
		canon := http.CanonicalHeaderKey(name)
		if !validHeaderName(name) {
			return optErr("Header", "invalid header name %q", name)
		}
		if reserved[canon] {
			return optErr("Header", "%s is set by the sink", canon)
		}
		if strings.ContainsAny(value, "\r\n") {
			return optErr("Header", "value of %s contains a line break", canon)
		}
		if strings.ContainsFunc(value, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
			return optErr("Header", "value of %s contains a control character", canon)
		}
		c.headers.Add(canon, value)
		return nil
	}
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

func parseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: url: must be an absolute http(s) URL", ErrInvalidOption)
	}
	return u, nil
}
