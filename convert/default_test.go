package convert

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// manifestsDir holds the manifests shared with the engine tests.
const manifestsDir = "../testdata/manifests"

// quantityEqual compares quantities by value and by canonical form, so
// "1000m" and "1" differ as they would in a manifest read back.
var quantityEqual = cmp.Comparer(func(a, b resource.Quantity) bool {
	return a.Cmp(b) == 0 && a.String() == b.String()
})

// defaultBasePod is the smallest pod a user would write, with the fields
// Default derives (namespace, uid) already set so that each row shows one
// default.
func defaultBasePod() *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "2f4e0b1c-0000-4000-8000-000000000001"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "registry.local/busybox:1.37"}},
		},
	}
}

const (
	digestRef = "registry.local/busybox@sha256:3be6086b3e45bfa801dc4ee51a083c856e6e92fa9942bf10add98d746b28b8dd"
	digest512 = "sha512:" +
		"4f2c9b1a6d8e0f3a5b7c9d1e3f5a7b9c1d3e5f7a9b1c3d5e7f9a1b3c5d7e9f1a" +
		"3b5c7d9e1f3a5b7c9d1e3f5a7b9c1d3e5f7a9b1c3d5e7f9a1b3c5d7e9f1a3b5c"
)

func container0(p *corev1.Pod) *corev1.Container { return &p.Spec.Containers[0] }

func addInit(p *corev1.Pod) *corev1.Container {
	p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "init", Image: "registry.local/busybox:1.37"})
	return &p.Spec.InitContainers[len(p.Spec.InitContainers)-1]
}

func addPort(c *corev1.Container, port corev1.ContainerPort) {
	c.Ports = append(c.Ports, port)
}

func addVolume(p *corev1.Pod, v corev1.Volume) { p.Spec.Volumes = append(p.Spec.Volumes, v) }

func withImage(image string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { container0(p).Image = image }
}

func pullPolicy(p *corev1.Pod) any { return container0(p).ImagePullPolicy }

// defaultCase is one row of the Default tables: mutate turns the base pod
// into the input, get reads the field under test after Default, want is its
// expected value.
type defaultCase struct {
	name   string
	mutate func(*corev1.Pod)
	get    func(*corev1.Pod) any
	want   any
}

// TestDefault has one row per default the API server applies. Each row is
// checked to be able to fail: its field must not already hold want before
// Default runs.
func TestDefault(t *testing.T) {
	tests := []defaultCase{
		{
			name:   "namespace is default",
			mutate: func(p *corev1.Pod) { p.Namespace = "" },
			get:    func(p *corev1.Pod) any { return p.Namespace },
			want:   "default",
		},
		{
			name:   "uid is derived from namespace and name",
			mutate: func(p *corev1.Pod) { p.UID = "" },
			get:    func(p *corev1.Pod) any { return p.UID },
			want:   PodUID("shop", "web"),
		},
		{
			name:   "uid is derived after the namespace is defaulted",
			mutate: func(p *corev1.Pod) { p.Namespace, p.UID = "", "" },
			get:    func(p *corev1.Pod) any { return p.UID },
			want:   PodUID("default", "web"),
		},
		// SetDefaults_PodSpec.
		{
			name: "restartPolicy is Always",
			get:  func(p *corev1.Pod) any { return p.Spec.RestartPolicy },
			want: corev1.RestartPolicyAlways,
		},
		{
			name: "dnsPolicy is ClusterFirst",
			get:  func(p *corev1.Pod) any { return p.Spec.DNSPolicy },
			want: corev1.DNSClusterFirst,
		},
		{
			name: "terminationGracePeriodSeconds is 30",
			get:  func(p *corev1.Pod) any { return p.Spec.TerminationGracePeriodSeconds },
			want: ptr.To[int64](30),
		},
		{
			name: "schedulerName is default-scheduler",
			get:  func(p *corev1.Pod) any { return p.Spec.SchedulerName },
			want: "default-scheduler",
		},
		{
			name: "securityContext is empty, not nil",
			get:  func(p *corev1.Pod) any { return p.Spec.SecurityContext },
			want: &corev1.PodSecurityContext{},
		},
		// SetDefaults_Pod.
		{
			name: "enableServiceLinks is true",
			get:  func(p *corev1.Pod) any { return p.Spec.EnableServiceLinks },
			want: ptr.To(true),
		},
		{
			name: "hostNetwork publishes container ports on the host",
			mutate: func(p *corev1.Pod) {
				p.Spec.HostNetwork = true
				addPort(container0(p), corev1.ContainerPort{ContainerPort: 9100})
			},
			get:  func(p *corev1.Pod) any { return container0(p).Ports[0].HostPort },
			want: int32(9100),
		},
		{
			name: "hostNetwork publishes init container ports on the host",
			mutate: func(p *corev1.Pod) {
				p.Spec.HostNetwork = true
				addPort(addInit(p), corev1.ContainerPort{ContainerPort: 8125, Protocol: corev1.ProtocolUDP})
			},
			get:  func(p *corev1.Pod) any { return p.Spec.InitContainers[0].Ports[0].HostPort },
			want: int32(8125),
		},
		{
			name: "requests default to limits",
			mutate: func(p *corev1.Pod) {
				container0(p).Resources.Limits = corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse("500m"),
					corev1.ResourceMemory: resource.MustParse("64Mi"),
				}
			},
			get: func(p *corev1.Pod) any { return container0(p).Resources.Requests },
			want: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("500m"),
				corev1.ResourceMemory: resource.MustParse("64Mi"),
			},
		},
		// SetDefaults_Pod (defaultPodRequests): pod-level requests.
		{
			name: "pod-level requests default to the containers' requests, else to the pod's limits",
			mutate: func(p *corev1.Pod) {
				for i := range p.Spec.Containers {
					p.Spec.Containers[i].Resources = corev1.ResourceRequirements{}
				}
				container0(p).Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
				p.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse("1"),
					corev1.ResourceMemory: resource.MustParse("128Mi"),
				}}
			},
			get: func(p *corev1.Pod) any { return p.Spec.Resources.Requests },
			want: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("100m"),
				corev1.ResourceMemory: resource.MustParse("128Mi"),
			},
		},
		{
			name: "requests default to limits per resource",
			mutate: func(p *corev1.Pod) {
				container0(p).Resources = corev1.ResourceRequirements{
					Limits: corev1.ResourceList{
						corev1.ResourceCPU:    resource.MustParse("500m"),
						corev1.ResourceMemory: resource.MustParse("64Mi"),
					},
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
				}
			},
			get: func(p *corev1.Pod) any { return container0(p).Resources.Requests },
			want: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("100m"),
				corev1.ResourceMemory: resource.MustParse("64Mi"),
			},
		},
		{
			name: "init container requests default to limits",
			mutate: func(p *corev1.Pod) {
				addInit(p).Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("16Mi")}
			},
			get:  func(p *corev1.Pod) any { return p.Spec.InitContainers[0].Resources.Requests },
			want: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("16Mi")},
		},
		{
			name:   "empty limits give empty requests",
			mutate: func(p *corev1.Pod) { container0(p).Resources.Limits = corev1.ResourceList{} },
			get:    func(p *corev1.Pod) any { return container0(p).Resources.Requests },
			want:   corev1.ResourceList{},
		},
		// SetDefaults_ResourceList.
		{
			name: "limits are rounded up to milli-units",
			mutate: func(p *corev1.Pod) {
				container0(p).Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100u")}
			},
			get:  func(p *corev1.Pod) any { return container0(p).Resources.Limits },
			want: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1m")},
		},
		{
			name: "requests are rounded up to milli-units",
			mutate: func(p *corev1.Pod) {
				container0(p).Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500u")}
			},
			get:  func(p *corev1.Pod) any { return container0(p).Resources.Requests },
			want: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2m")},
		},
		// SetDefaults_Container.
		{
			name:   "imagePullPolicy is IfNotPresent for a tag other than latest",
			mutate: func(p *corev1.Pod) {},
			get:    pullPolicy,
			want:   corev1.PullIfNotPresent,
		},
		{
			name:   "imagePullPolicy is Always without tag or digest",
			mutate: withImage("registry.local/busybox"),
			get:    pullPolicy,
			want:   corev1.PullAlways,
		},
		{
			name:   "imagePullPolicy is Always for a short name without tag",
			mutate: withImage("busybox"),
			get:    pullPolicy,
			want:   corev1.PullAlways,
		},
		{
			name:   "imagePullPolicy is Always for a registry port without tag",
			mutate: withImage("registry.local:5000/busybox"),
			get:    pullPolicy,
			want:   corev1.PullAlways,
		},
		{
			name:   "imagePullPolicy is Always for latest",
			mutate: withImage("registry.local/busybox:latest"),
			get:    pullPolicy,
			want:   corev1.PullAlways,
		},
		{
			name:   "imagePullPolicy is IfNotPresent for a digest",
			mutate: withImage(digestRef),
			get:    pullPolicy,
			want:   corev1.PullIfNotPresent,
		},
		{
			name:   "imagePullPolicy is IfNotPresent for a sha512 digest",
			mutate: withImage("registry.local/busybox@" + digest512),
			get:    pullPolicy,
			want:   corev1.PullIfNotPresent,
		},
		{
			name:   "imagePullPolicy is Always for latest with a digest, as in the API server",
			mutate: withImage("registry.local/busybox:latest@sha256:3be6086b3e45bfa801dc4ee51a083c856e6e92fa9942bf10add98d746b28b8dd"),
			get:    pullPolicy,
			want:   corev1.PullAlways,
		},
		{
			name:   "imagePullPolicy is IfNotPresent for a reference that does not parse",
			mutate: withImage("Registry.Local/BusyBox"),
			get:    pullPolicy,
			want:   corev1.PullIfNotPresent,
		},
		{
			name:   "init container imagePullPolicy follows its image",
			mutate: func(p *corev1.Pod) { addInit(p).Image = "registry.local/busybox:latest" },
			get:    func(p *corev1.Pod) any { return p.Spec.InitContainers[0].ImagePullPolicy },
			want:   corev1.PullAlways,
		},
		{
			name: "terminationMessagePath is /dev/termination-log",
			get:  func(p *corev1.Pod) any { return container0(p).TerminationMessagePath },
			want: "/dev/termination-log",
		},
		{
			name: "terminationMessagePolicy is File",
			get:  func(p *corev1.Pod) any { return container0(p).TerminationMessagePolicy },
			want: corev1.TerminationMessageReadFile,
		},
		{
			name: "init container terminationMessagePolicy is File",
			mutate: func(p *corev1.Pod) {
				addInit(p)
			},
			get:  func(p *corev1.Pod) any { return p.Spec.InitContainers[0].TerminationMessagePolicy },
			want: corev1.TerminationMessageReadFile,
		},
		// ContainerPort.Protocol +default="TCP".
		{
			name:   "port protocol is TCP",
			mutate: func(p *corev1.Pod) { addPort(container0(p), corev1.ContainerPort{ContainerPort: 8080}) },
			get:    func(p *corev1.Pod) any { return container0(p).Ports[0].Protocol },
			want:   corev1.ProtocolTCP,
		},
		{
			name:   "init container port protocol is TCP",
			mutate: func(p *corev1.Pod) { addPort(addInit(p), corev1.ContainerPort{ContainerPort: 8080}) },
			get:    func(p *corev1.Pod) any { return p.Spec.InitContainers[0].Ports[0].Protocol },
			want:   corev1.ProtocolTCP,
		},
		// SetDefaults_Probe.
		{
			name: "liveness probe timeoutSeconds is 1",
			mutate: func(p *corev1.Pod) {
				container0(p).LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
			},
			get:  func(p *corev1.Pod) any { return container0(p).LivenessProbe.TimeoutSeconds },
			want: int32(1),
		},
		{
			name: "readiness probe periodSeconds is 10",
			mutate: func(p *corev1.Pod) {
				container0(p).ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}}
			},
			get:  func(p *corev1.Pod) any { return container0(p).ReadinessProbe.PeriodSeconds },
			want: int32(10),
		},
		{
			name: "startup probe successThreshold is 1",
			mutate: func(p *corev1.Pod) {
				container0(p).StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}}
			},
			get:  func(p *corev1.Pod) any { return container0(p).StartupProbe.SuccessThreshold },
			want: int32(1),
		},
		{
			name: "liveness probe failureThreshold is 3",
			mutate: func(p *corev1.Pod) {
				container0(p).LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
			},
			get:  func(p *corev1.Pod) any { return container0(p).LivenessProbe.FailureThreshold },
			want: int32(3),
		},
		{
			name: "sidecar startup probe gets every probe default",
			mutate: func(p *corev1.Pod) {
				c := addInit(p)
				c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
				c.StartupProbe = &corev1.Probe{
					ProbeHandler:     corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-f", "/tmp/ready"}}},
					FailureThreshold: 30,
				}
			},
			get: func(p *corev1.Pod) any { return p.Spec.InitContainers[0].StartupProbe },
			want: &corev1.Probe{
				ProbeHandler:     corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-f", "/tmp/ready"}}},
				TimeoutSeconds:   1,
				PeriodSeconds:    10,
				SuccessThreshold: 1,
				FailureThreshold: 30,
			},
		},
		// SetDefaults_HTTPGetAction.
		{
			name: "httpGet path is /",
			mutate: func(p *corev1.Pod) {
				container0(p).ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromString("http")}}}
			},
			get:  func(p *corev1.Pod) any { return container0(p).ReadinessProbe.HTTPGet.Path },
			want: "/",
		},
		{
			name: "httpGet scheme is HTTP",
			mutate: func(p *corev1.Pod) {
				container0(p).LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}}
			},
			get:  func(p *corev1.Pod) any { return container0(p).LivenessProbe.HTTPGet.Scheme },
			want: corev1.URISchemeHTTP,
		},
		{
			name: "lifecycle httpGet hooks get path / and scheme HTTP",
			mutate: func(p *corev1.Pod) {
				container0(p).Lifecycle = &corev1.Lifecycle{
					PostStart: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromString("http")}},
					PreStop:   &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(8080)}},
				}
			},
			get: func(p *corev1.Pod) any {
				lc := container0(p).Lifecycle
				return []any{lc.PostStart.HTTPGet.Path, lc.PostStart.HTTPGet.Scheme, lc.PreStop.HTTPGet.Path, lc.PreStop.HTTPGet.Scheme}
			},
			want: []any{"/", corev1.URISchemeHTTP, "/", corev1.URISchemeHTTP},
		},
		// GRPCAction.Service is declared +default="".
		{
			name: "grpc probe service is empty",
			mutate: func(p *corev1.Pod) {
				container0(p).LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9090}}}
			},
			get:  func(p *corev1.Pod) any { return container0(p).LivenessProbe.GRPC.Service },
			want: ptr.To(""),
		},
		// SetDefaults_ObjectFieldSelector.
		{
			name: "env fieldRef apiVersion is v1",
			mutate: func(p *corev1.Pod) {
				container0(p).Env = []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
			},
			get:  func(p *corev1.Pod) any { return container0(p).Env[0].ValueFrom.FieldRef.APIVersion },
			want: "v1",
		},
		{
			name: "init container env fieldRef apiVersion is v1",
			mutate: func(p *corev1.Pod) {
				addInit(p).Env = []corev1.EnvVar{{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}}
			},
			get:  func(p *corev1.Pod) any { return p.Spec.InitContainers[0].Env[0].ValueFrom.FieldRef.APIVersion },
			want: "v1",
		},
		// SetDefaults_Volume and the volume source defaulters.
		{
			name:   "volume without a source is an emptyDir",
			mutate: func(p *corev1.Pod) { addVolume(p, corev1.Volume{Name: "scratch"}) },
			get:    func(p *corev1.Pod) any { return p.Spec.Volumes[0].VolumeSource },
			want:   corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}},
		},
		{
			name: "downwardAPI defaultMode is 0644 and fieldRef apiVersion v1",
			mutate: func(p *corev1.Pod) {
				addVolume(p, corev1.Volume{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
					Items: []corev1.DownwardAPIVolumeFile{{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}}},
				}}})
			},
			get: func(p *corev1.Pod) any {
				d := p.Spec.Volumes[0].DownwardAPI
				return []any{ptr.Deref(d.DefaultMode, 0), d.Items[0].FieldRef.APIVersion}
			},
			want: []any{int32(0o644), "v1"},
		},
		{
			name: "projected defaultMode is 0644 and its downwardAPI fieldRef apiVersion v1",
			mutate: func(p *corev1.Pod) {
				addVolume(p, corev1.Volume{Name: "all", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
					Sources: []corev1.VolumeProjection{{DownwardAPI: &corev1.DownwardAPIProjection{
						Items: []corev1.DownwardAPIVolumeFile{{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
					}}},
				}}})
			},
			get: func(p *corev1.Pod) any {
				d := p.Spec.Volumes[0].Projected
				return []any{ptr.Deref(d.DefaultMode, 0), d.Sources[0].DownwardAPI.Items[0].FieldRef.APIVersion}
			},
			want: []any{int32(0o644), "v1"},
		},
		{
			name: "image volume pull policy follows the reference",
			mutate: func(p *corev1.Pod) {
				addVolume(p, corev1.Volume{Name: "a", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "data:latest"}}})
				addVolume(p, corev1.Volume{Name: "b", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "data:v1"}}})
			},
			get: func(p *corev1.Pod) any {
				return []corev1.PullPolicy{p.Spec.Volumes[0].Image.PullPolicy, p.Spec.Volumes[1].Image.PullPolicy}
			},
			want: []corev1.PullPolicy{corev1.PullAlways, corev1.PullIfNotPresent},
		},
		{
			name: "configMap defaultMode is 0644",
			mutate: func(p *corev1.Pod) {
				addVolume(p, corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{
					ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}},
				}})
			},
			get:  func(p *corev1.Pod) any { return p.Spec.Volumes[0].ConfigMap.DefaultMode },
			want: ptr.To[int32](0o644),
		},
		{
			name: "secret defaultMode is 0644",
			mutate: func(p *corev1.Pod) {
				addVolume(p, corev1.Volume{Name: "tls", VolumeSource: corev1.VolumeSource{
					Secret: &corev1.SecretVolumeSource{SecretName: "app-tls"},
				}})
			},
			get:  func(p *corev1.Pod) any { return p.Spec.Volumes[0].Secret.DefaultMode },
			want: ptr.To[int32](420),
		},
		{
			name: "hostPath type is set to the empty type",
			mutate: func(p *corev1.Pod) {
				addVolume(p, corev1.Volume{Name: "host", VolumeSource: corev1.VolumeSource{
					HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/data"},
				}})
			},
			get:  func(p *corev1.Pod) any { return p.Spec.Volumes[0].HostPath.Type },
			want: ptr.To(corev1.HostPathUnset),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := defaultBasePod()
			if tc.mutate != nil {
				tc.mutate(pod)
			}
			if cmp.Equal(tc.get(pod), tc.want, quantityEqual) {
				t.Fatalf("the input already holds %v: the row cannot fail", tc.want)
			}
			Default(pod)
			if diff := cmp.Diff(tc.want, tc.get(pod), quantityEqual); diff != "" {
				t.Errorf("after Default (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDefaultKeepsSetValues checks that Default never overwrites a value the
// manifest sets, including zero values that are meaningful when set.
func TestDefaultKeepsSetValues(t *testing.T) {
	tests := []defaultCase{
		{
			name:   "uid is kept when set",
			mutate: func(p *corev1.Pod) { p.UID = "0b6f1a2e-5d1c-4c8e-9f0a-7f1e2d3c4b5a" },
			get:    func(p *corev1.Pod) any { return p.UID },
			want:   types.UID("0b6f1a2e-5d1c-4c8e-9f0a-7f1e2d3c4b5a"),
		},
		{
			name:   "uid is kept when the namespace is defaulted",
			mutate: func(p *corev1.Pod) { p.Namespace, p.UID = "", "user-chosen" },
			get:    func(p *corev1.Pod) any { return p.UID },
			want:   types.UID("user-chosen"),
		},
		{
			name: "namespace is kept",
			get:  func(p *corev1.Pod) any { return p.Namespace },
			want: "shop",
		},
		{
			name:   "restartPolicy Never is kept",
			mutate: func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyNever },
			get:    func(p *corev1.Pod) any { return p.Spec.RestartPolicy },
			want:   corev1.RestartPolicyNever,
		},
		{
			name:   "dnsPolicy None is kept",
			mutate: func(p *corev1.Pod) { p.Spec.DNSPolicy = corev1.DNSNone },
			get:    func(p *corev1.Pod) any { return p.Spec.DNSPolicy },
			want:   corev1.DNSNone,
		},
		{
			name:   "terminationGracePeriodSeconds 0 is kept",
			mutate: func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0) },
			get:    func(p *corev1.Pod) any { return p.Spec.TerminationGracePeriodSeconds },
			want:   ptr.To[int64](0),
		},
		{
			name:   "enableServiceLinks false is kept",
			mutate: func(p *corev1.Pod) { p.Spec.EnableServiceLinks = ptr.To(false) },
			get:    func(p *corev1.Pod) any { return p.Spec.EnableServiceLinks },
			want:   ptr.To(false),
		},
		{
			name: "securityContext is kept",
			mutate: func(p *corev1.Pod) {
				p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000)}
			},
			get:  func(p *corev1.Pod) any { return p.Spec.SecurityContext },
			want: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000)},
		},
		{
			name: "imagePullPolicy Never is kept for latest",
			mutate: func(p *corev1.Pod) {
				container0(p).Image = "registry.local/busybox:latest"
				container0(p).ImagePullPolicy = corev1.PullNever
			},
			get:  pullPolicy,
			want: corev1.PullNever,
		},
		{
			name: "terminationMessagePolicy FallbackToLogsOnError is kept",
			mutate: func(p *corev1.Pod) {
				container0(p).TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
			},
			get:  func(p *corev1.Pod) any { return container0(p).TerminationMessagePolicy },
			want: corev1.TerminationMessageFallbackToLogsOnError,
		},
		{
			name: "port protocol UDP is kept",
			mutate: func(p *corev1.Pod) {
				addPort(container0(p), corev1.ContainerPort{ContainerPort: 53, Protocol: corev1.ProtocolUDP})
			},
			get:  func(p *corev1.Pod) any { return container0(p).Ports[0].Protocol },
			want: corev1.ProtocolUDP,
		},
		{
			name: "hostPort is kept with hostNetwork",
			mutate: func(p *corev1.Pod) {
				p.Spec.HostNetwork = true
				addPort(container0(p), corev1.ContainerPort{ContainerPort: 9100, HostPort: 19100})
			},
			get:  func(p *corev1.Pod) any { return container0(p).Ports[0].HostPort },
			want: int32(19100),
		},
		{
			name:   "hostPort stays unset without hostNetwork",
			mutate: func(p *corev1.Pod) { addPort(container0(p), corev1.ContainerPort{ContainerPort: 8080}) },
			get:    func(p *corev1.Pod) any { return container0(p).Ports[0].HostPort },
			want:   int32(0),
		},
		{
			name: "requests stay unset without limits",
			get:  func(p *corev1.Pod) any { return container0(p).Resources.Requests },
			want: corev1.ResourceList(nil),
		},
		{
			name: "requests are kept when they differ from limits",
			mutate: func(p *corev1.Pod) {
				container0(p).Resources = corev1.ResourceRequirements{
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
					Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")},
				}
			},
			get:  func(p *corev1.Pod) any { return container0(p).Resources.Requests },
			want: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")},
		},
		{
			name: "probe values are kept",
			mutate: func(p *corev1.Pod) {
				container0(p).ReadinessProbe = &corev1.Probe{
					ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
						Path: "/ready", Port: intstr.FromInt32(8443), Scheme: corev1.URISchemeHTTPS,
					}},
					TimeoutSeconds: 5, PeriodSeconds: 2, SuccessThreshold: 2, FailureThreshold: 6,
				}
			},
			get: func(p *corev1.Pod) any { return container0(p).ReadinessProbe },
			want: &corev1.Probe{
				ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
					Path: "/ready", Port: intstr.FromInt32(8443), Scheme: corev1.URISchemeHTTPS,
				}},
				TimeoutSeconds: 5, PeriodSeconds: 2, SuccessThreshold: 2, FailureThreshold: 6,
			},
		},
		{
			name: "hook and grpc values are kept",
			mutate: func(p *corev1.Pod) {
				container0(p).Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{
					Path: "/started", Port: intstr.FromInt32(8443), Scheme: corev1.URISchemeHTTPS,
				}}, StopSignal: ptr.To(corev1.SIGUSR1)}
				container0(p).LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{
					Port: 9090, Service: ptr.To("live"), Mode: ptr.To(corev1.GRPCProbeModeTLS)}}}
			},
			get: func(p *corev1.Pod) any { return []any{container0(p).Lifecycle, container0(p).LivenessProbe.GRPC} },
			want: []any{&corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: "/started", Port: intstr.FromInt32(8443), Scheme: corev1.URISchemeHTTPS,
			}}, StopSignal: ptr.To(corev1.SIGUSR1)}, &corev1.GRPCAction{Port: 9090, Service: ptr.To("live"), Mode: ptr.To(corev1.GRPCProbeModeTLS)}},
		},
		{
			name: "configMap modes are kept and items are not defaulted",
			mutate: func(p *corev1.Pod) {
				addVolume(p, corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"},
					DefaultMode:          ptr.To[int32](0o400),
					Items:                []corev1.KeyToPath{{Key: "a", Path: "a"}, {Key: "b", Path: "b", Mode: ptr.To[int32](0o440)}},
				}}})
			},
			get: func(p *corev1.Pod) any { return p.Spec.Volumes[0].ConfigMap },
			want: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"},
				DefaultMode:          ptr.To[int32](0o400),
				Items:                []corev1.KeyToPath{{Key: "a", Path: "a"}, {Key: "b", Path: "b", Mode: ptr.To[int32](0o440)}},
			},
		},
		{
			name: "secret items are not defaulted",
			mutate: func(p *corev1.Pod) {
				addVolume(p, corev1.Volume{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
					SecretName: "app-tls",
					Items:      []corev1.KeyToPath{{Key: "tls.crt", Path: "tls.crt"}},
				}}})
			},
			get:  func(p *corev1.Pod) any { return p.Spec.Volumes[0].Secret.Items },
			want: []corev1.KeyToPath{{Key: "tls.crt", Path: "tls.crt"}},
		},
		{
			name: "emptyDir gets no defaults",
			mutate: func(p *corev1.Pod) {
				addVolume(p, corev1.Volume{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
			},
			get:  func(p *corev1.Pod) any { return p.Spec.Volumes[0].VolumeSource },
			want: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}},
		},
		{
			name: "hostPath type is kept",
			mutate: func(p *corev1.Pod) {
				addVolume(p, corev1.Volume{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
					Path: "/var/lib/data", Type: ptr.To(corev1.HostPathDirectoryOrCreate),
				}}})
			},
			get:  func(p *corev1.Pod) any { return p.Spec.Volumes[0].HostPath.Type },
			want: ptr.To(corev1.HostPathDirectoryOrCreate),
		},
		{
			name: "fieldRef apiVersion is kept",
			mutate: func(p *corev1.Pod) {
				container0(p).Env = []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v2", FieldPath: "metadata.name"}}}}
			},
			get:  func(p *corev1.Pod) any { return container0(p).Env[0].ValueFrom.FieldRef.APIVersion },
			want: "v2",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := defaultBasePod()
			if tc.mutate != nil {
				tc.mutate(pod)
			}
			Default(pod)
			if diff := cmp.Diff(tc.want, tc.get(pod), quantityEqual); diff != "" {
				t.Errorf("after Default (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDefaultNil(t *testing.T) {
	Default(nil)
	DefaultConfigMap(nil)
	DefaultSecret(nil)
}

// TestDefaultIdempotent runs Default twice over every shared manifest.
func TestDefaultIdempotent(t *testing.T) {
	for _, path := range manifestFiles(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			m := decodeFile(t, path)
			for _, pod := range m.Pods {
				Default(pod)
				once := pod.DeepCopy()
				Default(pod)
				if diff := cmp.Diff(once, pod, quantityEqual); diff != "" {
					t.Errorf("pod %q: second Default changed it (-once +twice):\n%s", pod.Name, diff)
				}
			}
			for _, cm := range m.ConfigMaps {
				DefaultConfigMap(cm)
				once := cm.DeepCopy()
				DefaultConfigMap(cm)
				if diff := cmp.Diff(once, cm); diff != "" {
					t.Errorf("configmap %q: second DefaultConfigMap changed it (-once +twice):\n%s", cm.Name, diff)
				}
			}
			for _, s := range m.Secrets {
				DefaultSecret(s)
				once := s.DeepCopy()
				DefaultSecret(s)
				if diff := cmp.Diff(once, s); diff != "" {
					t.Errorf("secret %q: second DefaultSecret changed it (-once +twice):\n%s", s.Name, diff)
				}
			}
		})
	}
}

// TestDefaultManifest checks the defaults a shared manifest relies on, as
// the API server would return the pod.
func TestDefaultManifest(t *testing.T) {
	m := decodeFile(t, filepath.Join(manifestsDir, "host-network.yaml"))
	pod := m.Pods[0]
	Default(pod)
	c := pod.Spec.Containers[0]
	want := corev1.ContainerPort{Name: "metrics", ContainerPort: 9100, HostPort: 9100, Protocol: corev1.ProtocolTCP}
	if diff := cmp.Diff(want, c.Ports[0]); diff != "" {
		t.Errorf("port (-want +got):\n%s", diff)
	}
	if pod.UID != PodUID("kube-system", "node-agent") {
		t.Errorf("uid = %q, want PodUID(kube-system, node-agent)", pod.UID)
	}
	if pod.Spec.DNSPolicy != corev1.DNSNone {
		t.Errorf("dnsPolicy = %q, want the manifest's None", pod.Spec.DNSPolicy)
	}
}

func TestDefaultConfigMap(t *testing.T) {
	tests := []struct {
		name string
		in   *corev1.ConfigMap
		want *corev1.ConfigMap
	}{
		{
			name: "namespace is default and data is empty, not nil",
			in:   &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-config"}},
			want: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-config", Namespace: "default"}, Data: map[string]string{}},
		},
		{
			name: "set values are kept",
			in:   &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-config", Namespace: "demo"}, Data: map[string]string{"a": "1"}},
			want: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-config", Namespace: "demo"}, Data: map[string]string{"a": "1"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			DefaultConfigMap(tc.in)
			if diff := cmp.Diff(tc.want, tc.in); diff != "" {
				t.Errorf("after DefaultConfigMap (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDefaultSecret(t *testing.T) {
	tests := []struct {
		name string
		in   *corev1.Secret
		want *corev1.Secret
	}{
		{
			name: "namespace is default and type is Opaque",
			in:   &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"}},
			want: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: "default"}, Type: corev1.SecretTypeOpaque},
		},
		{
			name: "set values are kept",
			in: &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: "tls", Namespace: "demo"},
				Type:       corev1.SecretTypeTLS,
				Data:       map[string][]byte{"tls.crt": []byte("c"), "tls.key": []byte("k")},
			},
			want: &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: "tls", Namespace: "demo"},
				Type:       corev1.SecretTypeTLS,
				Data:       map[string][]byte{"tls.crt": []byte("c"), "tls.key": []byte("k")},
			},
		},
		{
			name: "stringData is folded into data and overwrites it",
			in: &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: "demo"},
				Data:       map[string][]byte{"user": []byte("old"), "host": []byte("db")},
				StringData: map[string]string{"user": "app", "password": "s3cr3t"},
			},
			want: &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: "demo"},
				Type:       corev1.SecretTypeOpaque,
				Data:       map[string][]byte{"user": []byte("app"), "host": []byte("db"), "password": []byte("s3cr3t")},
			},
		},
		{
			name: "stringData alone becomes data",
			in: &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: "demo"},
				StringData: map[string]string{"token": "t"},
			},
			want: &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: "demo"},
				Type:       corev1.SecretTypeOpaque,
				Data:       map[string][]byte{"token": []byte("t")},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			DefaultSecret(tc.in)
			if diff := cmp.Diff(tc.want, tc.in); diff != "" {
				t.Errorf("after DefaultSecret (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPodUID(t *testing.T) {
	// The UID of a pod must not change between podsync versions: it names
	// the pod's sandboxes and state.
	if got, want := PodUID("default", "web"), types.UID("622bb72c-96e1-5908-a7e7-f8f2f5cdf04b"); got != want {
		t.Errorf(`PodUID("default", "web") = %q, want %q`, got, want)
	}
	if got, want := PodUID("shop", "web"), PodUID("shop", "web"); got != want {
		t.Errorf("PodUID is not deterministic: %q, then %q", got, want)
	}
	if got, want := PodUID("", "web"), PodUID("default", "web"); got != want {
		t.Errorf(`PodUID("", "web") = %q, want the UID in namespace default %q`, got, want)
	}
	distinct := [][2]string{
		{"default", "web"},
		{"default", "web-2"},
		{"shop", "web"},
		{"shop", "web-2"},
		{"a", "b-c"},
		{"a-b", "c"},
	}
	seen := make(map[types.UID][2]string)
	for _, nn := range distinct {
		uid := PodUID(nn[0], nn[1])
		if prev, ok := seen[uid]; ok {
			t.Errorf("PodUID(%q, %q) = PodUID(%q, %q) = %q", nn[0], nn[1], prev[0], prev[1], uid)
		}
		seen[uid] = nn
		u, err := uuid.Parse(string(uid))
		if err != nil {
			t.Fatalf("PodUID(%q, %q) = %q is not a UUID: %v", nn[0], nn[1], uid, err)
		}
		if u.Version() != 5 || u.Variant() != uuid.RFC4122 || string(uid) != u.String() {
			t.Errorf("PodUID(%q, %q) = %q, want a canonical RFC 4122 version 5 UUID", nn[0], nn[1], uid)
		}
	}
}

func TestPodUIDNamespace(t *testing.T) {
	want := uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://podsync.io/pod-uid")).String()
	if PodUIDNamespace != want {
		t.Errorf("PodUIDNamespace = %s, want %s", PodUIDNamespace, want)
	}
}

// manifestFiles lists the shared manifests.
func manifestFiles(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(manifestsDir)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, e := range entries {
		if !e.IsDir() {
			paths = append(paths, filepath.Join(manifestsDir, e.Name()))
		}
	}
	if len(paths) == 0 {
		t.Fatalf("no manifests in %s", manifestsDir)
	}
	return paths
}

func decodeFile(t *testing.T, path string) *Manifests {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	m, err := Decode(f)
	if err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	return m
}

// TestDefaultRoundsTheOverhead: spec.overhead is rounded up to milli
// units, as the API server's SetDefaults_ResourceList rounds it.
func TestDefaultRoundsTheOverhead(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "c", Image: "i"}},
		Overhead:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500u"), corev1.ResourceMemory: resource.MustParse("16Mi")},
	}}
	Default(pod)
	if cpu, mem := pod.Spec.Overhead[corev1.ResourceCPU], pod.Spec.Overhead[corev1.ResourceMemory]; cpu.String() != "2m" || mem.String() != "16Mi" {
		t.Errorf("overhead = %s, %s, want 2m, 16Mi", cpu.String(), mem.String())
	}
}
