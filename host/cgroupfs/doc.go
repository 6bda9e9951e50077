// Package cgroupfs walks the host's cgroup file systems: the hierarchies
// mounted under a root such as /sys/fs/cgroup, the bottom-up removal of a
// cgroup tree, the lock an agent holds on its cgroup root (Lock) and the
// mark a kubelet leaves on its (KubeletMark). The syncer removes pod
// cgroups with it, podsyncd claims its cgroup root with it
// (internal/daemon), and the tools that give an agent its own cgroup root
// (internal/testing/localcri, testdaemon) use it too.
package cgroupfs
