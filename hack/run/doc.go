// Command run is `make run`: on a fresh Debian machine, as root, it builds
// podsyncd and podsyncctl into .tmp/bin, starts a private containerd
// (internal/testing/localcri, which installs what it needs), starts podsyncd on a
// socket in .tmp/run, runs the examples with podsyncctl, prints what to
// try next and stays up until ^C; then it deletes the pods, stops podsyncd
// and containerd and removes everything it started.
//
// With --once it does the same and stops right away; it exits non-zero
// when anything failed, including finding a process, mount, link, network
// namespace or cgroup of the run left behind.
package main
