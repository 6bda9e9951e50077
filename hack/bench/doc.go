// Command bench measures podsync on a private containerd
// (internal/testing/localcri) and writes BENCHMARKS.md: pods brought to running
// by podsyncd's RunPods against a raw CRI baseline and a crictl loop,
// podsyncd's and containerd's CPU per pod, the latency from a container's
// exit to its WatchPods status and its restart, the planner and
// conversion micro-benchmarks, and GetPod/ListPods under load with 250
// pods.
//
// Run it as root through `make bench` (about 2 hours on a 2-core machine
// with 7 rounds, the minimal floor's pieces and N = 100; -deadline trims
// the last rounds), or `make bench BENCH_FLAGS=-quick` while developing.
// Flags:
//
//	-quick              fewer runs and smaller N, for development
//	-out FILE           where the report goes (default <repo>/BENCHMARKS.md)
//	-runs N             runs per measured row (default 7, the rounds a
//	                    target's verdict needs; quick 2)
//	-runs-large N       runs per pods-to-running row at N ≥ 100 (default 7)
//	-n 1,10,30,100      pods per pods-to-running run (quick: 1,10); at N = 10
//	                    to 30 every round also runs the minimal floor and
//	                    each piece of podsync's configs (floor.go)
//	-api-pods N         running pods under API load (default 250, quick 40)
//	-flavours 2,1.6     containerd flavours: the full matrix runs on the
//	                    first, N = 1 and the latency and restart rows on
//	                    the others (which run first)
//	-sections LIST      micro,run,latency,api,restart,idle (default all)
//	-profile DIR        save podsyncd CPU profiles (pprof) of the RunPods of
//	                    the largest N and of the API load into DIR
//	-podsyncd PATH      the podsyncd binary (default: built into .tmp/bench)
//	-deadline D         start no round or section after D (default 150m,
//	                    quick 15m); what is skipped is reported
//
// With -scale (make bench-scale) it measures many nodes instead, and needs
// neither root nor containerd: hollow podsync nodes (hack/hollow) behind
// podsync-vk against kwok's simulated nodes, each on a control plane of
// its own (scale*.go), and writes BENCHMARKS-scale.md:
//
//	-scale              run the scale benchmark
//	-scale-nodes LIST   node counts (default 25,50,100)
//	-scale-pods N       pods per node (default 30)
//	-scale-vks N        podsync-vk processes sharing the nodes (default 1)
//	-scale-placement P  pinned (a Deployment per node) or spread (the scheduler)
//	-scale-runs N       interleaved rounds per node count (default 1)
//	-scale-idle D       the agents' CPU measured idle for D, before the pods and once they run (default 15s; 0: not)
//	-kwok-version V     sigs.k8s.io/kwok built into .tmp/kwok (default v0.8.0)
//
// With -cluster (make bench-cluster, root) it measures one cluster: the
// control plane, a podsync node behind podsync-vk and a kubelet node
// registered with the same API server, each on a private containerd
// (cluster*.go), and writes BENCHMARKS-cluster.md:
//
//	-cluster            run the cluster benchmark
//	-cluster-n LIST     replicas each node's Deployment is scaled to from 0 (default 30,100)
//	-cluster-rounds N   interleaved rounds (default 3)
//	-cluster-samples N  kubectl logs and exec calls timed per run (default 5)
//	-kubelet PATH       the kubelet (default: built by hack/kube/build.sh kubelet)
//
// Every run is timed without its cleanup; a row that fails is reported as
// failed with its error and the rest of the report goes on. The raw CRI
// baseline builds its configs with the engine's own SandboxConfig and
// ContainerConfig (minus the podsync.io/managed label, so podsyncd leaves
// those pods alone) so both sides run identical sandboxes and containers.
package main
