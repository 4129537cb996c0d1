package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// verifyResult is what `ferry verify` printed and its exit status.
type verifyResult struct {
	summary string // verify: events=N applied=A dead-lettered=D pending=P missing=M
	events  int
	missing int
	output  string
	err     error // it could not run, or printed no summary
	// windowLost: the oplog no longer holds (a second of) the window.
	windowLost bool
}

var verifySummary = regexp.MustCompile(`(?m)^verify: events=(\d+) applied=(\d+) dead-lettered=(\d+) pending=(\d+) missing=(\d+).*$`)

// verify runs `ferry verify -c <config> -stream chaos -from from` (this
// binary re-executed as the ferry command) with the members stopped: every
// change of the window must be applied (a ledger entry), dead-lettered or
// pending, and with the mongodb sink the projection must equal the source.
// After lost history the oplog no longer reaches back to from: the window
// is then -since the time from it until now, which verify cuts to what the
// oplog holds.
func (e *env) verify(ctx context.Context, from time.Time) verifyResult {
	self, err := os.Executable()
	if err != nil {
		return verifyResult{err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	window := []string{"-from", from.UTC().Format(time.RFC3339)}
	if e.plan.historyLoss {
		window = []string{"-since", e.srv.Now().Sub(from).Round(time.Second).String()}
	}
	cmd := exec.CommandContext(ctx, self, append([]string{"verify", "-c", e.config, "-stream", streamName}, window...)...)
	cmd.Env = childEnviron("FERRY_MEMBER_ID=chaos-verify", "FERRY_CHAOS_SECRET="+e.secret)
	out, err := cmd.CombinedOutput()
	r := verifyResult{output: strings.TrimSpace(string(out))}
	m := verifySummary.FindStringSubmatch(r.output)
	if m == nil {
		r.windowLost = strings.Contains(r.output, "the window cannot be read")
		r.err = fmt.Errorf("no summary line (%v):\n%s", err, indent(r.output))
		return r
	}
	r.summary = m[0]
	r.events, _ = strconv.Atoi(m[1])
	r.missing, _ = strconv.Atoi(m[5])
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		r.err = err
	}
	return r
}
