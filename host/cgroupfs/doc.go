// Package cgroupfs walks the host's cgroup file systems: the hierarchies
// mounted under a root such as /sys/fs/cgroup, and the bottom-up removal
// of a cgroup tree. The syncer removes pod cgroups with it; the tools that
// give an agent its own cgroup root (internal/testing/localcri) use it too.
package cgroupfs
