// Package cli holds podsyncctl's commands, so that cmd/podsyncctl stays a
// small main and the commands can be tested in-process: Main takes the
// arguments and streams and returns the exit code.
//
// The commands read standard Kubernetes manifests (convert.ReadManifests:
// YAML or JSON, multi-document, kind: List; files, directories, stdin;
// every document checked as podsyncd checks it before anything is sent,
// every problem reported as FILE:LINE: KIND/NAME: FIELD: problem), build the
// API's requests with the Go SDK (client) and print the answers for
// people — kubectl's tables and STATUS column, one line per sync step, a
// plan as a diff — or, with -o json|yaml, as the API's messages in
// protojson. Errors are printed as "error: …", with one line per field
// violation. Exit codes: ExitOK, ExitFailure (also when pods did not reach
// their target), ExitUsage, ExitInterrupted.
//
// The printers are pure functions of API messages and a clock, tested
// against golden files in testdata (go test -update rewrites them); the
// commands are tested against an in-process podsyncd (server.New on an
// engine.Node over a FakeRuntime) and end to end in test/integration/cli.
package cli
