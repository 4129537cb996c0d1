package cli

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
)

// command is one ferry subcommand: what the usage and its help say about
// it, and how it runs.
type command struct {
	name    string // as typed after "ferry": "reset", "dlq list"
	args    string // its synopsis after the name: "-c ferry.yaml -stream S [-yes]"
	summary string // one line for the list of commands
	doc     string // what it does, for its help
	// run runs the command with the arguments after its name and returns
	// the exit code. Called with the single argument "-h", it prints its
	// flags to stderr and returns without doing anything else: that is how
	// its help lists them (see commandFlags).
	run func(ctx context.Context, args []string, stdout, stderr io.Writer) int
	// sub are the subcommands of a group ("dlq"). A group's run is nil,
	// or runs when no subcommand is named ("ferry snapshot -stream S"
	// beside "ferry snapshot status").
	sub     []*command
	noFlags bool // it has no flags (version, help)
	hidden  bool // not listed and no help
}

// lookup returns the command named name ("reset", "dlq list"), or nil.
func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
		for _, s := range c.sub {
			if s.name == name {
				return s
			}
		}
	}
	return nil
}

// resolve finds the command args name (a group takes its subcommand from
// the next argument) and returns it with the arguments that follow. For an
// unknown command, or a group without a known subcommand, it prints the
// problem and the usage on stderr and returns nil and exit code 2.
func resolve(args []string, stderr io.Writer) (*command, []string, int) {
	cmd := lookup(args[0])
	if cmd == nil || strings.Contains(args[0], " ") {
		fmt.Fprintf(stderr, "ferry: unknown command %q\n\n%s", args[0], usage())
		return nil, nil, 2
	}
	rest := args[1:]
	if len(cmd.sub) == 0 {
		return cmd, rest, 0
	}
	if len(rest) > 0 {
		if sub := lookup(cmd.name + " " + rest[0]); sub != nil {
			return sub, rest[1:], 0
		}
	}
	if cmd.run != nil && (len(rest) == 0 || strings.HasPrefix(rest[0], "-")) {
		return cmd, rest, 0 // the group's own command: its flags follow
	}
	if wantsHelp(rest) {
		return cmd, rest, 0 // ferry dlq -h: the group's help
	}
	if len(rest) == 0 {
		fmt.Fprintf(stderr, "ferry %s: which one?\n\n", cmd.name)
	} else {
		fmt.Fprintf(stderr, "ferry %s: unknown command %q\n\n", cmd.name, rest[0])
	}
	printHelp(stderr, cmd)
	return nil, nil, 2
}

// wantsHelp reports whether args ask for help: -h, -help, --h or --help
// before a "--". Flag values are not told apart from flags, so in
// "-stream -h" the -h asks for help too; no stream is named that.
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--h", "--help":
			return true
		}
	}
	return false
}

// runHelp is "ferry help [command]": the list of commands, or one
// command's help, on stdout.
func runHelp(args []string, stdout, stderr io.Writer) int {
	var words []string
	for _, a := range args {
		if !wantsHelp([]string{a}) {
			words = append(words, a)
		}
	}
	if len(words) == 0 {
		fmt.Fprint(stdout, usage())
		return 0
	}
	name := strings.Join(words, " ")
	cmd := lookup(name)
	if cmd == nil || cmd.hidden {
		fmt.Fprintf(stderr, "ferry help: unknown command %q\n\n%s", name, usage())
		return 2
	}
	printHelp(stdout, cmd)
	return 0
}

// usage is the list of commands.
func usage() string {
	var b strings.Builder
	b.WriteString("ferry — react to MongoDB changes reliably\n\nUsage:\n")
	line := func(c *command) {
		synopsis := "  ferry " + strings.TrimSpace(c.name+" "+c.args)
		const col = 32
		if len(synopsis) < col-1 {
			fmt.Fprintf(&b, "%-*s%s\n", col, synopsis, c.summary)
		} else {
			fmt.Fprintf(&b, "%s\n%*s%s\n", synopsis, col, "", c.summary)
		}
	}
	for _, c := range commands {
		if c.hidden {
			continue
		}
		if len(c.sub) == 0 || c.run != nil {
			line(c)
		}
		for _, s := range c.sub {
			line(s)
		}
	}
	b.WriteString("\nRun \"ferry <command> -h\" or \"ferry help <command>\" for a command's flags.\n")
	return b.String()
}

// printHelp writes cmd's help: its synopsis, what it does, its
// subcommands and its flags.
func printHelp(w io.Writer, cmd *command) {
	fmt.Fprintf(w, "Usage: ferry %s\n\n%s\n", strings.TrimSpace(cmd.name+" "+cmd.args), cmd.doc)
	if len(cmd.sub) > 0 {
		fmt.Fprintln(w, "\nCommands:")
		for _, s := range cmd.sub {
			fmt.Fprintf(w, "  ferry %s %s\n        %s\n", s.name, s.args, s.summary)
		}
		fmt.Fprintf(w, "\nRun \"ferry %s -h\" for a command's flags.\n", cmd.sub[0].name)
	}
	if flags := commandFlags(cmd); flags != "" {
		fmt.Fprintf(w, "\nFlags:\n%s", flags)
	}
}

// commandFlags returns the flag list of cmd as flag.PrintDefaults writes
// it. It asks the command itself (run with "-h"), so the list is the one
// its flag set parses; run and demo define theirs in daemon.go and demo.go.
// The context is already cancelled, so a command that did not stop at "-h"
// would fail at once rather than do work.
func commandFlags(cmd *command) string {
	if cmd.run == nil || cmd.noFlags || cmd.hidden {
		return ""
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out bytes.Buffer
	cmd.run(ctx, []string{"-h"}, &out, &out)
	// Keep the flag lines: PrintDefaults starts each flag with "  -"; what
	// comes before is the flag set's own usage header.
	s := out.String()
	if strings.HasPrefix(s, "  -") {
		return s
	}
	if i := strings.Index(s, "\n  -"); i >= 0 {
		return s[i+1:]
	}
	return ""
}

// newFlagSet returns the flag set of command name. On a bad flag it prints
// the command's synopsis and flags (on the output loadFlags sets: stderr).
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		synopsis := name
		if c := lookup(name); c != nil {
			synopsis = strings.TrimSpace(name + " " + c.args)
		}
		fmt.Fprintf(fs.Output(), "Usage: ferry %s\nRun \"ferry help %s\" for what it does.\n\nFlags:\n", synopsis, name)
		fs.PrintDefaults()
	}
	return fs
}

// isFlagError reports whether err is one of the errors flag.FlagSet.Parse
// returns for a bad command line. run and demo parse their flags in
// daemon.go and demo.go and return that error as is; the flag package has
// no sentinel for it, only these messages (stable since Go 1).
func isFlagError(err error) bool {
	msg := err.Error()
	for _, p := range []string{
		"flag provided but not defined: ", "bad flag syntax: ", "flag needs an argument: ",
		"invalid value ", "invalid boolean value ", "invalid boolean flag ",
	} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}
