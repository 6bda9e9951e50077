// Command podsyncctl is the command-line client of podsyncd. Its commands
// live in internal/cli.
package main

import (
	"os"

	"github.com/podsync/podsync/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
