// Package model is the engine's ground floor: what every engine package
// knows of a pod on the runtime, and nothing that decides or acts
// (reference: kubelet v1.37.2, pkg/kubelet/container, the kubelet's
// kubecontainer, and pkg/kubelet/kuberuntime's labels.go).
//
// It owns:
//
//   - the runtime view (types.go): a pod's sandboxes and container
//     instances, newest first, decoded from CRI statuses
//     (NewRuntimeView, SandboxFromCRI), and the failed image pulls the
//     runtime does not record (PullFailure);
//   - the CRI label and annotation codec (labels.go): the kubelet's own
//     io.kubernetes.* keys plus podsync.io/managed, in encode/decode pairs,
//     so that everything a restart of podsync needs is on the CRI objects;
//   - the container spec hash and the fields a changed spec changed
//     (hash.go, hash_json.go);
//   - the pod's QoS class (qos.go) and the probe results (probes.go);
//   - the pod-spec annotation of a sandbox and the rebuilding of a pod from
//     what the runtime holds (adopt.go), for a node whose store was lost;
//   - small spec helpers every package needs (pod.go): PodString,
//     SpecContainer, IsRestartableInitContainer.
//
// Everything here is a function of its arguments: no I/O, no logging, no
// clock reads, no feature gates. It imports the standard library (but
// os, os/exec, net other than net/netip and net/url, and syscall),
// k8s.io/api, k8s.io/apimachinery, k8s.io/utils and the CRI API types, and
// no package of this module (make check-deps). engine/plan decides from
// it; engine/podstatus, engine/criconfig, the syncer, the watcher and the
// node build on it.
package model
