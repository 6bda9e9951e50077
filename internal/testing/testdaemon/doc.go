// Package testdaemon runs an in-process podsyncd for tests: an
// engine.Node on an enginetest.FakeRuntime with its own store, behind the
// real PodSyncService, served on a unix socket or loopback TCP by
// server.New (every interceptor, authorization, TLS) or, bare, on an
// in-memory bufconn listener. The server's, the SDK's and the CLI's tests
// use it, each with the options it needs:
//
//	d := testdaemon.New(t, testdaemon.Options{Logger: zaptest.NewLogger(t)})
//	resp, err := d.Client.GetPod(ctx, &podsyncv1.GetPodRequest{Name: "web"})
//
// The Daemon's fields are the test's handles: the fake runtime (to write
// container logs, inject CRI errors, list what runs), the store (to append
// changes, compact), the paths and the addresses. Options.Wrap puts a
// test's fault injector in front of the service.
//
// Construction is in one file, daemon.go, so that a change of the
// engine's or the server's options touches the tests in one place.
//
// It is a test helper: nothing but tests imports it. A package's internal
// tests (package server) cannot use it, since it imports the server; the
// server's tests that need a daemon are external (package server_test).
package testdaemon
