// Package cli holds podsyncctl's commands, so that cmd/podsyncctl stays a
// one-line main and the commands can be tested in-process: Main takes the
// arguments and streams and returns the exit code.
package cli
