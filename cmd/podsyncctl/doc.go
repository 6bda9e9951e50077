// Command podsyncctl is the command-line client of podsyncd. Its commands
// live in internal/cli.
package main
