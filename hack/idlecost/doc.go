// Command idlecost measures what idle pods cost containerd: the CPU time
// (utime+stime) of a private containerd and of its shims over windows in
// which nothing changes, with 30 single-container busybox pods created by
// raw CRI calls with podsync's configs (pod cgroups), the same pods with
// no cgroup parent, no pods, and the pods run by podsyncd. Every phase
// runs on one instance per stats_collect_period at once, so the variants
// share the machine's noise. docs/runtime-cost.md has its results.
//
//	go run ./hack/idlecost -flavour 2 -periods containerd,10s
//	go run ./hack/idlecost -flavour 1.6
package main
