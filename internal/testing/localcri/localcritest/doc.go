// Package localcritest runs a test package against its own private
// containerd (internal/testing/localcri): one instance per package, started before
// the tests and torn down after them, with goleak checking after teardown.
//
// A package's TestMain is:
//
//	var inst *localcri.Instance
//
//	func TestMain(m *testing.M) {
//		localcritest.Main(m, localcritest.Config{
//			Package: "test/integration/engine",
//			Started: func(i *localcri.Instance) error { inst = i; return nil },
//		})
//	}
//
// The packages that run podsyncd as operators do, a child process built
// once with Build, start it with StartPodsyncd: the flags every test
// podsyncd needs (runtime endpoint, socket, directories, node address),
// its environment and log, and a Podsyncd to wait on its health, signal,
// stop or kill it and read its exit. Its options cover a podsyncd that
// must not die (an exit fails the test) and one that a test crashes and
// restarts on the same directories.
package localcritest
