// Package enginetest holds what engine tests share: the Runtime interface the
// engine drives, FakeRuntime, a test double of it that behaves like
// containerd where the engine depends on it, and RuntimeConformance, a table
// of behaviours every Runtime must show.
//
// RuntimeConformance keeps the double honest (etcd's trick): it runs on
// FakeRuntime in this package's unit tests and on a real containerd (both
// 2.x and 1.6) in test/integration under the build tag integration. Rows the
// double cannot honour are marked RealOnly with their reason and run only on
// real runtimes.
//
// FakeRuntime wraps k8s.io/cri-api's FakeRuntimeService and FakeImageService
// and adds what they lack: stopping a sandbox stops its containers, removing
// one removes them, stopped containers get an exit code, a reason and a
// finish time, containers write their output in CRI log format to their log
// path, unknown ids give NotFound (as containerd's gRPC status), and
// GetContainerEvents streams events. It runs no processes: a container's
// command is interpreted (see FakeRuntime.StartContainer), and
// ExitContainer makes a running container exit with any code and log lines.
//
// This package imports google.golang.org/grpc/status and codes to build
// the gRPC status errors containerd returns; the engine itself only tests
// them with k8s.io/cri-api/pkg/errors.
package enginetest
