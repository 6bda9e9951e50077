// Command hollow is a hollow podsync node (internal/testing/hollow), as
// kubemark's hollow kubelet: podsyncd itself with a simulated container
// runtime, for the scale benchmarks (make bench-scale) and the hollow
// cluster test. It takes podsyncd's flags:
//
//	go build -o .tmp/bin/podsyncd-hollow ./hack/hollow
//	.tmp/bin/podsyncd-hollow --listen unix:///tmp/h1/podsync.sock \
//	    --root-dir /tmp/h1/root --pod-log-dir /tmp/h1/pods --node-name hollow-1
//
// It needs neither root nor containerd; podsync-vk serves it as any
// podsync node. Not for running workloads: its containers run no
// processes.
package main
