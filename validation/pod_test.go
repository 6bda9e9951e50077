package validation_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/convert"
	"github.com/podsync/podsync/validation"
)

const testNode = "node-1"

// basePod is a valid pod that uses most of what validation checks: a
// classic init container and a sidecar, two containers with ports, probes,
// hooks, env from a ConfigMap, a Secret and the downward API (a label and
// the service account's name), and a volume
// of each kind. It references the objects of baseConfigMap and baseSecret.
// It is not defaulted.
func basePod(name string) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   "shop",
			Labels:      map[string]string{"app": name},
			Annotations: map[string]string{"example.com/owner": "team-storefront"},
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			ServiceAccountName:            "storefront",
			DNSConfig: &corev1.PodDNSConfig{
				Nameservers: []string{"10.96.0.10"},
				Searches:    []string{"shop.svc.cluster.local"},
				Options:     []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("2")}},
			},
			HostAliases: []corev1.HostAlias{{IP: "192.0.2.10", Hostnames: []string{"registry.local"}}},
			SecurityContext: &corev1.PodSecurityContext{
				RunAsUser: ptr.To[int64](1000),
				Sysctls:   []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "80"}},
			},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"},
					Items:                []corev1.KeyToPath{{Key: "app.properties", Path: "app.properties", Mode: ptr.To[int32](0o440)}},
				}}},
				{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db-credentials", DefaultMode: ptr.To[int32](0o400)}}},
				{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("64Mi"))}}},
				{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/shop", Type: ptr.To(corev1.HostPathDirectoryOrCreate)}}},
			},
			InitContainers: []corev1.Container{
				{
					Name:         "setup",
					Image:        "registry.local/busybox:1.37",
					Command:      []string{"sh", "-c", "true"},
					VolumeMounts: []corev1.VolumeMount{{Name: "cache", MountPath: "/cache"}},
				},
				{
					Name:          "shipper",
					Image:         "registry.local/busybox:1.37",
					RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
					StartupProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}},
				},
			},
			Containers: []corev1.Container{
				{
					Name:  "web",
					Image: "registry.local/web:1.0",
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, HostPort: 18080, HostIP: "127.0.0.1", Protocol: corev1.ProtocolTCP}},
					Env: []corev1.EnvVar{
						{Name: "MODE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
							LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}, Key: "MODE"}}},
						{Name: "DB_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
							LocalObjectReference: corev1.LocalObjectReference{Name: "db-credentials"}, Key: "DB_PASSWORD"}}},
						{Name: "APP_LABEL", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}},
						{Name: "GREETING", Value: "hello"},
						{Name: "ACCOUNT", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.serviceAccountName"}}},
					},
					EnvFrom: []corev1.EnvFromSource{
						{Prefix: "APP_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}}},
						{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "db-credentials"}}},
					},
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{"cpu": resource.MustParse("100m"), "memory": resource.MustParse("32Mi")},
						Limits:   corev1.ResourceList{"cpu": resource.MustParse("500m"), "memory": resource.MustParse("64Mi")},
					},
					VolumeMounts: []corev1.VolumeMount{
						{Name: "config", MountPath: "/etc/app", ReadOnly: true},
						{Name: "creds", MountPath: "/etc/creds", ReadOnly: true},
						{Name: "cache", MountPath: "/cache"},
						{Name: "host", MountPath: "/data", SubPath: "shop"},
					},
					LivenessProbe: &corev1.Probe{
						ProbeHandler:                  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}},
						TerminationGracePeriodSeconds: ptr.To[int64](5),
					},
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
						Path: "/ready", Port: intstr.FromString("http"), Scheme: corev1.URISchemeHTTP,
						HTTPHeaders: []corev1.HTTPHeader{{Name: "X-Probe", Value: "readiness"}},
					}}},
					StartupProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("http")}}},
					Lifecycle: &corev1.Lifecycle{
						PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"touch", "/tmp/started"}}},
						PreStop:   &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sleep", "1"}}},
					},
				},
				{
					Name:      "exporter",
					Image:     "registry.local/exporter@sha256:3be6086b3e45bfa801dc4ee51a083c856e6e92fa9942bf10add98d746b28b8dd",
					Ports:     []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9113}},
					Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"cpu": resource.MustParse("50m"), "memory": resource.MustParse("16Mi")}},
				},
			},
		},
	}
}

func baseConfigMap() *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "app-config", Namespace: "shop"},
		Data:       map[string]string{"MODE": "production", "app.properties": "cache.dir=/cache\n"},
	}
}

func baseSecret() *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "db-credentials", Namespace: "shop"},
		Data:       map[string][]byte{"DB_PASSWORD": []byte("s3cr3t")},
	}
}

// input is what a row validates: a pod and the objects sent with it.
type input struct {
	pod        *corev1.Pod
	configMaps []*corev1.ConfigMap
	secrets    []*corev1.Secret
}

// mutation changes the base input for one row.
type mutation func(in *input)

func nop(*input) {}

func pod(mutate func(p *corev1.Pod)) mutation {
	return func(in *input) { mutate(in.pod) }
}

// windows makes the pod a Windows pod without the fields only a Linux
// pod may have.
func windows(p *corev1.Pod) {
	p.Spec.OS = &corev1.PodOS{Name: corev1.Windows}
	p.Spec.SecurityContext = nil
	for i := range p.Spec.InitContainers {
		p.Spec.InitContainers[i].SecurityContext = nil
	}
	for i := range p.Spec.Containers {
		p.Spec.Containers[i].SecurityContext = nil
	}
}

// web and exporter mutate the pod's containers.
func web(mutate func(c *corev1.Container)) mutation {
	return pod(func(p *corev1.Pod) { mutate(&p.Spec.Containers[0]) })
}

// debug gives the pod an ephemeral container "debug" targeting web, then
// mutates it.
func debug(mutate func(ec *corev1.EphemeralContainer)) mutation {
	return pod(func(p *corev1.Pod) {
		p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{
			EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "registry.local/busybox:1", Command: []string{"sh"},
				Stdin: true, TTY: true, VolumeMounts: []corev1.VolumeMount{{Name: "cache", MountPath: "/cache"}}},
			TargetContainerName: "web",
		})
		mutate(&p.Spec.EphemeralContainers[len(p.Spec.EphemeralContainers)-1])
	})
}

func exporter(mutate func(c *corev1.Container)) mutation {
	return pod(func(p *corev1.Pod) { mutate(&p.Spec.Containers[1]) })
}

// validatePod builds the base input, mutates it, defaults it as the
// server does and validates the pod with opts and the input's objects.
func validatePod(mutate mutation, opts validation.Options) field.ErrorList {
	in := &input{pod: basePod("web"), configMaps: []*corev1.ConfigMap{baseConfigMap()}, secrets: []*corev1.Secret{baseSecret()}}
	mutate(in)
	for _, cm := range in.configMaps {
		convert.DefaultConfigMap(cm)
	}
	for _, s := range in.secrets {
		convert.DefaultSecret(s)
	}
	convert.Default(in.pod)
	opts.Objects = validation.NewObjects(in.configMaps, in.secrets)
	return validation.ValidatePod(in.pod, nil, opts)
}

func options() validation.Options {
	return validation.Options{NodeName: testNode}
}

// TestValidatePodValid checks that the base pod, and variations that look
// suspicious but are valid, validate clean, so that each row of
// TestValidatePodInvalid fails only for its mutation.
// withVolume adds v to the pod's volumes (index 4).
func withVolume(v corev1.Volume) mutation {
	return pod(func(p *corev1.Pod) { p.Spec.Volumes = append(p.Spec.Volumes, v) })
}

func downwardFile(path, fieldPath string) corev1.DownwardAPIVolumeFile {
	return corev1.DownwardAPIVolumeFile{Path: path, FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: fieldPath}}
}

func resourceFile(path, container, res, divisor string) corev1.DownwardAPIVolumeFile {
	f := corev1.DownwardAPIVolumeFile{Path: path, ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: container, Resource: res}}
	if divisor != "" {
		f.ResourceFieldRef.Divisor = resource.MustParse(divisor)
	}
	return f
}

func downwardVolume(items ...corev1.DownwardAPIVolumeFile) corev1.Volume {
	return corev1.Volume{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: items}}}
}

func projectedVolume(srcs ...corev1.VolumeProjection) corev1.Volume {
	return corev1.Volume{Name: "all", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: srcs}}}
}

func TestValidatePodValid(t *testing.T) {
	tests := []struct {
		name   string
		opts   *validation.Options // nil: options()
		mutate mutation
	}{
		{"base", nil, nop},
		{"ephemeral container with a target, a terminal and a volume mount", nil, debug(func(*corev1.EphemeralContainer) {})},
		{"ephemeral container without a target", nil, debug(func(ec *corev1.EphemeralContainer) { ec.TargetContainerName = "" })},
		{"resizePolicy of a container and a sidecar", nil, pod(func(p *corev1.Pod) {
			p.Spec.Containers[0].ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: "cpu", RestartPolicy: corev1.NotRequired}, {ResourceName: "memory", RestartPolicy: corev1.RestartContainer}}
			p.Spec.InitContainers[1].ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: "memory", RestartPolicy: corev1.NotRequired}}
		})},
		{"downwardAPI volume of every field", nil, withVolume(downwardVolume(
			downwardFile("name", "metadata.name"), downwardFile("ns", "metadata.namespace"), downwardFile("uid", "metadata.uid"),
			downwardFile("labels", "metadata.labels"), downwardFile("annotations", "metadata.annotations"),
			downwardFile("app", "metadata.labels['app']"), downwardFile("owner", "metadata.annotations['example.com/owner']"),
			resourceFile("cpu", "web", "limits.cpu", "1m"), resourceFile("mem", "setup", "requests.memory", "1Mi"),
			resourceFile("huge", "web", "limits.hugepages-2Mi", ""),
		))},
		{"projected volume of a configMap, a secret and the downward API", nil, withVolume(projectedVolume(
			corev1.VolumeProjection{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"},
				Items: []corev1.KeyToPath{{Key: "app.properties", Path: "conf/app.properties"}}}},
			corev1.VolumeProjection{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "db-credentials"}}},
			corev1.VolumeProjection{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{downwardFile("labels", "metadata.labels")}}},
		))},
		{"persistentVolumeClaim volume", nil, withVolume(corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "shop-data", ReadOnly: true}}})},
		{"image volume", nil, withVolume(corev1.Volume{Name: "model", VolumeSource: corev1.VolumeSource{
			Image: &corev1.ImageVolumeSource{Reference: "registry.local/model:1", PullPolicy: corev1.PullIfNotPresent}}})},
		{"env resourceFieldRef of its own and another container", nil, web(func(c *corev1.Container) {
			c.Env = append(c.Env,
				corev1.EnvVar{Name: "CPU", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}},
				corev1.EnvVar{Name: "MEM", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "setup", Resource: "requests.memory", Divisor: resource.MustParse("1Ki")}}})
		})},
		{"container restartPolicy and restartPolicyRules", nil, pod(func(p *corev1.Pod) {
			// KEP-5307: a regular container restarted on exit code 42 only,
			// an init container retried on any failure but exit code 2.
			p.Spec.Containers[1].RestartPolicy = ptr.To(corev1.ContainerRestartPolicyNever)
			p.Spec.Containers[1].RestartPolicyRules = []corev1.ContainerRestartRule{restartOn(corev1.ContainerRestartRuleOnExitCodesOpIn, 42)}
			p.Spec.InitContainers[0].RestartPolicy = ptr.To(corev1.ContainerRestartPolicyOnFailure)
			p.Spec.InitContainers[0].RestartPolicyRules = []corev1.ContainerRestartRule{restartOn(corev1.ContainerRestartRuleOnExitCodesOpNotIn, 2)}
		})},
		{"generateName without a name or uid, to be named by RunPods", nil, pod(func(p *corev1.Pod) { p.Name, p.UID, p.GenerateName = "", "", "web-" })},
		{"runtimeClassName", nil, pod(func(p *corev1.Pod) { p.Spec.RuntimeClassName = ptr.To("kata.v2") })},
		{"overhead", nil, pod(func(p *corev1.Pod) {
			p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}
		})},
		{"hostnameOverride, a subdomain, with hostname and subdomain", nil, pod(func(p *corev1.Pod) {
			p.Spec.Hostname, p.Spec.Subdomain, p.Spec.HostnameOverride = "custom-host", "t", ptr.To("override.example.host")
		})},
		{"zero Options", &validation.Options{}, nop},
		{"backoff limit under OnFailure", nil, pod(func(p *corev1.Pod) {
			p.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
			p.Annotations[validation.AnnotationBackoffLimit] = "6"
		})},
		{"minimal", nil, func(in *input) {
			in.pod = &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "min"},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
			}
		}},
		{"missing optional configMap volume", nil, pod(func(p *corev1.Pod) {
			p.Spec.Volumes[0].ConfigMap.Name = "absent"
			p.Spec.Volumes[0].ConfigMap.Optional = ptr.To(true)
		})},
		{"missing optional key", nil, web(func(c *corev1.Container) {
			c.Env[1].ValueFrom.SecretKeyRef.Key = "ABSENT"
			c.Env[1].ValueFrom.SecretKeyRef.Optional = ptr.To(true)
		})},
		{"missing optional envFrom secret", nil, web(func(c *corev1.Container) {
			c.EnvFrom[1].SecretRef = &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}, Optional: ptr.To(true)}
		})},
		{"own node name", nil, pod(func(p *corev1.Pod) { p.Spec.NodeName = testNode })},
		{"host network ports", nil, pod(func(p *corev1.Pod) {
			p.Spec.HostNetwork = true
			p.Spec.Containers[0].Ports[0].HostPort = 0
		})},
		{"same host port on two addresses", nil, exporter(func(c *corev1.Container) {
			c.Ports[0].HostPort = 18080
			c.Ports[0].HostIP = "127.0.0.2"
		})},
		{"same host port, other protocol", nil, exporter(func(c *corev1.Container) {
			c.Ports[0].HostPort = 18080
			c.Ports[0].Protocol = corev1.ProtocolUDP
		})},
		{"only limits", nil, web(func(c *corev1.Container) { c.Resources.Requests = nil })},
		{"requests equal limits", nil, web(func(c *corev1.Container) { c.Resources.Requests["memory"] = resource.MustParse("64Mi") })},
		{"no source volume is an emptyDir", nil, pod(func(p *corev1.Pod) { p.Spec.Volumes[2].EmptyDir = nil })},
		{"grace period at the limit", nil, pod(func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](3600) })},
		{"grace period zero", nil, pod(func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0) })},
		{"dnsPolicy None with nameservers", nil, pod(func(p *corev1.Pod) { p.Spec.DNSPolicy = corev1.DNSNone })},
		{"fully qualified search", nil, pod(func(p *corev1.Pod) { p.Spec.DNSConfig.Searches = []string{"svc.cluster.local.", "."} })},
		{"explicit uid", nil, pod(func(p *corev1.Pod) { p.UID = "0f8fad5b-d9cb-469f-a165-70867728950e" })},
		{"secret from stringData", nil, func(in *input) {
			in.secrets[0].Data = nil
			in.secrets[0].StringData = map[string]string{"DB_PASSWORD": "s3cr3t"}
		}},
		{"annotation fieldRef", nil, web(func(c *corev1.Container) {
			c.Env[2].ValueFrom.FieldRef.FieldPath = "metadata.annotations['example.com/owner']"
		})},
		{"limits at their bounds", &validation.Options{Limits: validation.Limits{MaxContainersPerPod: 4, MaxEnvVarsPerContainer: 5}}, nop},
		{"fsGroup and its change policy", nil, pod(func(p *corev1.Pod) {
			p.Spec.SecurityContext.FSGroup = ptr.To[int64](2000)
			p.Spec.SecurityContext.FSGroupChangePolicy = ptr.To(corev1.FSGroupChangeOnRootMismatch)
		})},
		{"security profiles", nil, pod(func(p *corev1.Pod) {
			p.Spec.SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
			p.Spec.SecurityContext.AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}
			p.Spec.SecurityContext.SELinuxOptions = &corev1.SELinuxOptions{Level: "s0:c1,c2"}
			p.Spec.Containers[1].SecurityContext = &corev1.SecurityContext{
				SeccompProfile:  &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("profiles/audit.json")},
				AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost, LocalhostProfile: ptr.To("deny-write")},
				SELinuxOptions:  &corev1.SELinuxOptions{User: "system_u", Role: "system_r", Type: "container_t", Level: "s0"},
				ProcMount:       ptr.To(corev1.DefaultProcMount),
			}
		})},
		{"httpGet and sleep hooks", nil, web(func(c *corev1.Container) {
			c.Lifecycle.PostStart = &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: "/started", Port: intstr.FromString("http"), Scheme: corev1.URISchemeHTTPS,
				HTTPHeaders: []corev1.HTTPHeader{{Name: "X-Hook", Value: "1"}},
			}}
			c.Lifecycle.PreStop = &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 30}}
		})},
		{"grpc probes", nil, web(func(c *corev1.Container) {
			c.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9090, Service: ptr.To("")}}}
			c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9090, Service: ptr.To("ready"), Mode: ptr.To(corev1.GRPCProbeModeTLS)}}}
		})},
		// Valid as on the API server; the node refuses it at admission
		// (PodOSNotSupported).
		{"windows pod", nil, pod(func(p *corev1.Pod) {
			windows(p)
			p.Spec.Containers[0].Lifecycle.StopSignal = ptr.To(corev1.SIGKILL)
		})},
		{"stopSignal on linux", nil, pod(func(p *corev1.Pod) {
			p.Spec.OS = &corev1.PodOS{Name: corev1.Linux}
			p.Spec.Containers[0].Lifecycle.StopSignal = ptr.To(corev1.SIGUSR1)
		})},
		{"subPathExpr, propagation, stdin", nil, pod(func(p *corev1.Pod) {
			c := &p.Spec.Containers[0]
			c.Stdin, c.StdinOnce, c.TTY = true, true, true
			c.VolumeMounts = append(c.VolumeMounts,
				corev1.VolumeMount{Name: "cache", MountPath: "/logs", SubPathExpr: "$(POD_NAME)/logs"},
				corev1.VolumeMount{Name: "host", MountPath: "/media", MountPropagation: ptr.To(corev1.MountPropagationHostToContainer)},
				corev1.VolumeMount{Name: "host", MountPath: "/none", MountPropagation: ptr.To(corev1.MountPropagationNone)},
				corev1.VolumeMount{Name: "host", MountPath: "/shared", MountPropagation: ptr.To(corev1.MountPropagationBidirectional)})
			c.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		})},
		{"legacy annotations converted", nil, pod(func(p *corev1.Pod) {
			p.Annotations[corev1.SeccompPodAnnotationKey] = "runtime/default"
			p.Annotations[corev1.SeccompContainerAnnotationKeyPrefix+p.Spec.Containers[0].Name] = "unconfined"
			p.Annotations[corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix+p.Spec.Containers[1].Name] = "localhost/deny-write"
		})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := options()
			if tt.opts != nil {
				opts = *tt.opts
			}
			if errs := validatePod(tt.mutate, opts); len(errs) > 0 {
				t.Errorf("want no violations, got:\n%s", errs.ToAggregate())
			}
		})
	}
}

// TestValidatePodInvalid validates each bad pod and checks that it has
// exactly the expected violations, by field path, each with a type and a
// description (the server's BadRequest field violations).
func TestValidatePodInvalid(t *testing.T) {
	tests := []struct {
		name   string
		opts   *validation.Options // nil: options()
		mutate mutation
		want   []string
	}{
		// Metadata.
		{"apiVersion", nil, pod(func(p *corev1.Pod) { p.APIVersion = "v2" }), []string{"apiVersion"}},
		{"kind", nil, pod(func(p *corev1.Pod) { p.Kind = "Deployment" }), []string{"kind"}},
		{"name missing", nil, pod(func(p *corev1.Pod) { p.Name = "" }), []string{"metadata.name"}},
		{"name not a subdomain", nil, pod(func(p *corev1.Pod) { p.Name = "Web_1" }), []string{"metadata.name"}},
		{"generateName not a name's prefix", nil, pod(func(p *corev1.Pod) { p.Name, p.UID, p.GenerateName = "", "", "Web_" }), []string{"metadata.generateName"}},
		{"namespace not a label", nil, pod(func(p *corev1.Pod) { p.Namespace = "shop.eu" }), []string{"metadata.namespace"}},
		{"label key", nil, pod(func(p *corev1.Pod) { p.Labels["-app"] = "x" }), []string{"metadata.labels"}},
		{"label value", nil, pod(func(p *corev1.Pod) { p.Labels["app"] = "a b" }), []string{"metadata.labels"}},
		{"annotations too large", nil, pod(func(p *corev1.Pod) {
			p.Annotations["example.com/big"] = strings.Repeat("x", 256*1024)
		}), []string{"metadata.annotations"}},
		{"uid not a UUID", nil, pod(func(p *corev1.Pod) { p.UID = "web-1" }), []string{"metadata.uid"}},
		{"backoff limit not a number", nil, pod(func(p *corev1.Pod) {
			p.Spec.RestartPolicy = corev1.RestartPolicyNever
			p.Annotations[validation.AnnotationBackoffLimit] = "-1"
		}), []string{"metadata.annotations[podsync.io/backoff-limit]"}},
		{"backoff limit under restartPolicy Always", nil, pod(func(p *corev1.Pod) {
			p.Annotations[validation.AnnotationBackoffLimit] = "3"
		}), []string{"metadata.annotations[podsync.io/backoff-limit]"}},
		{"pod security level unknown", nil, pod(func(p *corev1.Pod) {
			p.Annotations[validation.AnnotationPodSecurity] = "strict"
		}), []string{"metadata.annotations[podsync.io/pod-security]"}},

		// Spec.
		{"no containers", nil, pod(func(p *corev1.Pod) { p.Spec.Containers = nil }), []string{"spec.containers"}},
		{"too many containers", &validation.Options{Limits: validation.Limits{MaxContainersPerPod: 3}}, nop, []string{"spec.containers"}},
		{"restartPolicy", nil, pod(func(p *corev1.Pod) { p.Spec.RestartPolicy = "Sometimes" }), []string{"spec.restartPolicy"}},
		{"dnsPolicy", nil, pod(func(p *corev1.Pod) { p.Spec.DNSPolicy = "Cluster" }), []string{"spec.dnsPolicy"}},
		{"dnsPolicy None without dnsConfig", nil, pod(func(p *corev1.Pod) {
			p.Spec.DNSPolicy = corev1.DNSNone
			p.Spec.DNSConfig = nil
		}), []string{"spec.dnsConfig"}},
		{"dnsPolicy None without nameservers", nil, pod(func(p *corev1.Pod) {
			p.Spec.DNSPolicy = corev1.DNSNone
			p.Spec.DNSConfig.Nameservers = nil
		}), []string{"spec.dnsConfig.nameservers"}},
		{"four nameservers", nil, pod(func(p *corev1.Pod) {
			p.Spec.DNSConfig.Nameservers = []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"}
		}), []string{"spec.dnsConfig.nameservers"}},
		{"nameserver not an IP", nil, pod(func(p *corev1.Pod) { p.Spec.DNSConfig.Nameservers[0] = "dns.local" }),
			[]string{"spec.dnsConfig.nameservers[0]"}},
		{"33 searches", nil, pod(func(p *corev1.Pod) {
			p.Spec.DNSConfig.Searches = slices.Repeat([]string{"svc.cluster.local"}, 33)
		}), []string{"spec.dnsConfig.searches"}},
		{"hostAlias IP", nil, pod(func(p *corev1.Pod) { p.Spec.HostAliases[0].IP = "192.0.2.300" }), []string{"spec.hostAliases[0].ip"}},
		{"hostAlias hostname", nil, pod(func(p *corev1.Pod) { p.Spec.HostAliases[0].Hostnames[0] = "Registry_Local" }),
			[]string{"spec.hostAliases[0].hostnames[0]"}},
		{"grace period above max", nil, pod(func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](3601) }),
			[]string{"spec.terminationGracePeriodSeconds"}},
		{"grace period above configured max", &validation.Options{Limits: validation.Limits{MaxGracePeriodSeconds: 10}}, nop,
			[]string{"spec.terminationGracePeriodSeconds"}},
		{"negative grace period", nil, pod(func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](-1) }),
			[]string{"spec.terminationGracePeriodSeconds"}},
		{"activeDeadlineSeconds zero", nil, pod(func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To[int64](0) }),
			[]string{"spec.activeDeadlineSeconds"}},
		{"sysctl name", nil, pod(func(p *corev1.Pod) { p.Spec.SecurityContext.Sysctls[0].Name = "Net.IPv4.Forward" }),
			[]string{"spec.securityContext.sysctls[0].name"}},
		{"duplicate sysctl", nil, pod(func(p *corev1.Pod) {
			p.Spec.SecurityContext.Sysctls = append(p.Spec.SecurityContext.Sysctls, corev1.Sysctl{Name: "net.ipv4.ip_unprivileged_port_start", Value: "0"})
		}), []string{"spec.securityContext.sysctls[1].name"}},
		{"fsGroupChangePolicy unknown", nil, pod(func(p *corev1.Pod) {
			p.Spec.SecurityContext.FSGroupChangePolicy = ptr.To(corev1.PodFSGroupChangePolicy("Sometimes"))
		}), []string{"spec.securityContext.fsGroupChangePolicy"}},
		{"negative runAsUser", nil, pod(func(p *corev1.Pod) { p.Spec.SecurityContext.RunAsUser = ptr.To[int64](-1) }),
			[]string{"spec.securityContext.runAsUser"}},
		{"other node", nil, pod(func(p *corev1.Pod) { p.Spec.NodeName = "node-2" }), []string{"spec.nodeName"}},
		{"hostname", nil, pod(func(p *corev1.Pod) { p.Spec.Hostname = "web.shop" }), []string{"spec.hostname"}},
		// The API server's validatePodHostName (pod_hostnameoverride.go's
		// refusals).
		{"hostnameOverride with setHostnameAsFQDN", nil, pod(func(p *corev1.Pod) {
			p.Spec.HostnameOverride, p.Spec.SetHostnameAsFQDN = ptr.To("override-host"), ptr.To(true)
		}), []string{"spec.hostnameOverride"}},
		{"hostnameOverride with hostNetwork", nil, pod(func(p *corev1.Pod) {
			p.Spec.HostnameOverride, p.Spec.HostNetwork = ptr.To("override-host"), true
		}), []string{"spec.hostnameOverride", "spec.containers[0].ports[0].hostPort"}},
		{"hostnameOverride not a DNS subdomain", nil, pod(func(p *corev1.Pod) { p.Spec.HostnameOverride = ptr.To("Not-RFC1123") }),
			[]string{"spec.hostnameOverride"}},
		{"hostnameOverride empty", nil, pod(func(p *corev1.Pod) { p.Spec.HostnameOverride = ptr.To("") }), []string{"spec.hostnameOverride"}},
		{"hostnameOverride over 64 characters", nil, pod(func(p *corev1.Pod) { p.Spec.HostnameOverride = ptr.To(strings.Repeat("a", 65)) }),
			[]string{"spec.hostnameOverride"}},
		{"runtimeClassName not a DNS subdomain", nil, pod(func(p *corev1.Pod) { p.Spec.RuntimeClassName = ptr.To("Kata_V2") }),
			[]string{"spec.runtimeClassName"}},
		{"overhead negative or unknown", nil, pod(func(p *corev1.Pod) {
			p.Spec.Overhead = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("-1Mi"), "gpus": resource.MustParse("1")}
		}), []string{"spec.overhead.limits[gpus]", "spec.overhead.limits[memory]"}},
		{"runtimeClassName empty", nil, pod(func(p *corev1.Pod) { p.Spec.RuntimeClassName = ptr.To("") }), []string{"spec.runtimeClassName"}},
		// The API server's validateOS, validateWindows and validateLinux.
		{"os unknown", nil, pod(func(p *corev1.Pod) { p.Spec.OS = &corev1.PodOS{Name: "plan9"} }), []string{"spec.os"}},
		{"os without a name", nil, pod(func(p *corev1.Pod) { p.Spec.OS = &corev1.PodOS{} }), []string{"spec.os.name"}},
		{"windows pod with Linux fields", nil, pod(func(p *corev1.Pod) {
			windows(p)
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), FSGroup: ptr.To[int64](2000)}
			p.Spec.HostPID = true
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(false), Capabilities: &corev1.Capabilities{}}
		}), []string{"spec.securityContext.fsGroup", "spec.securityContext.runAsUser", "spec.hostPID",
			"spec.containers[0].securityContext.capabilities", "spec.containers[0].securityContext.privileged"}},
		{"windows pod with a Linux stop signal", nil, pod(func(p *corev1.Pod) {
			windows(p)
			p.Spec.Containers[0].Lifecycle.StopSignal = ptr.To(corev1.SIGUSR1)
		}), []string{"spec.containers[0].lifecycle.stopSignal"}},
		{"linux pod with windows options", nil, pod(func(p *corev1.Pod) {
			p.Spec.OS = &corev1.PodOS{Name: corev1.Linux}
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{WindowsOptions: &corev1.WindowsSecurityContextOptions{RunAsUserName: ptr.To("ContainerUser")}}
		}), []string{"spec.containers[0].securityContext.windowsOptions"}},
		{"shareProcessNamespace with hostPID", nil, pod(func(p *corev1.Pod) {
			p.Spec.ShareProcessNamespace, p.Spec.HostPID = ptr.To(true), true
		}), []string{"spec.shareProcessNamespace"}},
		{"hostUsers false with host namespaces", nil, pod(func(p *corev1.Pod) {
			p.Spec.HostUsers, p.Spec.HostPID, p.Spec.HostIPC = ptr.To(false), true, true
		}), []string{"spec.hostPID", "spec.hostIPC"}},
		{"priority class name", nil, pod(func(p *corev1.Pod) { p.Spec.PriorityClassName = "High_Priority" }), []string{"spec.priorityClassName"}},
		{"service account name", nil, pod(func(p *corev1.Pod) { p.Spec.ServiceAccountName = "Builder_1" }), []string{"spec.serviceAccountName"}},
		{"image pull secret without name", nil, pod(func(p *corev1.Pod) {
			p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "creds"}, {}}
		}), []string{"spec.imagePullSecrets[1].name"}},
		{"pod-level resources", nil, pod(func(p *corev1.Pod) {
			p.Spec.Resources = &corev1.ResourceRequirements{
				Requests: corev1.ResourceList{"cpu": resource.MustParse("2"), "ephemeral-storage": resource.MustParse("1Gi")},
				Limits:   corev1.ResourceList{"cpu": resource.MustParse("1"), "memory": resource.MustParse("1Ki")},
			}
		}), []string{"spec.resources.requests[ephemeral-storage]", "spec.resources.requests[cpu]", "spec.resources.requests[memory]", "spec.resources.limits[memory]"}},

		// Containers.
		{"image missing", nil, exporter(func(c *corev1.Container) { c.Image = "" }), []string{"spec.containers[1].image"}},
		{"image reference", nil, exporter(func(c *corev1.Container) { c.Image = "Registry.Local/Exporter:2.1" }),
			[]string{"spec.containers[1].image"}},
		{"container name missing", nil, exporter(func(c *corev1.Container) { c.Name = "" }), []string{"spec.containers[1].name"}},
		{"container name not a label", nil, exporter(func(c *corev1.Container) { c.Name = "Exporter" }), []string{"spec.containers[1].name"}},
		{"ephemeral container name shared with a container", nil, debug(func(ec *corev1.EphemeralContainer) { ec.Name = "web" }),
			[]string{"spec.ephemeralContainers[0].name"}},
		{"ephemeral container target unknown", nil, debug(func(ec *corev1.EphemeralContainer) { ec.TargetContainerName = "db" }),
			[]string{"spec.ephemeralContainers[0].targetContainerName"}},
		{"ephemeral container image missing", nil, debug(func(ec *corev1.EphemeralContainer) { ec.Image = "" }),
			[]string{"spec.ephemeralContainers[0].image"}},
		{"ephemeral container with ports, probes, lifecycle, resources and a subPath", nil, debug(func(ec *corev1.EphemeralContainer) {
			ec.Ports = []corev1.ContainerPort{{ContainerPort: 80}}
			ec.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
			ec.ReadinessProbe = ec.LivenessProbe
			ec.StartupProbe = ec.LivenessProbe
			ec.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
			ec.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
			ec.VolumeMounts[0].SubPath = "x"
		}), []string{"spec.ephemeralContainers[0].ports", "spec.ephemeralContainers[0].livenessProbe", "spec.ephemeralContainers[0].readinessProbe",
			"spec.ephemeralContainers[0].startupProbe", "spec.ephemeralContainers[0].lifecycle", "spec.ephemeralContainers[0].resources",
			"spec.ephemeralContainers[0].volumeMounts[0].subPath"}},
		{"container name shared with an init container", nil, pod(func(p *corev1.Pod) { p.Spec.InitContainers[0].Name = "web" }),
			[]string{"spec.containers[0].name"}},
		{"imagePullPolicy", nil, exporter(func(c *corev1.Container) { c.ImagePullPolicy = "Sometimes" }),
			[]string{"spec.containers[1].imagePullPolicy"}},
		{"terminationMessagePolicy", nil, exporter(func(c *corev1.Container) { c.TerminationMessagePolicy = "Logs" }),
			[]string{"spec.containers[1].terminationMessagePolicy"}},
		{"container restartPolicy", nil, exporter(func(c *corev1.Container) { c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicy("Sometimes")) }),
			[]string{"spec.containers[1].restartPolicy"}},
		{"init container that is not a sidecar with a probe", nil, pod(func(p *corev1.Pod) {
			p.Spec.InitContainers[1].RestartPolicy = ptr.To(corev1.ContainerRestartPolicyOnFailure)
		}), []string{"spec.initContainers[1].startupProbe"}},
		{"restartPolicyRules without a restartPolicy", nil, exporter(func(c *corev1.Container) {
			c.RestartPolicyRules = []corev1.ContainerRestartRule{restartOn(corev1.ContainerRestartRuleOnExitCodesOpIn, 42)}
		}), []string{"spec.containers[1].restartPolicy"}},
		{"restartPolicyRules action, exit codes and operator", nil, func(in *input) {
			c := &in.pod.Spec.Containers[1]
			c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyNever)
			all := restartOn(corev1.ContainerRestartRuleOnExitCodesOpIn, 1)
			all.Action = corev1.ContainerRestartRuleActionRestartAllContainers
			reboot := restartOn(corev1.ContainerRestartRuleOnExitCodesOpIn, 1)
			reboot.Action = "Reboot"
			between := restartOn("Between", 1, 9)
			c.RestartPolicyRules = []corev1.ContainerRestartRule{all, reboot, {Action: corev1.ContainerRestartRuleActionRestart}, between}
		}, []string{
			"spec.containers[1].restartPolicyRules[0].action",
			"spec.containers[1].restartPolicyRules[1].action",
			"spec.containers[1].restartPolicyRules[2].exitCodes",
			"spec.containers[1].restartPolicyRules[3].exitCodes.operator",
		}},
		{"too many restartPolicyRules", nil, exporter(func(c *corev1.Container) {
			c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyNever)
			for i := range 21 {
				c.RestartPolicyRules = append(c.RestartPolicyRules, restartOn(corev1.ContainerRestartRuleOnExitCodesOpIn, int32(i)))
			}
		}), []string{"spec.containers[1].restartPolicyRules"}},
		{"restartPolicyRules of an ephemeral container", nil, pod(func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
				Name: "debug", Image: "registry.local/busybox:1.37", TerminationMessagePolicy: corev1.TerminationMessageReadFile, ImagePullPolicy: corev1.PullIfNotPresent,
				RestartPolicyRules: []corev1.ContainerRestartRule{restartOn(corev1.ContainerRestartRuleOnExitCodesOpIn, 1)},
			}}}
		}), []string{"spec.ephemeralContainers[0].restartPolicyRules"}},
		{"resizePolicy resource", nil, exporter(func(c *corev1.Container) {
			c.ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: "ephemeral-storage", RestartPolicy: corev1.NotRequired}}
		}), []string{"spec.containers[1].resizePolicy[0].resourceName"}},
		{"resizePolicy resource twice", nil, exporter(func(c *corev1.Container) {
			c.ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: "cpu", RestartPolicy: corev1.NotRequired}, {ResourceName: "cpu", RestartPolicy: corev1.RestartContainer}}
		}), []string{"spec.containers[1].resizePolicy[1].resourceName"}},
		{"resizePolicy restartPolicy", nil, exporter(func(c *corev1.Container) {
			c.ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: "cpu", RestartPolicy: "Later"}, {ResourceName: "memory"}}
		}), []string{"spec.containers[1].resizePolicy[0].restartPolicy", "spec.containers[1].resizePolicy[1].restartPolicy"}},
		{"resizePolicy RestartContainer under restartPolicy Never", nil, pod(func(p *corev1.Pod) {
			p.Spec.RestartPolicy = corev1.RestartPolicyNever
			p.Spec.Containers[1].ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: "memory", RestartPolicy: corev1.RestartContainer}}
		}), []string{"spec.containers[1].resizePolicy[0].restartPolicy"}},
		{"resizePolicy on a classic init container", nil, pod(func(p *corev1.Pod) {
			p.Spec.InitContainers[0].ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: "cpu", RestartPolicy: corev1.NotRequired}}
		}), []string{"spec.initContainers[0].resizePolicy"}},
		{"probe on a classic init container", nil, pod(func(p *corev1.Pod) {
			p.Spec.InitContainers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
		}), []string{"spec.initContainers[0].livenessProbe"}},
		{"privileged without privilege escalation", nil, exporter(func(c *corev1.Container) {
			c.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false)}
		}), []string{"spec.containers[1].securityContext.allowPrivilegeEscalation"}},
		{"seccomp type missing", nil, pod(func(p *corev1.Pod) { p.Spec.SecurityContext.SeccompProfile = &corev1.SeccompProfile{} }), []string{"spec.securityContext.seccompProfile.type"}},
		{"seccomp type unknown", nil, pod(func(p *corev1.Pod) { p.Spec.SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: "Strict"} }), []string{"spec.securityContext.seccompProfile.type"}},
		{"seccomp Localhost without profile", nil, exporter(func(c *corev1.Container) {
			c.SecurityContext = &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost}}
		}), []string{"spec.containers[1].securityContext.seccompProfile.localhostProfile"}},
		{"seccomp Localhost empty profile", nil, exporter(func(c *corev1.Container) {
			c.SecurityContext = &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("")}}
		}), []string{"spec.containers[1].securityContext.seccompProfile.localhostProfile"}},
		{"seccomp Localhost absolute", nil, exporter(func(c *corev1.Container) {
			c.SecurityContext = &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("/etc/seccomp/audit.json")}}
		}), []string{"spec.containers[1].securityContext.seccompProfile.localhostProfile"}},
		{"seccomp Localhost escaping", nil, exporter(func(c *corev1.Container) {
			c.SecurityContext = &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("profiles/../../audit.json")}}
		}), []string{"spec.containers[1].securityContext.seccompProfile.localhostProfile"}},
		{"seccomp localhostProfile without Localhost", nil, exporter(func(c *corev1.Container) {
			c.SecurityContext = &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault, LocalhostProfile: ptr.To("audit.json")}}
		}), []string{"spec.containers[1].securityContext.seccompProfile.localhostProfile"}},
		{"appArmor type missing", nil, pod(func(p *corev1.Pod) { p.Spec.SecurityContext.AppArmorProfile = &corev1.AppArmorProfile{} }), []string{"spec.securityContext.appArmorProfile.type"}},
		{"appArmor type unknown", nil, exporter(func(c *corev1.Container) {
			c.SecurityContext = &corev1.SecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: "Complain"}}
		}), []string{"spec.containers[1].securityContext.appArmorProfile.type"}},
		{"appArmor Localhost without profile", nil, exporter(func(c *corev1.Container) {
			c.SecurityContext = &corev1.SecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost}}
		}), []string{"spec.containers[1].securityContext.appArmorProfile.localhostProfile"}},
		{"appArmor Localhost padded", nil, exporter(func(c *corev1.Container) {
			c.SecurityContext = &corev1.SecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost, LocalhostProfile: ptr.To(" deny-write")}}
		}), []string{"spec.containers[1].securityContext.appArmorProfile.localhostProfile"}},
		{"appArmor localhostProfile without Localhost", nil, exporter(func(c *corev1.Container) {
			c.SecurityContext = &corev1.SecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined, LocalhostProfile: ptr.To("x")}}
		}), []string{"spec.containers[1].securityContext.appArmorProfile.localhostProfile"}},
		{"procMount Unmasked needs hostUsers false", nil, exporter(func(c *corev1.Container) {
			c.SecurityContext = &corev1.SecurityContext{ProcMount: ptr.To(corev1.UnmaskedProcMount)}
		}), []string{"spec.containers[1].securityContext.procMount"}},
		{"procMount unknown", nil, exporter(func(c *corev1.Container) {
			c.SecurityContext = &corev1.SecurityContext{ProcMount: ptr.To(corev1.ProcMountType("Masked"))}
		}), []string{"spec.containers[1].securityContext.procMount"}},

		// Ports.
		{"containerPort zero", nil, exporter(func(c *corev1.Container) { c.Ports[0].ContainerPort = 0 }),
			[]string{"spec.containers[1].ports[0].containerPort"}},
		{"containerPort above 65535", nil, exporter(func(c *corev1.Container) { c.Ports[0].ContainerPort = 70000 }),
			[]string{"spec.containers[1].ports[0].containerPort"}},
		{"hostPort above 65535", nil, exporter(func(c *corev1.Container) { c.Ports[0].HostPort = 70000 }),
			[]string{"spec.containers[1].ports[0].hostPort"}},
		{"duplicate hostPort", nil, exporter(func(c *corev1.Container) { c.Ports[0].HostPort = 18080 }),
			[]string{"spec.containers[1].ports[0].hostPort"}},
		{"hostPort differs from containerPort on host network", nil, pod(func(p *corev1.Pod) { p.Spec.HostNetwork = true }),
			[]string{"spec.containers[0].ports[0].hostPort"}},
		{"hostIP", nil, exporter(func(c *corev1.Container) { c.Ports[0].HostIP = "localhost" }),
			[]string{"spec.containers[1].ports[0].hostIP"}},
		{"protocol", nil, exporter(func(c *corev1.Container) { c.Ports[0].Protocol = "HTTP" }),
			[]string{"spec.containers[1].ports[0].protocol"}},
		{"port name longer than 15", nil, exporter(func(c *corev1.Container) { c.Ports[0].Name = "prometheus-metrics" }),
			[]string{"spec.containers[1].ports[0].name"}},
		{"port name not an IANA name", nil, exporter(func(c *corev1.Container) { c.Ports[0].Name = "9113" }),
			[]string{"spec.containers[1].ports[0].name"}},
		{"duplicate port name", nil, exporter(func(c *corev1.Container) { c.Ports[0].Name = "http" }),
			[]string{"spec.containers[1].ports[0].name"}},

		// Resources.
		{"requests above limits", nil, web(func(c *corev1.Container) { c.Resources.Requests["memory"] = resource.MustParse("128Mi") }),
			[]string{"spec.containers[0].resources.requests[memory]"}},
		{"negative quantity", nil, web(func(c *corev1.Container) { c.Resources.Requests["cpu"] = resource.MustParse("-1") }),
			[]string{"spec.containers[0].resources.requests[cpu]"}},
		{"unsupported resource", nil, exporter(func(c *corev1.Container) { c.Resources.Limits["widgets"] = resource.MustParse("1") }),
			[]string{"spec.containers[1].resources.limits[widgets]", "spec.containers[1].resources.requests[widgets]"}},
		{"extended resource in fractions", nil, exporter(func(c *corev1.Container) { c.Resources.Limits["example.com/foo"] = resource.MustParse("500m") }),
			[]string{"spec.containers[1].resources.limits[example.com/foo]", "spec.containers[1].resources.requests[example.com/foo]"}},
		{"extended resource overcommitted", nil, exporter(func(c *corev1.Container) {
			c.Resources.Limits["example.com/foo"] = resource.MustParse("2")
			c.Resources.Requests = corev1.ResourceList{"example.com/foo": resource.MustParse("1")}
		}), []string{"spec.containers[1].resources.requests[example.com/foo]"}},
		{"extended resource without a limit", nil, exporter(func(c *corev1.Container) {
			c.Resources.Requests = corev1.ResourceList{"example.com/foo": resource.MustParse("1")}
		}), []string{"spec.containers[1].resources.limits[example.com/foo]"}},

		// Env.
		// Any printable ASCII but '=' (1GREETING is a name since v1.34).
		{"env name", nil, web(func(c *corev1.Container) { c.Env[3].Name = "GREETING=1" }), []string{"spec.containers[0].env[3].name"}},
		{"env name not printable", nil, web(func(c *corev1.Container) { c.Env[3].Name = "GREETING\t" }), []string{"spec.containers[0].env[3].name"}},
		{"envFrom prefix", nil, web(func(c *corev1.Container) {
			c.EnvFrom = []corev1.EnvFromSource{{Prefix: "a=", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}}}}
		}), []string{"spec.containers[0].envFrom[0].prefix"}},
		{"too many env vars", &validation.Options{Limits: validation.Limits{MaxEnvVarsPerContainer: 3}}, nop,
			[]string{"spec.containers[0].env"}},
		{"env too large", &validation.Options{Limits: validation.Limits{MaxEnvBytesPerContainer: 16}}, nop,
			[]string{"spec.containers[0].env"}},
		{"value and valueFrom", nil, web(func(c *corev1.Container) { c.Env[0].Value = "x" }), []string{"spec.containers[0].env[0].valueFrom"}},
		{"empty valueFrom", nil, web(func(c *corev1.Container) { c.Env[0].ValueFrom = &corev1.EnvVarSource{} }),
			[]string{"spec.containers[0].env[0].valueFrom"}},
		{"configMapKeyRef to a missing ConfigMap", nil, web(func(c *corev1.Container) { c.Env[0].ValueFrom.ConfigMapKeyRef.Name = "absent" }),
			[]string{"spec.containers[0].env[0].valueFrom.configMapKeyRef.name"}},
		{"secretKeyRef to a missing key", nil, web(func(c *corev1.Container) { c.Env[1].ValueFrom.SecretKeyRef.Key = "ABSENT" }),
			[]string{"spec.containers[0].env[1].valueFrom.secretKeyRef.key"}},
		{"secretKeyRef key not a key", nil, web(func(c *corev1.Container) { c.Env[1].ValueFrom.SecretKeyRef.Key = "a/b" }),
			[]string{"spec.containers[0].env[1].valueFrom.secretKeyRef.key"}},
		{"unsupported fieldPath", nil, web(func(c *corev1.Container) { c.Env[2].ValueFrom.FieldRef.FieldPath = "spec.schedulerName" }),
			[]string{"spec.containers[0].env[2].valueFrom.fieldRef.fieldPath"}},
		{"fieldPath label key", nil, web(func(c *corev1.Container) { c.Env[2].ValueFrom.FieldRef.FieldPath = "metadata.labels['-app']" }),
			[]string{"spec.containers[0].env[2].valueFrom.fieldRef.fieldPath"}},
		{"fieldRef apiVersion", nil, web(func(c *corev1.Container) { c.Env[2].ValueFrom.FieldRef.APIVersion = "v2" }),
			[]string{"spec.containers[0].env[2].valueFrom.fieldRef.apiVersion"}},
		{"envFrom to a missing Secret", nil, web(func(c *corev1.Container) { c.EnvFrom[1].SecretRef.Name = "absent" }),
			[]string{"spec.containers[0].envFrom[1].secretRef.name"}},
		{"envFrom prefix", nil, web(func(c *corev1.Container) { c.EnvFrom[0].Prefix = "APP-1=" }),
			[]string{"spec.containers[0].envFrom[0].prefix"}},
		{"envFrom without name", nil, web(func(c *corev1.Container) { c.EnvFrom[0].ConfigMapRef.Name = "" }),
			[]string{"spec.containers[0].envFrom[0].configMapRef.name"}},
		{"configMapKeyRef name not a subdomain", nil, web(func(c *corev1.Container) { c.Env[0].ValueFrom.ConfigMapKeyRef.Name = "App_Config" }),
			[]string{"spec.containers[0].env[0].valueFrom.configMapKeyRef.name"}},
		{"envFrom with both refs", nil, web(func(c *corev1.Container) {
			c.EnvFrom[0].SecretRef = &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "db-credentials"}}
		}), []string{"spec.containers[0].envFrom[0].secretRef"}},
		{"ConfigMap in another namespace", nil, func(in *input) { in.configMaps[0].Namespace = "other" }, []string{
			"spec.volumes[0].configMap.name",
			"spec.containers[0].env[0].valueFrom.configMapKeyRef.name",
			"spec.containers[0].envFrom[0].configMapRef.name",
		}},
		{"without its Secret", nil, func(in *input) { in.secrets = nil }, []string{
			"spec.volumes[1].secret.secretName",
			"spec.containers[0].env[1].valueFrom.secretKeyRef.name",
			"spec.containers[0].envFrom[1].secretRef.name",
		}},

		// Volumes and mounts.
		{"volume name not a label", nil, pod(func(p *corev1.Pod) {
			p.Spec.Volumes[3].Name = "host_data"
			p.Spec.Containers[0].VolumeMounts[3].Name = "host_data"
		}), []string{"spec.volumes[3].name"}},
		{"duplicate volume name", nil, pod(func(p *corev1.Pod) { p.Spec.Volumes[1].Name = "config" }),
			[]string{"spec.volumes[1].name", "spec.containers[0].volumeMounts[1].name"}},
		{"two volume sources", nil, pod(func(p *corev1.Pod) {
			p.Spec.Volumes[2].HostPath = &corev1.HostPathVolumeSource{Path: "/tmp"}
		}), []string{"spec.volumes[2].hostPath"}},
		{"emptyDir medium", nil, pod(func(p *corev1.Pod) { p.Spec.Volumes[2].EmptyDir.Medium = "HugePages" }),
			[]string{"spec.volumes[2].emptyDir.medium"}},
		{"hostPath type", nil, pod(func(p *corev1.Pod) { p.Spec.Volumes[3].HostPath.Type = ptr.To(corev1.HostPathType("Dir")) }),
			[]string{"spec.volumes[3].hostPath.type"}},
		{"hostPath relative", nil, pod(func(p *corev1.Pod) { p.Spec.Volumes[3].HostPath.Path = "var/lib/shop" }),
			[]string{"spec.volumes[3].hostPath.path"}},
		{"configMap volume to a missing ConfigMap", nil, pod(func(p *corev1.Pod) { p.Spec.Volumes[0].ConfigMap.Name = "absent" }),
			[]string{"spec.volumes[0].configMap.name"}},
		{"configMap volume item to a missing key", nil, pod(func(p *corev1.Pod) { p.Spec.Volumes[0].ConfigMap.Items[0].Key = "absent" }),
			[]string{"spec.volumes[0].configMap.items[0].key"}},
		{"configMap volume item path", nil, pod(func(p *corev1.Pod) { p.Spec.Volumes[0].ConfigMap.Items[0].Path = "../app.properties" }),
			[]string{"spec.volumes[0].configMap.items[0].path"}},
		{"configMap volume item mode", nil, pod(func(p *corev1.Pod) { p.Spec.Volumes[0].ConfigMap.Items[0].Mode = ptr.To[int32](0o1777) }),
			[]string{"spec.volumes[0].configMap.items[0].mode"}},
		{"secret volume to a missing Secret", nil, pod(func(p *corev1.Pod) { p.Spec.Volumes[1].Secret.SecretName = "absent" }),
			[]string{"spec.volumes[1].secret.secretName"}},
		{"downwardAPI file without a source, a bad path and mode", nil, withVolume(downwardVolume(
			corev1.DownwardAPIVolumeFile{Path: "..data/x", Mode: ptr.To[int32](0o1000)})),
			[]string{"spec.volumes[4].downwardAPI.items[0].path", "spec.volumes[4].downwardAPI.items[0].mode", "spec.volumes[4].downwardAPI.items[0]"}},
		{"downwardAPI file of a field a volume cannot show", nil, withVolume(downwardVolume(downwardFile("ip", "status.podIP"))),
			[]string{"spec.volumes[4].downwardAPI.items[0].fieldRef.fieldPath"}},
		{"downwardAPI resource file without a container", nil, withVolume(downwardVolume(resourceFile("cpu", "", "limits.cpu", ""))),
			[]string{"spec.volumes[4].downwardAPI.items[0].resourceFieldRef.containerName"}},
		{"downwardAPI resource file of an unknown container, resource and divisor", nil, withVolume(downwardVolume(
			resourceFile("cpu", "absent", "limits.gpu", ""), resourceFile("mem", "web", "limits.memory", "1m"))),
			[]string{"spec.volumes[4].downwardAPI.items[0].resourceFieldRef.containerName", "spec.volumes[4].downwardAPI.items[0].resourceFieldRef.resource",
				"spec.volumes[4].downwardAPI.items[1].resourceFieldRef.divisor"}},
		{"downwardAPI duplicate paths", nil, withVolume(downwardVolume(downwardFile("a", "metadata.name"), downwardFile("./a", "metadata.uid"))),
			[]string{"spec.volumes[4].downwardAPI.items[1].path"}},
		{"projected sources: empty, two at once, a missing Secret, a token, duplicate paths", nil, withVolume(projectedVolume(
			corev1.VolumeProjection{},
			corev1.VolumeProjection{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"},
				Items: []corev1.KeyToPath{{Key: "app.properties", Path: "x"}}},
				DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{downwardFile("x", "metadata.name")}}},
			corev1.VolumeProjection{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}}},
			corev1.VolumeProjection{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
		)),
			[]string{"spec.volumes[4].projected.sources[0]", "spec.volumes[4].projected.sources[1].downwardAPI.items[0].path",
				"spec.volumes[4].projected.sources[1].downwardAPI", "spec.volumes[4].projected.sources[2].secret.name",
				"spec.volumes[4].projected.sources[3].serviceAccountToken"}},
		{"persistentVolumeClaim without a valid name", nil, withVolume(corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "Shop_Data"}}}),
			[]string{"spec.volumes[4].persistentVolumeClaim.claimName"}},
		{"image volume without a reference, bad pull policy", nil, withVolume(corev1.Volume{Name: "model", VolumeSource: corev1.VolumeSource{
			Image: &corev1.ImageVolumeSource{PullPolicy: "Sometimes"}}}),
			[]string{"spec.volumes[4].image.reference", "spec.volumes[4].image.pullPolicy"}},
		{"subPath of an image volume", nil, func(in *input) {
			withVolume(corev1.Volume{Name: "model", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "m:1", PullPolicy: corev1.PullIfNotPresent}}})(in)
			in.pod.Spec.Containers[0].VolumeMounts = append(in.pod.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "model", MountPath: "/model", SubPath: "weights"})
		}, []string{"spec.containers[0].volumeMounts[4].subPath"}},
		{"env resourceFieldRef of an unknown resource and a bad cpu divisor", nil, web(func(c *corev1.Container) {
			c.Env = append(c.Env,
				corev1.EnvVar{Name: "X", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.nvidia.com/gpu"}}},
				corev1.EnvVar{Name: "Y", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu", Divisor: resource.MustParse("1Ki")}}})
		}), []string{"spec.containers[0].env[5].valueFrom.resourceFieldRef.resource", "spec.containers[0].env[6].valueFrom.resourceFieldRef.divisor"}},
		{"mount of an undefined volume", nil, web(func(c *corev1.Container) { c.VolumeMounts[2].Name = "scratch" }),
			[]string{"spec.containers[0].volumeMounts[2].name"}},
		{"relative mountPath", nil, web(func(c *corev1.Container) { c.VolumeMounts[2].MountPath = "cache" }),
			[]string{"spec.containers[0].volumeMounts[2].mountPath"}},
		{"duplicate mountPath", nil, web(func(c *corev1.Container) { c.VolumeMounts[2].MountPath = "/etc/app/" }),
			[]string{"spec.containers[0].volumeMounts[2].mountPath"}},
		{"subPath with ..", nil, web(func(c *corev1.Container) { c.VolumeMounts[3].SubPath = "shop/../../etc" }),
			[]string{"spec.containers[0].volumeMounts[3].subPath"}},
		{"absolute subPath", nil, web(func(c *corev1.Container) { c.VolumeMounts[3].SubPath = "/etc" }),
			[]string{"spec.containers[0].volumeMounts[3].subPath"}},

		// Probes and hooks.
		{"probe without handler", nil, web(func(c *corev1.Container) { c.LivenessProbe.HTTPGet = nil }),
			[]string{"spec.containers[0].livenessProbe"}},
		{"probe with two handlers", nil, web(func(c *corev1.Container) {
			c.LivenessProbe.TCPSocket = &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}
		}), []string{"spec.containers[0].livenessProbe.tcpSocket"}},
		{"probe port zero", nil, web(func(c *corev1.Container) { c.LivenessProbe.HTTPGet.Port = intstr.FromInt32(0) }),
			[]string{"spec.containers[0].livenessProbe.httpGet.port"}},
		{"probe named port not in the container", nil, web(func(c *corev1.Container) {
			c.StartupProbe.TCPSocket.Port = intstr.FromString("metrics")
		}), []string{"spec.containers[0].startupProbe.tcpSocket.port"}},
		{"probe scheme", nil, web(func(c *corev1.Container) { c.ReadinessProbe.HTTPGet.Scheme = "FTP" }),
			[]string{"spec.containers[0].readinessProbe.httpGet.scheme"}},
		{"probe header name", nil, web(func(c *corev1.Container) { c.ReadinessProbe.HTTPGet.HTTPHeaders[0].Name = "X Probe" }),
			[]string{"spec.containers[0].readinessProbe.httpGet.httpHeaders[0].name"}},
		{"liveness successThreshold", nil, web(func(c *corev1.Container) { c.LivenessProbe.SuccessThreshold = 2 }),
			[]string{"spec.containers[0].livenessProbe.successThreshold"}},
		{"negative periodSeconds", nil, web(func(c *corev1.Container) { c.ReadinessProbe.PeriodSeconds = -1 }),
			[]string{"spec.containers[0].readinessProbe.periodSeconds"}},
		{"readiness probe grace period", nil, web(func(c *corev1.Container) { c.ReadinessProbe.TerminationGracePeriodSeconds = ptr.To[int64](5) }),
			[]string{"spec.containers[0].readinessProbe.terminationGracePeriodSeconds"}},
		{"empty exec probe", nil, pod(func(p *corev1.Pod) { p.Spec.InitContainers[1].StartupProbe.Exec.Command = nil }),
			[]string{"spec.initContainers[1].startupProbe.exec.command"}},
		{"empty preStop command", nil, web(func(c *corev1.Container) { c.Lifecycle.PreStop.Exec.Command = nil }),
			[]string{"spec.containers[0].lifecycle.preStop.exec.command"}},
		{"hook without a handler", nil, web(func(c *corev1.Container) { c.Lifecycle.PostStart.Exec = nil }),
			[]string{"spec.containers[0].lifecycle.postStart"}},
		{"hook with two handlers", nil, web(func(c *corev1.Container) {
			c.Lifecycle.PostStart.Sleep = &corev1.SleepAction{Seconds: 1}
		}), []string{"spec.containers[0].lifecycle.postStart.sleep"}},
		{"tcpSocket hook", nil, web(func(c *corev1.Container) {
			c.Lifecycle.PreStop = &corev1.LifecycleHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}
		}), []string{"spec.containers[0].lifecycle.preStop.tcpSocket"}},
		{"httpGet hook port, scheme and header", nil, web(func(c *corev1.Container) {
			c.Lifecycle.PostStart = &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{
				Port: intstr.FromString("metrics"), Scheme: "ftp", HTTPHeaders: []corev1.HTTPHeader{{Name: "a b"}},
			}}
		}), []string{"spec.containers[0].lifecycle.postStart.httpGet.port", "spec.containers[0].lifecycle.postStart.httpGet.scheme",
			"spec.containers[0].lifecycle.postStart.httpGet.httpHeaders[0].name"}},
		{"sleep beyond the grace period", nil, web(func(c *corev1.Container) {
			c.Lifecycle.PreStop = &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 31}}
		}), []string{"spec.containers[0].lifecycle.preStop.sleep.seconds"}},
		{"negative sleep", nil, web(func(c *corev1.Container) {
			c.Lifecycle.PostStart = &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: -1}}
		}), []string{"spec.containers[0].lifecycle.postStart.sleep.seconds"}},
		{"stopSignal without os", nil, web(func(c *corev1.Container) { c.Lifecycle.StopSignal = ptr.To(corev1.SIGTERM) }),
			[]string{"spec.containers[0].lifecycle.stopSignal"}},
		{"stopSignal unknown", nil, pod(func(p *corev1.Pod) {
			p.Spec.OS = &corev1.PodOS{Name: corev1.Linux}
			p.Spec.Containers[0].Lifecycle.StopSignal = ptr.To(corev1.Signal("SIGFOO"))
		}), []string{"spec.containers[0].lifecycle.stopSignal"}},
		{"grpc probe port and mode", nil, web(func(c *corev1.Container) {
			c.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 0, Mode: ptr.To(corev1.GRPCProbeMode("h2c"))}}}
		}), []string{"spec.containers[0].livenessProbe.grpc.port", "spec.containers[0].livenessProbe.grpc.mode"}},
		{"grpc and exec probe", nil, web(func(c *corev1.Container) {
			c.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
				Exec: &corev1.ExecAction{Command: []string{"true"}}, GRPC: &corev1.GRPCAction{Port: 9090},
			}}
		}), []string{"spec.containers[0].livenessProbe.grpc"}},
		{"subPathExpr with subPath", nil, web(func(c *corev1.Container) {
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "cache", MountPath: "/logs", SubPath: "a", SubPathExpr: "$(POD_NAME)"})
		}), []string{"spec.containers[0].volumeMounts[4].subPathExpr"}},
		{"subPathExpr absolute or climbing", nil, web(func(c *corev1.Container) {
			c.VolumeMounts = append(c.VolumeMounts,
				corev1.VolumeMount{Name: "cache", MountPath: "/logs", SubPathExpr: "/$(POD_NAME)"},
				corev1.VolumeMount{Name: "cache", MountPath: "/up", SubPathExpr: "../$(POD_NAME)"})
		}), []string{"spec.containers[0].volumeMounts[4].subPathExpr", "spec.containers[0].volumeMounts[5].subPathExpr"}},
		{"mountPropagation unknown", nil, web(func(c *corev1.Container) {
			c.VolumeMounts[0].MountPropagation = ptr.To(corev1.MountPropagationMode("Shared"))
		}), []string{"spec.containers[0].volumeMounts[0].mountPropagation"}},
		{"Bidirectional unprivileged", nil, web(func(c *corev1.Container) {
			c.VolumeMounts[0].MountPropagation = ptr.To(corev1.MountPropagationBidirectional)
		}), []string{"spec.containers[0].volumeMounts[0].mountPropagation"}},
	}
	if len(tests) < 40 {
		t.Fatalf("the table must have at least 40 rows, has %d", len(tests))
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := options()
			if tt.opts != nil {
				opts = *tt.opts
			}
			errs := validatePod(tt.mutate, opts)
			checkPaths(t, errs, tt.want)
		})
	}
}

// checkPaths checks that errs are at the paths want, in order, and that
// each has a type and a description.
func checkPaths(t *testing.T, errs field.ErrorList, want []string) {
	t.Helper()
	var got []string
	for _, fe := range errs {
		got = append(got, fe.Field)
		if fe.Type == "" || fe.ErrorBody() == "" {
			t.Errorf("violation %q has no type or description", fe.Field)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("field paths (-want +got):\n%s\nviolations:\n%v", diff, errs.ToAggregate())
	}
}

// TestValidatePodPaths: the paths of the violations are below fldPath, and
// ValidatePod is ValidatePodMetadata then ValidatePodSpec.
func TestValidatePodPaths(t *testing.T) {
	p := basePod("web")
	p.Kind = "Deployment"
	p.Spec.Containers[1].Image = ""
	convert.Default(p)
	opts := validation.Options{Objects: validation.NewObjects([]*corev1.ConfigMap{baseConfigMap()}, []*corev1.Secret{baseSecret()})}
	root := field.NewPath("pods").Index(3)
	checkPaths(t, validation.ValidatePod(p, root, opts), []string{"pods[3].kind", "pods[3].spec.containers[1].image"})
	checkPaths(t, validation.ValidatePodMetadata(p, root), []string{"pods[3].kind"})
	checkPaths(t, validation.ValidatePodSpec(&p.Spec, &p.ObjectMeta, root.Child("spec"), opts), []string{"pods[3].spec.containers[1].image"})
	checkPaths(t, validation.ValidatePod(p, nil, opts), []string{"kind", "spec.containers[1].image"})
}

// TestValidatePodDoesNotChangeThePod: validation reads the pod only.
func TestValidatePodDoesNotChangeThePod(t *testing.T) {
	p := basePod("web")
	convert.Default(p)
	want := p.DeepCopy()
	_ = validation.ValidatePod(p, nil, validation.Options{})
	if diff := cmp.Diff(want, p); diff != "" {
		t.Errorf("pod changed (-before +after):\n%s", diff)
	}
}

// TestNodeLimitsSayTheyAreTheNodes: the bounds Kubernetes does not have
// (containers per pod, the grace period's maximum) say they are this
// node's and name podsyncd's flag that raises them; a client that does
// not know the node's limits (ClientLimits) leaves them to the node.
func TestNodeLimitsSayTheyAreTheNodes(t *testing.T) {
	p := basePod("web")
	convert.Default(p)
	p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](7200)
	for range 70 {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: fmt.Sprintf("c%d", len(p.Spec.Containers)), Image: "registry.local/busybox:1.37"})
	}
	opts := validation.Options{StoredObjects: true}
	var msgs []string
	for _, fe := range validation.ValidatePod(p, nil, opts) {
		msgs = append(msgs, fe.Error())
	}
	all := strings.Join(msgs, "\n")
	for _, want := range []string{"--max-containers-per-pod", "--max-grace-period-seconds", "this node's limit, not Kubernetes'"} {
		if !strings.Contains(all, want) {
			t.Errorf("the violations do not say %q:\n%s", want, all)
		}
	}
	opts.Limits = validation.ClientLimits()
	for _, fe := range validation.ValidatePod(p, nil, opts) {
		if fe.Field == "spec.containers" || fe.Field == "spec.terminationGracePeriodSeconds" {
			t.Errorf("ClientLimits checks the node's own limit: %v", fe)
		}
	}
}

// restartOn is a restart rule with action Restart.
func restartOn(op corev1.ContainerRestartRuleOnExitCodesOperator, codes ...int32) corev1.ContainerRestartRule {
	return corev1.ContainerRestartRule{
		Action:    corev1.ContainerRestartRuleActionRestart,
		ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: op, Values: codes},
	}
}
