package model

import (
	"bytes"
	"compress/gzip"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Keys of what a sandbox records so that a node that lost its store can
// adopt the pod (podsyncd --adopt-runtime).
const (
	// AnnotationPodSpec holds the pod a sandbox was created for: its
	// name, namespace, UID, labels and spec (the annotations are the
	// sandbox's own), as JSON, gzipped, in base64 (see EncodePodSpec). A
	// pod spec holds no Secret or ConfigMap data, only references.
	AnnotationPodSpec = "podsync.io/pod-spec"
	// AnnotationPodSpecMAC signs AnnotationPodSpec, with the sandbox's pod
	// namespace, name and UID, by the node's key (SignPodSpec): adoption
	// rebuilds only what the node itself recorded.
	AnnotationPodSpecMAC = "podsync.io/pod-spec-mac"
	// AnnotationAdopted marks a pod RebuildPod could rebuild only in part
	// from its containers: its value names what was lost. An apply of the
	// pod's spec replaces it.
	AnnotationAdopted = "podsync.io/adopted"
)

// MaxPodSpecAnnotation bounds AnnotationPodSpec: a pod whose encoding is
// longer is created without it (and would be adopted in part).
const MaxPodSpecAnnotation = 256 << 10

// gzipWriters are EncodePodSpec's compressors, pooled: a compressor's
// tables would otherwise be allocated for each sandbox. BestSpeed, whose
// reset costs nothing: the stronger levels clear 640 KiB of hash chains on
// each reset, more than compressing a pod spec costs, for an annotation
// a few percent shorter (BenchmarkEncodePodSpec).
var gzipWriters = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return zw
}}

// EncodePodSpec returns the value of AnnotationPodSpec for pod, and false
// when it would be longer than MaxPodSpecAnnotation.
func EncodePodSpec(pod *corev1.Pod) (string, bool) {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, Labels: pod.Labels},
		Spec:       pod.Spec,
	}
	var buf bytes.Buffer
	zw := gzipWriters.Get().(*gzip.Writer)
	zw.Reset(&buf)
	_, _ = zw.Write(mustJSON(&p))
	_ = zw.Close()
	gzipWriters.Put(zw)
	if base64.StdEncoding.EncodedLen(buf.Len()) > MaxPodSpecAnnotation {
		return "", false
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes()), true
}

// DecodePodSpec decodes a value of AnnotationPodSpec.
func DecodePodSpec(s string) (*corev1.Pod, error) {
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", AnnotationPodSpec, err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", AnnotationPodSpec, err)
	}
	// The pod spec was at most the store's record cap when encoded.
	data, err := io.ReadAll(io.LimitReader(zr, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", AnnotationPodSpec, err)
	}
	pod := &corev1.Pod{}
	if err := json.Unmarshal(data, pod); err != nil {
		return nil, fmt.Errorf("decode %s: %w", AnnotationPodSpec, err)
	}
	return pod, nil
}

// SignPodSpec returns the value of AnnotationPodSpecMAC for spec, the
// value of AnnotationPodSpec of a sandbox of the pod ref: an HMAC-SHA256
// by key of the pod's namespace, name and UID and spec, in base64.
func SignPodSpec(key []byte, ref PodRef, spec string) string {
	m := hmac.New(sha256.New, key)
	for _, s := range []string{ref.Namespace, ref.Name, string(ref.UID), spec} {
		m.Write([]byte(s))
		m.Write([]byte{0})
	}
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// verifiedPodSpec returns the pod a sandbox's AnnotationPodSpec records,
// if the node signed it (AnnotationPodSpecMAC by key) for the pod the
// sandbox's labels name, and the record names that pod too; else why
// not.
func verifiedPodSpec(sb RuntimeSandbox, ref PodRef, key []byte) (*corev1.Pod, error) {
	spec, ok := sb.Annotations[AnnotationPodSpec]
	if !ok {
		return nil, errors.New("the sandbox predates podsync's record of the spec, or its spec was too large to record")
	}
	mac, err := base64.StdEncoding.DecodeString(sb.Annotations[AnnotationPodSpecMAC])
	want, _ := base64.StdEncoding.DecodeString(SignPodSpec(key, ref, spec))
	if err != nil || len(key) == 0 || !hmac.Equal(mac, want) {
		return nil, errors.New("the sandbox's record of the spec is not signed by this node's key")
	}
	p, err := DecodePodSpec(spec)
	if err != nil {
		return nil, err
	}
	if p.Namespace != ref.Namespace || p.Name != ref.Name || p.UID != ref.UID {
		return nil, fmt.Errorf("the sandbox's record of the spec is of pod %s/%s (%s), its labels name %s/%s (%s)",
			p.Namespace, p.Name, p.UID, ref.Namespace, ref.Name, ref.UID)
	}
	return p, nil
}

// RuntimePod is what the runtime holds of one pod under podsync's labels,
// as RebuildPod needs it.
type RuntimePod struct {
	// Sandboxes are the pod's sandboxes.
	Sandboxes []RuntimeSandbox
	// Containers are the pod's container instances, of every sandbox.
	Containers []RuntimeContainer
}

// RuntimeSandbox is one sandbox of a RuntimePod.
type RuntimeSandbox struct {
	Labels, Annotations map[string]string
	Attempt             uint32
	CreatedAt           time.Time
	// Namespaces are the sandbox's namespace modes; nil when unknown.
	Namespaces *runtimeapi.NamespaceOption
}

// RuntimeContainer is one container instance of a RuntimePod.
type RuntimeContainer struct {
	Labels, Annotations map[string]string
	// Image is the image the runtime says the instance runs.
	Image     string
	CreatedAt time.Time
	State     ContainerState
	ExitCode  int32
}

// What RebuildPod cannot recover from containers' annotations, in the
// value of AnnotationAdopted.
const rebuildLost = "probes, lifecycle.postStart, restartPolicy (Always assumed), containers' restartPolicy and restartPolicyRules, " +
	"init containers (inferred from creation order and exit codes), imagePullPolicy (IfNotPresent assumed), " +
	"dnsPolicy, dnsConfig, hostname, subdomain, hostnameOverride, hostAliases, nodeSelector, tolerations, affinity, " +
	"activeDeadlineSeconds, serviceAccountName, readinessGates, resizePolicy, runtimeClassName, overhead"

// RebuildPod rebuilds the pod rp belongs to. From the newest sandbox's
// AnnotationPodSpec (sandboxes podsync created since it records it),
// signed by key for the pod the sandbox's labels name and naming that pod
// itself, the pod is what was applied: lost is empty. Otherwise the pod
// is rebuilt in part from its containers' annotations (the hashed
// ContainerSpec, the preStop hook, the grace period) and the sandbox's
// labels, annotations and namespaces, so that the planner finds every
// running container unchanged; lost says what could not be recovered, and
// why the record was not used, and the pod carries it in
// AnnotationAdopted. The pod's annotations are the sandbox's, which are
// the pod's as applied. RebuildPod fails when rp holds no sandbox.
func RebuildPod(rp RuntimePod, key []byte) (pod *corev1.Pod, lost string, err error) {
	if len(rp.Sandboxes) == 0 {
		return nil, "", errors.New("rebuild pod: no sandbox")
	}
	sb := slices.MaxFunc(rp.Sandboxes, func(a, b RuntimeSandbox) int {
		if a.Attempt != b.Attempt {
			return int(a.Attempt) - int(b.Attempt)
		}
		return a.CreatedAt.Compare(b.CreatedAt)
	})
	ref := PodFromLabels(sb.Labels)
	if ref.UID == "" || ref.Name == "" || ref.Namespace == "" {
		return nil, "", errors.New("rebuild pod: the sandbox's labels name no pod")
	}
	annotations := maps.Clone(sb.Annotations)
	delete(annotations, AnnotationPodSpec)
	delete(annotations, AnnotationPodSpecMAC)
	p, unverified := verifiedPodSpec(sb, ref, key)
	if unverified == nil {
		p.Annotations = annotations
		if len(p.Annotations) == 0 {
			p.Annotations = nil
		}
		p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, rebuildEphemeral(p, rp)...)
		return p, "", nil
	}

	pod = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Namespace: ref.Namespace, UID: ref.UID}}
	for k, v := range sb.Labels {
		switch k {
		case LabelPodName, LabelPodNamespace, LabelPodUID, LabelManaged:
		default:
			if pod.Labels == nil {
				pod.Labels = map[string]string{}
			}
			pod.Labels[k] = v
		}
	}
	if ns := sb.Namespaces; ns != nil {
		pod.Spec.HostNetwork = ns.GetNetwork() == runtimeapi.NamespaceMode_NODE
		pod.Spec.HostPID = ns.GetPid() == runtimeapi.NamespaceMode_NODE
		pod.Spec.HostIPC = ns.GetIpc() == runtimeapi.NamespaceMode_NODE
	}
	pod.Spec.RestartPolicy = corev1.RestartPolicyAlways

	// Each container's newest instance, in the order the containers were
	// first created (the spec's order: init containers, then the others).
	type named struct {
		first  time.Time
		newest RuntimeContainer
	}
	byName := map[string]*named{}
	for _, c := range rp.Containers {
		name := c.Labels[LabelContainerName]
		if name == "" || c.Labels[LabelEphemeral] == "true" {
			continue
		}
		n, ok := byName[name]
		if !ok {
			byName[name] = &named{first: c.CreatedAt, newest: c}
			continue
		}
		if c.CreatedAt.Before(n.first) {
			n.first = c.CreatedAt
		}
		if c.CreatedAt.After(n.newest.CreatedAt) {
			n.newest = c
		}
	}
	names := slices.SortedFunc(maps.Keys(byName), func(a, b string) int {
		if c := byName[a].first.Compare(byName[b].first); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	// The leading containers that completed are init containers.
	inits := 0
	for inits < len(names)-1 {
		n := byName[names[inits]].newest
		if n.State != ContainerExited || n.ExitCode != 0 {
			break
		}
		inits++
	}
	var noSpec []string
	for i, name := range names {
		c, info := containerFromInstance(name, byName[name].newest)
		if s := info.Spec; s != nil {
			if pod.Spec.SecurityContext == nil {
				pod.Spec.SecurityContext = s.PodSecurityContext
			}
			for _, v := range s.Volumes {
				if !slices.ContainsFunc(pod.Spec.Volumes, func(o corev1.Volume) bool { return o.Name == v.Name }) {
					pod.Spec.Volumes = append(pod.Spec.Volumes, v)
				}
			}
		} else {
			noSpec = append(noSpec, name)
		}
		if info.PreStopHandler != nil && c.Lifecycle == nil {
			c.Lifecycle = &corev1.Lifecycle{PreStop: info.PreStopHandler}
		}
		if info.PodTerminationGracePeriod != nil && pod.Spec.TerminationGracePeriodSeconds == nil {
			pod.Spec.TerminationGracePeriodSeconds = info.PodTerminationGracePeriod
		}
		if i < inits {
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, c)
		} else {
			pod.Spec.Containers = append(pod.Spec.Containers, c)
		}
	}
	if len(pod.Spec.Containers) == 0 {
		return nil, "", errors.New("rebuild pod: the runtime holds no container of it")
	}
	pod.Spec.EphemeralContainers = rebuildEphemeral(pod, rp)
	lost = rebuildLost
	if len(noSpec) > 0 {
		lost += "; the whole spec but the image of containers " + strings.Join(noSpec, ", ")
	}
	lost += " (" + unverified.Error() + ")"
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[AnnotationAdopted] = "rebuilt in part from the runtime; not recovered: " + lost
	pod.Annotations = annotations
	return pod, lost, nil
}

// rebuildEphemeral returns the ephemeral (debug) containers of rp that
// pod does not name, from their newest instances' hashed specs: they were
// added after the sandbox was created, so its recorded spec lacks them,
// and without them the planner would kill them as not in the spec. An
// ephemeral container is never restarted, so its target (which only
// matters at its start) is not recovered.
func rebuildEphemeral(pod *corev1.Pod, rp RuntimePod) []corev1.EphemeralContainer {
	newest := map[string]RuntimeContainer{}
	for _, c := range rp.Containers {
		name := c.Labels[LabelContainerName]
		if name == "" || c.Labels[LabelEphemeral] != "true" || SpecContainer(pod, name) != nil {
			continue
		}
		if o, ok := newest[name]; !ok || c.CreatedAt.After(o.CreatedAt) {
			newest[name] = c
		}
	}
	var out []corev1.EphemeralContainer
	for _, name := range slices.Sorted(maps.Keys(newest)) {
		c, _ := containerFromInstance(name, newest[name])
		// The fields of EphemeralContainerCommon are Container's.
		out = append(out, corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon(c)})
	}
	return out
}

// containerFromInstance is the container named name as its instance inst
// was started: the fields of its hashed spec when its annotations carry
// one, else its image and termination message settings only; info is
// what the annotations hold. The spec of an ephemeral container has no
// ports, resources or lifecycle (validation refuses them), so the same
// copy serves it.
func containerFromInstance(name string, inst RuntimeContainer) (c corev1.Container, info ContainerAnnotationInfo) {
	info = ContainerAnnotationsFrom(inst.Annotations)
	c = corev1.Container{Name: name, Image: inst.Image, ImagePullPolicy: corev1.PullIfNotPresent,
		TerminationMessagePath: info.TerminationMessagePath, TerminationMessagePolicy: corev1.TerminationMessagePolicy(info.TerminationMessagePolicy)}
	if s := info.Spec; s != nil {
		c.Image, c.Command, c.Args, c.WorkingDir, c.Ports = s.Image, s.Command, s.Args, s.WorkingDir, s.Ports
		c.EnvFrom, c.Env, c.Resources, c.VolumeMounts, c.VolumeDevices = s.EnvFrom, s.Env, s.Resources, s.VolumeMounts, s.VolumeDevices
		c.SecurityContext, c.Stdin, c.StdinOnce, c.TTY = s.SecurityContext, s.Stdin, s.StdinOnce, s.TTY
		c.TerminationMessagePath, c.TerminationMessagePolicy = s.TerminationMessagePath, s.TerminationMessagePolicy
		c.Lifecycle = s.Lifecycle
	}
	return c, info
}
