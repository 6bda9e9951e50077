package model

import (
	"iter"
	"reflect"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// ContainerSpec is every field that shapes a created container: the
// container's own fields that reach its CRI ContainerConfig, the pod
// volumes it mounts, the pod security context it inherits, and its
// lifecycle: the stop signal is in its CRI config, the preStop hook in its
// annotations, and a changed postStart hook runs only if the container
// starts again. Probes, the pull policy and the resize and restart
// policies are left out: changing them does not change the created
// container.
//
// NOTE(podsync): this is the deliberate deviation from the kubelet, which
// hashes only the name and image (see the package documentation). The
// planner treats a hash that differs in Resources only as a resize
// (resize.go), so Resources stay hashed: the hashes of running containers
// must not change.
type ContainerSpec struct {
	Image                    string                          `json:"image"`
	Command                  []string                        `json:"command,omitempty"`
	Args                     []string                        `json:"args,omitempty"`
	WorkingDir               string                          `json:"workingDir,omitempty"`
	Ports                    []corev1.ContainerPort          `json:"ports,omitempty"`
	EnvFrom                  []corev1.EnvFromSource          `json:"envFrom,omitempty"`
	Env                      []corev1.EnvVar                 `json:"env,omitempty"`
	Resources                corev1.ResourceRequirements     `json:"resources"`
	VolumeMounts             []corev1.VolumeMount            `json:"volumeMounts,omitempty"`
	VolumeDevices            []corev1.VolumeDevice           `json:"volumeDevices,omitempty"`
	SecurityContext          *corev1.SecurityContext         `json:"securityContext,omitempty"`
	Stdin                    bool                            `json:"stdin,omitempty"`
	StdinOnce                bool                            `json:"stdinOnce,omitempty"`
	TTY                      bool                            `json:"tty,omitempty"`
	TerminationMessagePath   string                          `json:"terminationMessagePath,omitempty"`
	TerminationMessagePolicy corev1.TerminationMessagePolicy `json:"terminationMessagePolicy,omitempty"`
	// Lifecycle is the container's hooks and stop signal; unset for none,
	// so that the hashes of containers without it did not change when it
	// was added.
	Lifecycle *corev1.Lifecycle `json:"lifecycle,omitempty"`
	// Volumes are the pod volumes the container mounts, in the order of
	// their first mount.
	Volumes []corev1.Volume `json:"volumes,omitempty"`
	// PodSecurityContext is the pod's security context, which the
	// container inherits.
	PodSecurityContext *corev1.PodSecurityContext `json:"podSecurityContext,omitempty"`
	// ShareProcessNamespace is the pod's shareProcessNamespace: the
	// container is created in the pod's PID namespace. Only true is
	// hashed, so false and unset are one spec.
	ShareProcessNamespace bool `json:"shareProcessNamespace,omitempty"`
	// UserNamespace is the pod's hostUsers false: the container runs in
	// the pod's user namespace. Only false is hashed, so true and unset
	// are one spec.
	UserNamespace bool `json:"userNamespace,omitempty"`
}

// NewContainerSpec collects the fields of c (a container of pod) that
// ContainerHash covers.
func NewContainerSpec(pod *corev1.Pod, c *corev1.Container) *ContainerSpec {
	s := &ContainerSpec{}
	s.setContainer(pod, c)
	for v := range mountedVolumes(pod, c) {
		s.Volumes = append(s.Volumes, *v)
	}
	return s
}

// setContainer sets every field of s but Volumes from c and pod.
func (s *ContainerSpec) setContainer(pod *corev1.Pod, c *corev1.Container) {
	*s = ContainerSpec{
		Image:                    c.Image,
		Command:                  c.Command,
		Args:                     c.Args,
		WorkingDir:               c.WorkingDir,
		Ports:                    c.Ports,
		EnvFrom:                  c.EnvFrom,
		Env:                      c.Env,
		Resources:                c.Resources,
		VolumeMounts:             c.VolumeMounts,
		VolumeDevices:            c.VolumeDevices,
		SecurityContext:          c.SecurityContext,
		Stdin:                    c.Stdin,
		StdinOnce:                c.StdinOnce,
		TTY:                      c.TTY,
		TerminationMessagePath:   c.TerminationMessagePath,
		TerminationMessagePolicy: c.TerminationMessagePolicy,
		Lifecycle:                c.Lifecycle,
		PodSecurityContext:       pod.Spec.SecurityContext,
		ShareProcessNamespace:    pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace,
		UserNamespace:            pod.Spec.HostUsers != nil && !*pod.Spec.HostUsers,
	}
}

// mountedVolumes yields ContainerSpec.Volumes: the pod volumes c mounts, in
// the order of their first mount.
func mountedVolumes(pod *corev1.Pod, c *corev1.Container) iter.Seq[*corev1.Volume] {
	return func(yield func(*corev1.Volume) bool) {
		for i, m := range c.VolumeMounts {
			// Each name once, at its first mount (a linear scan: mounts
			// are few, and a map would cost more than the search).
			if slices.ContainsFunc(c.VolumeMounts[:i], func(p corev1.VolumeMount) bool { return p.Name == m.Name }) {
				continue
			}
			for j := range pod.Spec.Volumes {
				if v := &pod.Spec.Volumes[j]; v.Name == m.Name && !yield(v) {
					return
				}
			}
		}
	}
}

// Hash returns the FNV-64a hash of the spec's JSON (json.Marshal(s)), in
// hex. The JSON is written by a specialized encoder (hash_json.go) that
// produces the same bytes without most of encoding/json's reflection:
// these hashes are stored in running containers, so the value must never
// change for a given spec.
func (s *ContainerSpec) Hash() string {
	return strconv.FormatUint(hashContainerSpec(s, nil, nil), 16)
}

// ContainerHash returns the hash podsync records in a container's
// io.kubernetes.container.hash annotation: the hash of NewContainerSpec.
// It is NewContainerSpec(pod, c).Hash() without building the spec on the
// heap, as the planner computes it for every running container on every
// pass.
func ContainerHash(pod *corev1.Pod, c *corev1.Container) string {
	var s ContainerSpec
	s.setContainer(pod, c)
	return strconv.FormatUint(hashContainerSpec(&s, pod, c), 16)
}

// ChangedFields names the fields that differ between old and new, in the
// order of ContainerSpec, with env vars, mounts and volumes named by key:
// "image", "env[FOO]", "volumeMounts[/data]", "volumes[cache]",
// "lifecycle.preStop". It returns
// nil if old is nil (the annotation was lost) or nothing differs.
func ChangedFields(old, new *ContainerSpec) []string {
	if old == nil || new == nil {
		return nil
	}
	var out []string
	field := func(name string, a, b any) {
		if !equality.Semantic.DeepEqual(a, b) {
			out = append(out, name)
		}
	}
	field("image", old.Image, new.Image)
	field("command", old.Command, new.Command)
	field("args", old.Args, new.Args)
	field("workingDir", old.WorkingDir, new.WorkingDir)
	field("ports", old.Ports, new.Ports)
	field("envFrom", old.EnvFrom, new.EnvFrom)
	out = append(out, keyedChanges("env", old.Env, new.Env, func(e corev1.EnvVar) string { return e.Name })...)
	field("resources", old.Resources, new.Resources)
	out = append(out, keyedChanges("volumeMounts", old.VolumeMounts, new.VolumeMounts, func(m corev1.VolumeMount) string { return m.MountPath })...)
	field("volumeDevices", old.VolumeDevices, new.VolumeDevices)
	field("securityContext", old.SecurityContext, new.SecurityContext)
	field("stdin", old.Stdin, new.Stdin)
	field("stdinOnce", old.StdinOnce, new.StdinOnce)
	field("tty", old.TTY, new.TTY)
	field("terminationMessagePath", old.TerminationMessagePath, new.TerminationMessagePath)
	field("terminationMessagePolicy", old.TerminationMessagePolicy, new.TerminationMessagePolicy)
	var oldLC, newLC corev1.Lifecycle
	if old.Lifecycle != nil {
		oldLC = *old.Lifecycle
	}
	if new.Lifecycle != nil {
		newLC = *new.Lifecycle
	}
	field("lifecycle.postStart", oldLC.PostStart, newLC.PostStart)
	field("lifecycle.preStop", oldLC.PreStop, newLC.PreStop)
	field("lifecycle.stopSignal", oldLC.StopSignal, newLC.StopSignal)
	out = append(out, keyedChanges("volumes", old.Volumes, new.Volumes, func(v corev1.Volume) string { return v.Name })...)
	field("podSecurityContext", old.PodSecurityContext, new.PodSecurityContext)
	field("shareProcessNamespace", old.ShareProcessNamespace, new.ShareProcessNamespace)
	field("hostUsers", old.UserNamespace, new.UserNamespace)
	return out
}

// keyedChanges names the keys whose entries were added, removed or changed
// (new order first, then removed keys in old order), or the field as a
// whole if only the order changed.
func keyedChanges[T any](field string, old, new []T, key func(T) string) []string {
	oldBy := make(map[string]T, len(old))
	for _, o := range old {
		oldBy[key(o)] = o
	}
	newKeys := make(map[string]bool, len(new))
	var out []string
	for _, n := range new {
		k := key(n)
		newKeys[k] = true
		if o, ok := oldBy[k]; !ok || !equality.Semantic.DeepEqual(o, n) {
			out = append(out, field+"["+k+"]")
		}
	}
	for _, o := range old {
		if !newKeys[key(o)] {
			out = append(out, field+"["+key(o)+"]")
		}
	}
	if len(out) == 0 && !reflect.DeepEqual(mustJSON(old), mustJSON(new)) {
		out = append(out, field)
	}
	return slices.Compact(out)
}
