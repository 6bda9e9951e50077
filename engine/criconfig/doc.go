// Package criconfig builds the CRI configs of a pod as the kubelet's
// generatePodSandboxConfig and generateContainerConfig do (reference:
// kubelet v1.37.2, pkg/kubelet/kuberuntime): labels and annotations,
// hostname and DNS, port mappings, namespaces, sysctls, the cgroup parent
// by QoS class and the CPU and memory resources, the environment with
// $(VAR) expansion (criconfig/expansion) and the downward API, mounts and
// log paths. Options are the node settings these depend on (the
// counterparts of kubelet flags), and the paths under the root directory
// the syncer writes pod files to are named here (PodDir, VolumeDir,
// TerminationMessageFile).
//
// It is pure: it reads no files (the host's resolv.conf arrives parsed in
// Options.HostDNS; subPath resolution, which must look at the file system,
// is a function the caller passes in ContainerConfigInput). It may import
// what engine/plan may and engine/plan, engine/errdefs and validation/;
// make check-deps checks it.
//
// Differences from the kubelet, all for determinism or because podsync has
// no API server: environment variables are ordered (envFrom sources in
// order, keys sorted within a source, then env in declaration order) where
// the kubelet ranges over a map; merged DNS options are sorted; the
// termination-log file of a container is named after its restart count
// instead of a random number; the host's resolv.conf is passed in Options
// rather than read.
package criconfig
