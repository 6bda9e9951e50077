package model_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan/plantest"
)

// adoptPod is a pod with what a rebuild must keep: init containers, a
// volume, probes, a preStop hook, a pod security context, host network.
func adoptPod() *corev1.Pod {
	pod := plantest.BenchPod(2)
	pod.Labels["tier"] = "web"
	pod.Annotations = map[string]string{"note": "kept"}
	pod.Spec.HostNetwork = true
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000)}
	pod.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "registry.local/busybox:local", Command: []string{"true"},
		TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile}}
	c := &pod.Spec.Containers[0]
	c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sleep", "1"}}}}
	c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
	c.Resources.Limits[corev1.ResourceMemory] = resource.MustParse("128Mi")
	return pod
}

// nodeKey is the node key the tests' sandboxes are signed with.
var nodeKey = []byte("0123456789abcdef0123456789abcdef")

// runtimeOf is what the runtime holds of pod after a start: one sandbox
// (with the pod-spec annotation, signed by nodeKey, if withSpec), the
// init container exited 0 and the others running.
func runtimeOf(pod *corev1.Pod, withSpec bool) model.RuntimePod {
	annotations := model.PodAnnotations(pod)
	if withSpec {
		spec, ok := model.EncodePodSpec(pod)
		if !ok {
			panic("pod spec too long")
		}
		annotations[model.AnnotationPodSpec] = spec
		annotations[model.AnnotationPodSpecMAC] = model.SignPodSpec(nodeKey, model.PodRef{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}, spec)
	}
	rp := model.RuntimePod{Sandboxes: []model.RuntimeSandbox{{Labels: model.PodLabels(pod), Annotations: annotations,
		CreatedAt: plantest.T0, Namespaces: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE}}}}
	at := plantest.T0
	add := func(c *corev1.Container, state model.ContainerState, restarts int32) {
		at = at.Add(time.Second)
		rp.Containers = append(rp.Containers, model.RuntimeContainer{Labels: model.ContainerLabels(pod, c),
			Annotations: model.ContainerAnnotations(pod, c, restarts), Image: c.Image, CreatedAt: at, State: state})
	}
	add(&pod.Spec.InitContainers[0], model.ContainerExited, 0)
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i], model.ContainerRunning, int32(i))
	}
	return rp
}

// TestRebuildPodFromSpecAnnotation: a sandbox's pod-spec annotation gives
// back the pod as applied, small enough to carry.
func TestRebuildPodFromSpecAnnotation(t *testing.T) {
	pod := adoptPod()
	rp := runtimeOf(pod, true)
	spec := rp.Sandboxes[0].Annotations[model.AnnotationPodSpec]
	t.Logf("the pod-spec annotation of a pod of 3 containers is %d bytes", len(spec))
	if len(spec) > 2048 {
		t.Errorf("the pod-spec annotation is %d bytes, want it compressed under 2 KiB", len(spec))
	}
	got, lost, err := model.RebuildPod(rp, nodeKey)
	if err != nil || lost != "" {
		t.Fatalf("RebuildPod = %v, lost %q", err, lost)
	}
	if diff := cmp.Diff(pod.ObjectMeta, got.ObjectMeta); diff != "" {
		t.Errorf("metadata (-applied +rebuilt):\n%s", diff)
	}
	if diff := cmp.Diff(pod.Spec, got.Spec); diff != "" {
		t.Errorf("spec (-applied +rebuilt):\n%s", diff)
	}
}

// TestRebuildPodInPart: without the annotation (a sandbox created before
// podsync recorded it) the pod is rebuilt from its containers so that
// every container keeps its hash (the planner restarts none), with the
// init container, host network, volumes, preStop and grace period, and
// says what was lost.
func TestRebuildPodInPart(t *testing.T) {
	pod := adoptPod()
	got, lost, err := model.RebuildPod(runtimeOf(pod, false), nodeKey)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(lost, "probes") || !strings.Contains(got.Annotations[model.AnnotationAdopted], "probes") {
		t.Errorf("lost %q, annotation %q: want both to name the probes", lost, got.Annotations[model.AnnotationAdopted])
	}
	if got.Annotations["note"] != "kept" || got.Labels["tier"] != "web" || got.Labels[model.LabelManaged] != "" {
		t.Errorf("labels %v annotations %v, want the pod's", got.Labels, got.Annotations)
	}
	if !got.Spec.HostNetwork || got.Spec.HostPID || *got.Spec.TerminationGracePeriodSeconds != 30 {
		t.Errorf("hostNetwork %t hostPID %t grace %d, want true false 30", got.Spec.HostNetwork, got.Spec.HostPID, *got.Spec.TerminationGracePeriodSeconds)
	}
	if len(got.Spec.InitContainers) != 1 || got.Spec.InitContainers[0].Name != "init" || len(got.Spec.Containers) != 2 {
		t.Fatalf("init containers %d, containers %d, want 1 and 2", len(got.Spec.InitContainers), len(got.Spec.Containers))
	}
	all := func(p *corev1.Pod) []corev1.Container {
		return append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...)
	}
	want := all(pod)
	for i, c := range all(got) {
		if c.Name != want[i].Name {
			t.Errorf("container %d is %s, want %s", i, c.Name, want[i].Name)
			continue
		}
		if h, w := model.ContainerHash(got, &c), model.ContainerHash(pod, &want[i]); h != w {
			t.Errorf("container %s: hash %s, want %s (it would be restarted)", c.Name, h, w)
		}
	}
	if pre := got.Spec.Containers[0].Lifecycle; pre == nil || pre.PreStop == nil {
		t.Errorf("the preStop hook was lost")
	}
}

// TestRebuildPodRefusals: no sandbox, or a sandbox without pod labels, is
// not a pod.
func TestRebuildPodRefusals(t *testing.T) {
	if _, _, err := model.RebuildPod(model.RuntimePod{}, nodeKey); err == nil {
		t.Errorf("RebuildPod of nothing succeeded")
	}
	if _, _, err := model.RebuildPod(model.RuntimePod{Sandboxes: []model.RuntimeSandbox{{}}}, nodeKey); err == nil {
		t.Errorf("RebuildPod of an unlabelled sandbox succeeded")
	}
	if _, err := model.DecodePodSpec("not base64!"); err == nil {
		t.Errorf("DecodePodSpec of garbage succeeded")
	}
}

// TestRebuildPodKeepsDebugContainers: a debug container added after the
// sandbox was created is in no spec the runtime records, so RebuildPod
// takes it from its labelled instance, with or without the pod-spec
// annotation; the planner then neither kills nor restarts it.
func TestRebuildPodKeepsDebugContainers(t *testing.T) {
	for _, withSpec := range []bool{true, false} {
		pod := adoptPod()
		rp := runtimeOf(pod, withSpec)
		debugged := pod.DeepCopy()
		debugged.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: "debugger", Image: "busybox:1", Command: []string{"sh"}, Stdin: true, TTY: true,
			TerminationMessagePath: corev1.TerminationMessagePathDefault, TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		}, TargetContainerName: "app"}}
		ec := (*corev1.Container)(&debugged.Spec.EphemeralContainers[0].EphemeralContainerCommon)
		rp.Containers = append(rp.Containers, model.RuntimeContainer{Labels: model.ContainerLabels(debugged, ec),
			Annotations: model.ContainerAnnotations(debugged, ec, 0), Image: ec.Image, CreatedAt: plantest.T0.Add(time.Hour), State: model.ContainerRunning})
		if rp.Containers[len(rp.Containers)-1].Labels[model.LabelEphemeral] != "true" {
			t.Fatal("a debug container's instance is not labelled")
		}
		got, _, err := model.RebuildPod(rp, nodeKey)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(got.Spec.EphemeralContainers); n != 1 || got.Spec.EphemeralContainers[0].Name != "debugger" ||
			!slices.Equal(got.Spec.EphemeralContainers[0].Command, []string{"sh"}) || !got.Spec.EphemeralContainers[0].TTY {
			t.Errorf("withSpec %t: ephemeral containers %+v, want the debugger", withSpec, got.Spec.EphemeralContainers)
		}
		if model.SpecContainer(got, "debugger") == nil || len(got.Spec.Containers) != len(pod.Spec.Containers) {
			t.Errorf("withSpec %t: the debugger was taken for a regular container: %d containers", withSpec, len(got.Spec.Containers))
		}
	}
}

// TestRebuildPodTrustsOnlyItsOwnRecord: a sandbox's pod-spec annotation is
// used only when the node's key signed it for the pod the sandbox's
// labels name, and it names that pod itself. A tenant's pod carrying its
// own podsync.io/pod-spec annotation (its real spec too large to record)
// was adopted as kube-system/stolen, mounting kube-system's Secret; now
// every forgery is rebuilt in part, as the pod its labels name.
func TestRebuildPodTrustsOnlyItsOwnRecord(t *testing.T) {
	tenant := adoptPod()
	stolen := adoptPod()
	stolen.Namespace, stolen.Name = "kube-system", "stolen"
	stolen.Spec.Volumes = append(stolen.Spec.Volumes, corev1.Volume{Name: "token",
		VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "admin-token"}}})
	forged, _ := model.EncodePodSpec(stolen)
	sameUID, _ := model.EncodePodSpec(func() *corev1.Pod { p := stolen.DeepCopy(); p.UID = tenant.UID; return p }())
	ref := model.PodRef{Namespace: tenant.Namespace, Name: tenant.Name, UID: tenant.UID}
	for _, tt := range []struct {
		name string
		spec string
		mac  string
		key  []byte
		why  string
	}{
		{"no signature", forged, "", nodeKey, "not signed by this node's key"},
		{"another key's signature", forged, model.SignPodSpec([]byte("another node's key, 32 bytes...."), ref, forged), nodeKey, "not signed by this node's key"},
		{"signed for another pod", forged, model.SignPodSpec(nodeKey, model.PodRef{Namespace: "kube-system", Name: "stolen", UID: stolen.UID}, forged), nodeKey, "not signed by this node's key"},
		{"signed, but naming another pod", sameUID, model.SignPodSpec(nodeKey, ref, sameUID), nodeKey, "is of pod kube-system/stolen"},
		{"no key to verify with", forged, model.SignPodSpec(nil, ref, forged), nil, "not signed by this node's key"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rp := runtimeOf(tenant, false)
			rp.Sandboxes[0].Annotations[model.AnnotationPodSpec] = tt.spec
			if tt.mac != "" {
				rp.Sandboxes[0].Annotations[model.AnnotationPodSpecMAC] = tt.mac
			}
			got, lost, err := model.RebuildPod(rp, tt.key)
			if err != nil {
				t.Fatal(err)
			}
			if got.Namespace != tenant.Namespace || got.Name != tenant.Name || got.UID != tenant.UID {
				t.Errorf("rebuilt %s/%s (%s), want the tenant's pod %s/%s (%s)", got.Namespace, got.Name, got.UID, tenant.Namespace, tenant.Name, tenant.UID)
			}
			if !strings.Contains(lost, tt.why) {
				t.Errorf("lost %q, want it to say %q", lost, tt.why)
			}
			for _, v := range got.Spec.Volumes {
				if v.Secret != nil && v.Secret.SecretName == "admin-token" {
					t.Errorf("the forged Secret volume was adopted")
				}
			}
			if _, ok := got.Annotations[model.AnnotationPodSpec]; ok {
				t.Errorf("the forged record stays in the pod's annotations")
			}
		})
	}
}
