package ferry_test

import (
	"strings"
	"testing"

	"github.com/ferry-io/ferry"
)

// TestRedactTokens: a resume token the server quotes in an error message
// (as in "the resume token was not found. {_data: \"8263…\"}") keeps only
// its first 12 hex digits; other text is untouched.
func TestRedactTokens(t *testing.T) {
	tok := "826700A1B2000000012B022C0100296E5A1004" + strings.Repeat("AB", 40) + "04"
	for _, msg := range []string{
		`cannot resume stream; the resume token was not found. {_data: "` + tok + `"}`,
		`{"_data":"` + tok + `"}`,
	} {
		got := ferry.RedactTokens(msg)
		if strings.Contains(got, tok[:13]) || !strings.Contains(got, tok[:12]+"…") {
			t.Errorf("RedactTokens(%q) = %q: want the token cut to 12 hex digits", msg, got)
		}
	}
	if s := "checkpoint fenced: version 3, epoch 7 (_data missing)"; ferry.RedactTokens(s) != s {
		t.Errorf("RedactTokens changed a message without a token: %q", ferry.RedactTokens(s))
	}
}
