// Package mounttable reads the node's mount table and undoes the mounts
// below a directory: the one place that does either, for the syncer's
// tmpfs volumes and bind mounts under a pod's directory, the test support
// that removes a private containerd's root, and the tools that clean up
// after them. The table is parsed by github.com/moby/sys/mountinfo, as
// runc, containerd and the kubelet's mount-utils parse it.
package mounttable
