package model

import (
	"encoding/json"
	"maps"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The kubelet's label and annotation keys (pkg/kubelet/types/labels.go and
// pkg/kubelet/kuberuntime/labels.go), so that crictl shows pod names,
// namespaces and restart counts for podsync's objects as for the kubelet's.
const (
	LabelPodName       = "io.kubernetes.pod.name"
	LabelPodNamespace  = "io.kubernetes.pod.namespace"
	LabelPodUID        = "io.kubernetes.pod.uid"
	LabelContainerName = "io.kubernetes.container.name"

	AnnotationContainerHash                     = "io.kubernetes.container.hash"
	AnnotationContainerRestartCount             = "io.kubernetes.container.restartCount"
	AnnotationContainerTerminationMessagePath   = "io.kubernetes.container.terminationMessagePath"
	AnnotationContainerTerminationMessagePolicy = "io.kubernetes.container.terminationMessagePolicy"
	AnnotationContainerPreStopHandler           = "io.kubernetes.container.preStopHandler"
	AnnotationContainerPorts                    = "io.kubernetes.container.ports"
	AnnotationPodDeletionGracePeriod            = "io.kubernetes.pod.deletionGracePeriod"
	AnnotationPodTerminationGracePeriod         = "io.kubernetes.pod.terminationGracePeriod"
)

// podsync's own keys.
const (
	// LabelManaged marks the CRI objects podsync created; it never touches
	// others.
	LabelManaged = "podsync.io/managed"
	// LabelEphemeral marks the instances of ephemeral (debug) containers,
	// which no spec a sandbox was created with names: RebuildPod keeps
	// them in the pod it rebuilds after a lost store.
	LabelEphemeral = "podsync.io/ephemeral"
	// AnnotationContainerSpec holds the JSON of the container's
	// ContainerSpec, so that the planner can name changed fields after a
	// restart of podsync.
	AnnotationContainerSpec = "podsync.io/container-spec"
)

// IsManaged reports whether labels carry podsync's owner label.
func IsManaged(labels map[string]string) bool { return labels[LabelManaged] == "true" }

// PodRef identifies the pod a CRI object belongs to.
type PodRef struct {
	Name      string
	Namespace string
	UID       types.UID
}

// PodLabels returns a sandbox's labels, as the kubelet's newPodLabels: the
// pod's labels, the pod's name, namespace and UID, plus podsync's owner
// label.
func PodLabels(pod *corev1.Pod) map[string]string {
	labels := make(map[string]string, len(pod.Labels)+4)
	maps.Copy(labels, pod.Labels)
	labels[LabelPodName] = pod.Name
	labels[LabelPodNamespace] = pod.Namespace
	labels[LabelPodUID] = string(pod.UID)
	labels[LabelManaged] = "true"
	return labels
}

// PodAnnotations returns a sandbox's annotations, as the kubelet's
// newPodAnnotations: the pod's annotations.
func PodAnnotations(pod *corev1.Pod) map[string]string {
	out := make(map[string]string, len(pod.Annotations))
	maps.Copy(out, pod.Annotations)
	return out
}

// PodFromLabels decodes the pod a sandbox or container belongs to.
func PodFromLabels(labels map[string]string) PodRef {
	return PodRef{
		Name:      labels[LabelPodName],
		Namespace: labels[LabelPodNamespace],
		UID:       types.UID(labels[LabelPodUID]),
	}
}

// ContainerLabels returns a container's labels, as the kubelet's
// newContainerLabels, plus podsync's owner label.
func ContainerLabels(pod *corev1.Pod, c *corev1.Container) map[string]string {
	l := map[string]string{
		LabelPodName:       pod.Name,
		LabelPodNamespace:  pod.Namespace,
		LabelPodUID:        string(pod.UID),
		LabelContainerName: c.Name,
		LabelManaged:       "true",
	}
	if EphemeralContainer(pod, c.Name) != nil {
		l[LabelEphemeral] = "true"
	}
	return l
}

// ContainerInfo is what ContainerLabels records.
type ContainerInfo struct {
	PodRef
	ContainerName string
}

// ContainerInfoFromLabels decodes ContainerLabels.
func ContainerInfoFromLabels(labels map[string]string) ContainerInfo {
	return ContainerInfo{PodRef: PodFromLabels(labels), ContainerName: labels[LabelContainerName]}
}

// ContainerAnnotationInfo is what ContainerAnnotations records (the
// kubelet's annotatedContainerInfo, plus the hashed spec).
type ContainerAnnotationInfo struct {
	Hash                      string
	RestartCount              int32
	PodDeletionGracePeriod    *int64
	PodTerminationGracePeriod *int64
	TerminationMessagePath    string
	TerminationMessagePolicy  string
	PreStopHandler            *corev1.LifecycleHandler
	ContainerPorts            []corev1.ContainerPort
	// Spec is nil if the annotation is absent or does not decode.
	Spec *ContainerSpec
}

// ContainerAnnotations returns a container's annotations, as the kubelet's
// newContainerAnnotations with podsync's hash (see ContainerHash) in
// io.kubernetes.container.hash, plus the hashed spec.
func ContainerAnnotations(pod *corev1.Pod, c *corev1.Container, restartCount int32) map[string]string {
	spec := NewContainerSpec(pod, c)
	a := map[string]string{
		AnnotationContainerHash:                     spec.Hash(),
		AnnotationContainerRestartCount:             strconv.Itoa(int(restartCount)),
		AnnotationContainerTerminationMessagePath:   c.TerminationMessagePath,
		AnnotationContainerTerminationMessagePolicy: string(c.TerminationMessagePolicy),
		AnnotationContainerSpec:                     string(mustJSON(spec)),
	}
	if pod.DeletionGracePeriodSeconds != nil {
		a[AnnotationPodDeletionGracePeriod] = strconv.FormatInt(*pod.DeletionGracePeriodSeconds, 10)
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		a[AnnotationPodTerminationGracePeriod] = strconv.FormatInt(*pod.Spec.TerminationGracePeriodSeconds, 10)
	}
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		a[AnnotationContainerPreStopHandler] = string(mustJSON(c.Lifecycle.PreStop))
	}
	if len(c.Ports) > 0 {
		a[AnnotationContainerPorts] = string(mustJSON(c.Ports))
	}
	return a
}

// ContainerAnnotationsFrom decodes ContainerAnnotations. Like the kubelet's
// getContainerInfoFromAnnotations, it leaves a field unset when its value
// does not parse rather than failing.
func ContainerAnnotationsFrom(a map[string]string) ContainerAnnotationInfo {
	info := ContainerAnnotationInfo{
		Hash:                     a[AnnotationContainerHash],
		TerminationMessagePath:   a[AnnotationContainerTerminationMessagePath],
		TerminationMessagePolicy: a[AnnotationContainerTerminationMessagePolicy],
	}
	if n, err := strconv.ParseInt(a[AnnotationContainerRestartCount], 10, 32); err == nil {
		info.RestartCount = int32(n)
	}
	info.PodDeletionGracePeriod = parseInt64(a, AnnotationPodDeletionGracePeriod)
	info.PodTerminationGracePeriod = parseInt64(a, AnnotationPodTerminationGracePeriod)
	if s, ok := a[AnnotationContainerPreStopHandler]; ok {
		var h corev1.LifecycleHandler
		if json.Unmarshal([]byte(s), &h) == nil {
			info.PreStopHandler = &h
		}
	}
	if s, ok := a[AnnotationContainerPorts]; ok {
		var ports []corev1.ContainerPort
		if json.Unmarshal([]byte(s), &ports) == nil {
			info.ContainerPorts = ports
		}
	}
	if s, ok := a[AnnotationContainerSpec]; ok {
		var spec ContainerSpec
		if json.Unmarshal([]byte(s), &spec) == nil {
			info.Spec = &spec
		}
	}
	return info
}

func parseInt64(a map[string]string, key string) *int64 {
	s, ok := a[key]
	if !ok {
		return nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return nil
	}
	return &n
}

// mustJSON marshals API types, which always marshal.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("engine: marshal " + err.Error())
	}
	return b
}
