package natsjs

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// TestScrub checks the safety net behind Connect's errors: credentials in
// an error's text are replaced, the error still matches its sentinels, and
// a url.Error (whose text is the whole URL) is replaced entirely.
func TestScrub(t *testing.T) {
	s, err := New("nats://ferry:pa%2Fss@h:4222,nats://t0k3n@h2")
	if err != nil {
		t.Fatal(err)
	}
	if s.where != "nats://h:4222,nats://h2" {
		t.Errorf("where = %q", s.where)
	}
	in := fmt.Errorf("%w: with pa/ss, pa%%2Fss and t0k3n", nats.ErrAuthorization)
	out := s.scrub(in)
	for _, secret := range []string{"pa/ss", "pa%2Fss", "2Fss", "t0k3n"} {
		if strings.Contains(out.Error(), secret) {
			t.Errorf("scrub left %q: %v", secret, out)
		}
	}
	if !errors.Is(out, nats.ErrAuthorization) || errors.Unwrap(out) != nil {
		t.Errorf("scrubbed error %v: want it to match its sentinel without unwrapping to the original", out)
	}
	clean := errors.New("no secrets here")
	if s.scrub(clean) != clean {
		t.Error("an error without credentials was replaced")
	}
	ue := &url.Error{Op: "parse", URL: "nats://ferry:pa/ss@h", Err: errors.New("invalid port")}
	if got := s.scrub(fmt.Errorf("x: %w", ue)); strings.Contains(got.Error(), "pa/ss") || strings.Contains(got.Error(), "ferry") {
		t.Errorf("url.Error kept: %v", got)
	}
}
