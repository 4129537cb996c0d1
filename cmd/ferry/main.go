// Command ferry delivers MongoDB change events reliably: `ferry run` runs
// every stream of a YAML configuration, and the other subcommands validate
// that file and inspect or repair the state store. `ferry help` lists them;
// `ferry <command> -h` prints one command's usage and flags. The commands
// are package cli; the demo, which embeds the MongoDB emulator, is
// cmd/ferry/demo.
package main

import (
	"os"

	"github.com/ferry-io/ferry/cmd/ferry/internal/cli"
)

func main() { os.Exit(cli.Main()) }
