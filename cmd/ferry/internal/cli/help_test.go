package cli

import (
	"bytes"
	"context"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// runCLI runs a ferry command line in-process.
func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// helpFlags are the flags each command's help must list.
var helpFlags = map[string][]string{
	"run":             {"-c"},
	"validate":        {"-c"},
	"check":           {"-c", "-downtime", "-json"},
	"status":          {"-c"},
	"reset":           {"-c", "-stream", "-yes"},
	"verify":          {"-c", "-stream", "-since", "-from", "-to", "-n"},
	"dlq list":        {"-c", "-stream", "-n", "-json"},
	"dlq replay":      {"-c", "-stream"},
	"snapshot":        {"-c", "-stream", "-filter", "-note", "-wait", "-interval"},
	"snapshot status": {"-c", "-stream", "-json"},
	"snapshot cancel": {"-c", "-stream", "-id"},
}

// TestCommandHelp: "ferry <cmd> -h", "-help", "--help" and "ferry help
// <cmd>" print the same help — synopsis and every flag — on stdout and
// exit 0, for every subcommand, without doing anything else (no
// configuration file is read: ferry.yaml does not exist here).
func TestCommandHelp(t *testing.T) {
	t.Chdir(t.TempDir())
	for name, flags := range helpFlags {
		words := strings.Fields(name)
		var first string
		for _, form := range [][]string{
			append(append([]string{}, words...), "-h"),
			append(append([]string{}, words...), "-help"),
			append(append([]string{}, words...), "--help"),
			append(append([]string{}, words...), "-c", "ferry.yaml", "-h"),
			append([]string{"help"}, words...),
		} {
			code, out, errOut := runCLI(form...)
			if code != 0 || errOut != "" {
				t.Errorf("ferry %s: exit %d, stderr %q; want 0 and nothing", strings.Join(form, " "), code, errOut)
				continue
			}
			if !strings.HasPrefix(out, "Usage: ferry "+name) {
				t.Errorf("ferry %s: help does not start with the synopsis:\n%s", strings.Join(form, " "), out)
			}
			for _, f := range flags {
				if !regexp.MustCompile(`(?m)^  ` + f + `\b`).MatchString(out) {
					t.Errorf("ferry %s: help does not list flag %s:\n%s", strings.Join(form, " "), f, out)
				}
			}
			if first == "" {
				first = out
			} else if out != first {
				t.Errorf("ferry %s prints another help than ferry %s -h:\n%s\n---\n%s", strings.Join(form, " "), name, out, first)
			}
		}
	}
	// The dlq group and version have a help too.
	for _, tc := range []struct{ args, want string }{
		{"dlq -h", "Usage: ferry dlq list|replay"}, {"help dlq", "Usage: ferry dlq list|replay"},
		{"version -h", "Usage: ferry version"}, {"help version", "Usage: ferry version"},
	} {
		if code, out, errOut := runCLI(strings.Fields(tc.args)...); code != 0 || errOut != "" || !strings.HasPrefix(out, tc.want) {
			t.Errorf("ferry %s: exit %d, stdout %q, stderr %q", tc.args, code, out, errOut)
		}
	}
	if _, out, _ := runCLI("dlq", "--help"); !strings.Contains(out, "ferry dlq list") || !strings.Contains(out, "ferry dlq replay") {
		t.Errorf("ferry dlq --help does not list its commands:\n%s", out)
	}
}

// TestBadFlags: an unknown flag exits 2 with the problem and the usage on
// stderr, for every subcommand.
func TestBadFlags(t *testing.T) {
	t.Chdir(t.TempDir())
	for name, flags := range helpFlags {
		args := append(strings.Fields(name), "-bogus")
		code, out, errOut := runCLI(args...)
		if code != 2 {
			t.Errorf("ferry %s: exit %d, want 2\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
		}
		if !strings.Contains(errOut, "flag provided but not defined: -bogus") || !strings.Contains(errOut, "sage") ||
			!strings.Contains(errOut, "  "+flags[0]) {
			t.Errorf("ferry %s: stderr lacks the problem or the usage:\n%s", strings.Join(args, " "), errOut)
		}
		if out != "" {
			t.Errorf("ferry %s: wrote %q on stdout", strings.Join(args, " "), out)
		}
	}
}

// TestUsage: "ferry help" lists every command on stdout (exit 0); no
// command or an unknown one prints it on stderr and exits 2.
func TestUsage(t *testing.T) {
	for _, form := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		code, out, errOut := runCLI(form...)
		if code != 0 || errOut != "" {
			t.Fatalf("ferry %s: exit %d, stderr %q", form[0], code, errOut)
		}
		for _, c := range []string{"ferry run ", "ferry validate ", "ferry check ", "ferry status ", "ferry reset ", "ferry dlq list ",
			"ferry dlq replay ", "ferry snapshot ", "ferry snapshot status ", "ferry snapshot cancel ", "ferry demo ", "ferry bench ", "ferry version ", "ferry help "} {
			if !strings.Contains(out, c) {
				t.Errorf("ferry %s does not list %q:\n%s", form[0], c, out)
			}
		}
		if strings.Contains(out, "demo-member") {
			t.Errorf("ferry %s lists the internal demo-member command", form[0])
		}
	}
	if code, out, errOut := runCLI(); code != 2 || out != "" || !strings.Contains(errOut, "ferry run ") {
		t.Errorf("ferry without a command: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	for _, args := range [][]string{{"nope"}, {"help", "nope"}, {"dlq"}, {"dlq", "nope"}, {"snapshot", "nope"}} {
		if code, out, errOut := runCLI(args...); code != 2 || out != "" || !strings.Contains(errOut, "Usage") {
			t.Errorf("ferry %s: exit %d, stdout %q, stderr %q", strings.Join(args, " "), code, out, errOut)
		}
	}
}

// TestVersion: ferry version, -version and --version print the version
// line and exit 0.
func TestVersion(t *testing.T) {
	line := regexp.MustCompile(`^ferry \S+( rev [0-9a-f]{1,7})?( \d{4}-\d\d-\d\dT\S+)?( dirty)? go\S+\n$`)
	for _, args := range [][]string{{"version"}, {"-version"}, {"--version"}} {
		code, out, errOut := runCLI(args...)
		if code != 0 || errOut != "" || !line.MatchString(out) || !strings.HasSuffix(out, " "+runtime.Version()+"\n") {
			t.Errorf("ferry %s: exit %d, stdout %q, stderr %q", args[0], code, out, errOut)
		}
	}
}

func TestFormatVersion(t *testing.T) {
	for _, tc := range []struct {
		info *debug.BuildInfo
		want string
	}{
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "4a2c5b6e8f0123456789abcdef0123456789abcd"},
			{Key: "vcs.time", Value: "2026-12-01T18:00:00Z"}, {Key: "vcs.modified", Value: "true"}}},
			"ferry (devel) rev 4a2c5b6 2026-12-01T18:00:00Z dirty go1.26.8"},
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "4a2c5b6e8f01"}, {Key: "vcs.time", Value: "2026-12-01T18:00:00Z"}, {Key: "vcs.modified", Value: "false"}}},
			"ferry v1.2.3 rev 4a2c5b6 2026-12-01T18:00:00Z go1.26.8"},
		{&debug.BuildInfo{GoVersion: "go1.26.8"}, "ferry (unknown) go1.26.8"},
		{nil, "ferry (unknown) " + runtime.Version()},
	} {
		if got := formatVersion(tc.info); got != tc.want {
			t.Errorf("formatVersion = %q, want %q", got, tc.want)
		}
	}
}

// TestDemoPointsToItsCommand: the ferry binary does not link the emulator;
// `ferry demo` says where the demo is instead.
func TestDemoPointsToItsCommand(t *testing.T) {
	code, _, errOut := runCLI("demo")
	if code != 2 || !strings.Contains(errOut, "go run ./cmd/ferry/demo") {
		t.Fatalf("ferry demo: exit %d, stderr %q", code, errOut)
	}
}

// TestBenchPointsToItsCommand: `ferry bench` says where the bench is: it
// links the emulator and fake brokers, which the ferry binary does not.
func TestBenchPointsToItsCommand(t *testing.T) {
	code, out, errOut := runCLI("bench")
	if code != 2 || out != "" || !strings.Contains(errOut, "go run ./cmd/ferry/bench") {
		t.Fatalf("ferry bench: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, _ = runCLI("help", "bench")
	if code != 0 || !strings.Contains(out, "-rss-sweep") || !strings.Contains(out, "go run ./cmd/ferry/bench") {
		t.Fatalf("ferry help bench: exit %d, stdout %q", code, out)
	}
}
