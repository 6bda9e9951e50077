package server_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/convert"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/errorinfo"
	"github.com/podsync/podsync/server"
)

const testNode = "node-1"

// basePod is a valid pod that uses most of what validation checks: a
// classic init container and a sidecar, two containers with ports, probes,
// hooks, env from a ConfigMap, a Secret and the downward API, and a volume
// of each kind. It references the objects of baseConfigMap and baseSecret.
func basePod(name string) *podsyncv1.Pod {
	return &podsyncv1.Pod{
		ApiVersion: "v1",
		Kind:       "Pod",
		Metadata: &podsyncv1.ObjectMeta{
			Name:        name,
			Namespace:   "shop",
			Labels:      map[string]string{"app": name},
			Annotations: map[string]string{"example.com/owner": "team-storefront"},
		},
		Spec: &podsyncv1.PodSpec{
			RestartPolicy:                 "Always",
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			DnsConfig: &podsyncv1.PodDNSConfig{
				Nameservers: []string{"10.96.0.10"},
				Searches:    []string{"shop.svc.cluster.local"},
				Options:     []*podsyncv1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("2")}},
			},
			HostAliases: []*podsyncv1.HostAlias{{Ip: "192.0.2.10", Hostnames: []string{"registry.local"}}},
			SecurityContext: &podsyncv1.PodSecurityContext{
				RunAsUser: ptr.To[int64](1000),
				Sysctls:   []*podsyncv1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "80"}},
			},
			Volumes: []*podsyncv1.Volume{
				{Name: "config", ConfigMap: &podsyncv1.ConfigMapVolumeSource{
					Name:  "app-config",
					Items: []*podsyncv1.KeyToPath{{Key: "app.properties", Path: "app.properties", Mode: ptr.To[int32](0o440)}},
				}},
				{Name: "creds", Secret: &podsyncv1.SecretVolumeSource{SecretName: "db-credentials", DefaultMode: ptr.To[int32](0o400)}},
				{Name: "cache", EmptyDir: &podsyncv1.EmptyDirVolumeSource{Medium: "Memory", SizeLimit: "64Mi"}},
				{Name: "host", HostPath: &podsyncv1.HostPathVolumeSource{Path: "/var/lib/shop", Type: ptr.To("DirectoryOrCreate")}},
			},
			InitContainers: []*podsyncv1.Container{
				{
					Name:         "setup",
					Image:        "registry.local/busybox:1.37",
					Command:      []string{"sh", "-c", "true"},
					VolumeMounts: []*podsyncv1.VolumeMount{{Name: "cache", MountPath: "/cache"}},
				},
				{
					Name:          "shipper",
					Image:         "registry.local/busybox:1.37",
					RestartPolicy: ptr.To("Always"),
					StartupProbe:  &podsyncv1.Probe{Exec: &podsyncv1.ExecAction{Command: []string{"true"}}},
				},
			},
			Containers: []*podsyncv1.Container{
				{
					Name:  "web",
					Image: "registry.local/web:1.0",
					Ports: []*podsyncv1.ContainerPort{{Name: "http", ContainerPort: 8080, HostPort: 18080, HostIp: "127.0.0.1", Protocol: "TCP"}},
					Env: []*podsyncv1.EnvVar{
						{Name: "MODE", ValueFrom: &podsyncv1.EnvVarSource{ConfigMapKeyRef: &podsyncv1.ConfigMapKeySelector{Name: "app-config", Key: "MODE"}}},
						{Name: "DB_PASSWORD", ValueFrom: &podsyncv1.EnvVarSource{SecretKeyRef: &podsyncv1.SecretKeySelector{Name: "db-credentials", Key: "DB_PASSWORD"}}},
						{Name: "APP_LABEL", ValueFrom: &podsyncv1.EnvVarSource{FieldRef: &podsyncv1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}},
						{Name: "GREETING", Value: "hello"},
					},
					EnvFrom: []*podsyncv1.EnvFromSource{
						{Prefix: "APP_", ConfigMapRef: &podsyncv1.ConfigMapEnvSource{Name: "app-config"}},
						{SecretRef: &podsyncv1.SecretEnvSource{Name: "db-credentials"}},
					},
					Resources: &podsyncv1.ResourceRequirements{
						Requests: map[string]string{"cpu": "100m", "memory": "32Mi"},
						Limits:   map[string]string{"cpu": "500m", "memory": "64Mi"},
					},
					VolumeMounts: []*podsyncv1.VolumeMount{
						{Name: "config", MountPath: "/etc/app", ReadOnly: true},
						{Name: "creds", MountPath: "/etc/creds", ReadOnly: true},
						{Name: "cache", MountPath: "/cache"},
						{Name: "host", MountPath: "/data", SubPath: "shop"},
					},
					LivenessProbe: &podsyncv1.Probe{
						HttpGet:                       &podsyncv1.HTTPGetAction{Path: "/healthz", Port: structpb.NewNumberValue(8080)},
						TerminationGracePeriodSeconds: ptr.To[int64](5),
					},
					ReadinessProbe: &podsyncv1.Probe{
						HttpGet: &podsyncv1.HTTPGetAction{
							Path: "/ready", Port: structpb.NewStringValue("http"), Scheme: "HTTP",
							HttpHeaders: []*podsyncv1.HTTPHeader{{Name: "X-Probe", Value: "readiness"}},
						},
					},
					StartupProbe: &podsyncv1.Probe{TcpSocket: &podsyncv1.TCPSocketAction{Port: structpb.NewStringValue("http")}},
					Lifecycle: &podsyncv1.Lifecycle{
						PostStart: &podsyncv1.LifecycleHandler{Exec: &podsyncv1.ExecAction{Command: []string{"touch", "/tmp/started"}}},
						PreStop:   &podsyncv1.LifecycleHandler{Exec: &podsyncv1.ExecAction{Command: []string{"sleep", "1"}}},
					},
				},
				{
					Name:      "exporter",
					Image:     "registry.local/exporter@sha256:3be6086b3e45bfa801dc4ee51a083c856e6e92fa9942bf10add98d746b28b8dd",
					Ports:     []*podsyncv1.ContainerPort{{Name: "metrics", ContainerPort: 9113}},
					Resources: &podsyncv1.ResourceRequirements{Limits: map[string]string{"cpu": "50m", "memory": "16Mi"}},
				},
			},
		},
	}
}

func baseConfigMap() *podsyncv1.ConfigMap {
	return &podsyncv1.ConfigMap{
		ApiVersion: "v1",
		Kind:       "ConfigMap",
		Metadata:   &podsyncv1.ObjectMeta{Name: "app-config", Namespace: "shop"},
		Data:       map[string]string{"MODE": "production", "app.properties": "cache.dir=/cache\n"},
	}
}

func baseSecret() *podsyncv1.Secret {
	return &podsyncv1.Secret{
		Metadata: &podsyncv1.ObjectMeta{Name: "db-credentials", Namespace: "shop"},
		Data:     map[string][]byte{"DB_PASSWORD": []byte("s3cr3t")},
	}
}

func baseRunPods() *podsyncv1.RunPodsRequest {
	return &podsyncv1.RunPodsRequest{
		Pods:          []*podsyncv1.Pod{basePod("web"), basePod("api")},
		ConfigMaps:    []*podsyncv1.ConfigMap{baseConfigMap()},
		Secrets:       []*podsyncv1.Secret{baseSecret()},
		WaitFor:       podsyncv1.WaitFor_WAIT_FOR_READY,
		Timeout:       durationpb.New(10 * time.Minute),
		AdmissionMode: podsyncv1.AdmissionMode_ADMISSION_MODE_ALL_OR_NOTHING,
	}
}

// validateFunc validates one request built from a base request.
type validateFunc func(v *server.Validator) field.ErrorList

func runPods(mutate func(r *podsyncv1.RunPodsRequest)) validateFunc {
	return func(v *server.Validator) field.ErrorList {
		r := baseRunPods()
		mutate(r)
		return v.ValidateRunPodsRequest(r)
	}
}

// pod0 mutates the first pod of the base RunPodsRequest.
func pod0(mutate func(p *podsyncv1.Pod)) validateFunc {
	return runPods(func(r *podsyncv1.RunPodsRequest) { mutate(r.Pods[0]) })
}

// web and exporter mutate the first pod's containers.
func web(mutate func(c *podsyncv1.Container)) validateFunc {
	return pod0(func(p *podsyncv1.Pod) { mutate(p.Spec.Containers[0]) })
}

func exporter(mutate func(c *podsyncv1.Container)) validateFunc {
	return pod0(func(p *podsyncv1.Pod) { mutate(p.Spec.Containers[1]) })
}

func syncPod(mutate func(r *podsyncv1.SyncPodRequest)) validateFunc {
	return func(v *server.Validator) field.ErrorList {
		r := &podsyncv1.SyncPodRequest{
			Pod:        basePod("web"),
			ConfigMaps: []*podsyncv1.ConfigMap{baseConfigMap()},
			Secrets:    []*podsyncv1.Secret{baseSecret()},
		}
		mutate(r)
		return v.ValidateSyncPodRequest(r)
	}
}

func planPod(mutate func(r *podsyncv1.PlanPodRequest)) validateFunc {
	return func(v *server.Validator) field.ErrorList {
		r := &podsyncv1.PlanPodRequest{
			Pod:        basePod("web"),
			ConfigMaps: []*podsyncv1.ConfigMap{baseConfigMap()},
			Secrets:    []*podsyncv1.Secret{baseSecret()},
		}
		mutate(r)
		return v.ValidatePlanPodRequest(r)
	}
}

func getPod(mutate func(r *podsyncv1.GetPodRequest)) validateFunc {
	return func(v *server.Validator) field.ErrorList {
		r := &podsyncv1.GetPodRequest{Namespace: "shop", Name: "web"}
		mutate(r)
		return v.ValidateGetPodRequest(r)
	}
}

func listPods(mutate func(r *podsyncv1.ListPodsRequest)) validateFunc {
	return func(v *server.Validator) field.ErrorList {
		r := &podsyncv1.ListPodsRequest{Namespace: "shop", LabelSelector: "app=web,tier!=db", Phases: []string{"Running", "Pending"}}
		mutate(r)
		return v.ValidateListPodsRequest(r)
	}
}

func deletePod(mutate func(r *podsyncv1.DeletePodRequest)) validateFunc {
	return func(v *server.Validator) field.ErrorList {
		r := &podsyncv1.DeletePodRequest{
			Namespace: "shop", Name: "web", Uid: string(convert.PodUID("shop", "web")), GracePeriodSeconds: ptr.To[int64](0),
		}
		mutate(r)
		return v.ValidateDeletePodRequest(r)
	}
}

func watchPods(mutate func(r *podsyncv1.WatchPodsRequest)) validateFunc {
	return func(v *server.Validator) field.ErrorList {
		r := &podsyncv1.WatchPodsRequest{SinceRevision: 42, Namespace: "shop", LabelSelector: "app in (web,api)"}
		mutate(r)
		return v.ValidateWatchPodsRequest(r)
	}
}

func containerLogs(mutate func(r *podsyncv1.GetContainerLogsRequest)) validateFunc {
	return func(v *server.Validator) field.ErrorList {
		r := &podsyncv1.GetContainerLogsRequest{
			Namespace: "shop", Name: "web", Container: "web", Follow: true,
			TailLines: ptr.To[int64](10), LimitBytes: ptr.To[int64](1 << 20), SinceTime: timestamppb.New(time.Unix(1e9, 0)),
		}
		mutate(r)
		return v.ValidateGetContainerLogsRequest(r)
	}
}

func nop[T any](T) {}

// validator is the Validator the tables use unless a row brings its own.
func validator() *server.Validator {
	return &server.Validator{NodeName: testNode}
}

// TestValidateBaseRequests checks that every base request, and variations
// that look suspicious but are valid, validate clean, so that each row of
// TestValidateBadRequests fails only for its mutation.
func TestValidateBaseRequests(t *testing.T) {
	tests := []struct {
		name     string
		validate validateFunc
	}{
		{"RunPods", runPods(nop)},
		{"SyncPod", syncPod(nop)},
		{"PlanPod", planPod(nop)},
		{"GetPod", getPod(nop)},
		{"ListPods", listPods(nop)},
		{"DeletePod", deletePod(nop)},
		{"WatchPods", watchPods(nop)},
		{"GetContainerLogs", containerLogs(nop)},
		{"minimal RunPods", runPods(func(r *podsyncv1.RunPodsRequest) {
			*r = podsyncv1.RunPodsRequest{Pods: []*podsyncv1.Pod{{
				Metadata: &podsyncv1.ObjectMeta{Name: "min"},
				Spec:     &podsyncv1.PodSpec{Containers: []*podsyncv1.Container{{Name: "c", Image: "busybox"}}},
			}}}
		})},
		{"empty GetPod namespace", getPod(func(r *podsyncv1.GetPodRequest) { r.Namespace = "" })},
		{"empty ListPods", listPods(func(r *podsyncv1.ListPodsRequest) { *r = podsyncv1.ListPodsRequest{} })},
		{"own node name", pod0(func(p *podsyncv1.Pod) { p.Spec.NodeName = testNode })},
		{"timeout 24h", runPods(func(r *podsyncv1.RunPodsRequest) { r.Timeout = durationpb.New(24 * time.Hour) })},
		{"status is ignored", pod0(func(p *podsyncv1.Pod) { p.Status = &podsyncv1.PodStatus{Phase: "Bogus"} })},
		{"secret from stringData", runPods(func(r *podsyncv1.RunPodsRequest) {
			r.Secrets[0].Data = nil
			r.Secrets[0].StringData = map[string]string{"DB_PASSWORD": "s3cr3t"}
		})},
		{"limits at their bounds", func(*server.Validator) field.ErrorList {
			v := &server.Validator{Limits: server.Limits{MaxPodsPerRequest: 2, MaxContainersPerPod: 4, MaxEnvVarsPerContainer: 4}}
			return v.ValidateRunPodsRequest(baseRunPods())
		}},
		{"nil ListPods", func(v *server.Validator) field.ErrorList { return v.ValidateListPodsRequest(nil) }},
		{"nil WatchPods", func(v *server.Validator) field.ErrorList { return v.ValidateWatchPodsRequest(nil) }},
		{"nil Validator", func(*server.Validator) field.ErrorList {
			var v *server.Validator
			return v.ValidateRunPodsRequest(baseRunPods())
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if errs := tt.validate(validator()); len(errs) > 0 {
				t.Errorf("want no violations, got:\n%s", errs.ToAggregate())
			}
		})
	}
}

// TestValidateBadRequests runs each bad request through the validator and
// ToStatus, as a handler and the interceptor do, and checks the status is
// INVALID_ARGUMENT with exactly the expected field paths.
func TestValidateBadRequests(t *testing.T) {
	tests := []struct {
		name      string
		validator *server.Validator // nil: validator()
		validate  validateFunc
		want      []string
	}{
		// RunPods: the request.
		{"no pods", nil, runPods(func(r *podsyncv1.RunPodsRequest) { r.Pods = nil }), []string{"pods"}},
		{"too many pods", &server.Validator{Limits: server.Limits{MaxPodsPerRequest: 1}}, runPods(nop), []string{"pods"}},
		{"nil pod", nil, runPods(func(r *podsyncv1.RunPodsRequest) { r.Pods[1] = nil }), []string{"pods[1]"}},
		{"duplicate namespace/name", nil, runPods(func(r *podsyncv1.RunPodsRequest) { r.Pods[1].Metadata.Name = "web" }),
			[]string{"pods[1].metadata.name"}},
		{"duplicate uid", nil, runPods(func(r *podsyncv1.RunPodsRequest) {
			r.Pods[0].Metadata.Uid = "0f8fad5b-d9cb-469f-a165-70867728950e"
			r.Pods[1].Metadata.Uid = "0f8fad5b-d9cb-469f-a165-70867728950e"
		}), []string{"pods[1].metadata.uid"}},
		{"timeout zero", nil, runPods(func(r *podsyncv1.RunPodsRequest) { r.Timeout = durationpb.New(0) }), []string{"timeout"}},
		{"timeout above 24h", nil, runPods(func(r *podsyncv1.RunPodsRequest) { r.Timeout = durationpb.New(25 * time.Hour) }), []string{"timeout"}},
		{"minReadySeconds negative", nil, runPods(func(r *podsyncv1.RunPodsRequest) { r.MinReadySeconds = -1 }), []string{"minReadySeconds"}},
		{"minReadySeconds above an hour", nil, runPods(func(r *podsyncv1.RunPodsRequest) { r.MinReadySeconds = 3601 }), []string{"minReadySeconds"}},
		{"unknown waitFor", nil, runPods(func(r *podsyncv1.RunPodsRequest) { r.WaitFor = 99 }), []string{"waitFor"}},
		{"unknown admissionMode", nil, runPods(func(r *podsyncv1.RunPodsRequest) { r.AdmissionMode = 7 }), []string{"admissionMode"}},
		{"request too large", &server.Validator{Limits: server.Limits{MaxRequestBytes: 100}}, runPods(nop), []string{""}},

		// Pods: what the conversion from the API refuses, and the
		// server's node name and limits reaching validation. The rest of
		// a pod's content is validation's (validation TestValidatePodInvalid).
		{"spec missing", nil, pod0(func(p *podsyncv1.Pod) { p.Spec = nil }), []string{"pods[0].spec"}},
		{"ephemeral containers in a spec", nil, pod0(func(p *podsyncv1.Pod) {
			p.Spec.EphemeralContainers = []*podsyncv1.EphemeralContainer{{Name: "debug", Image: "registry.local/busybox:1"}}
		}), []string{"pods[0].spec.ephemeralContainers"}},
		{"quantity does not parse", nil, exporter(func(c *podsyncv1.Container) { c.Resources.Limits["cpu"] = "lots" }),
			[]string{"pods[0].spec.containers[1].resources.limits[cpu]"}},
		{"probe port not whole", nil, web(func(c *podsyncv1.Container) { c.LivenessProbe.HttpGet.Port = structpb.NewNumberValue(80.5) }),
			[]string{"pods[0].spec.containers[0].livenessProbe.httpGet.port"}},
		{"other node", nil, pod0(func(p *podsyncv1.Pod) { p.Spec.NodeName = "node-2" }), []string{"pods[0].spec.nodeName"}},
		{"too many containers", &server.Validator{Limits: server.Limits{MaxContainersPerPod: 3}}, runPods(nop),
			[]string{"pods[0].spec.containers", "pods[1].spec.containers"}},
		{"grace period above configured max", &server.Validator{Limits: server.Limits{MaxGracePeriodSeconds: 10}}, runPods(nop),
			[]string{"pods[0].spec.terminationGracePeriodSeconds", "pods[1].spec.terminationGracePeriodSeconds"}},
		{"too many env vars", &server.Validator{Limits: server.Limits{MaxEnvVarsPerContainer: 3}}, runPods(nop),
			[]string{"pods[0].spec.containers[0].env", "pods[1].spec.containers[0].env"}},

		// ConfigMaps and Secrets: uniqueness and the server's limits. Their
		// content is validation's (TestValidateConfigMap, TestValidateSecret).
		{"duplicate ConfigMap", nil, runPods(func(r *podsyncv1.RunPodsRequest) { r.ConfigMaps = append(r.ConfigMaps, baseConfigMap()) }),
			[]string{"configMaps[1].metadata.name"}},
		{"nil ConfigMap", nil, runPods(func(r *podsyncv1.RunPodsRequest) { r.ConfigMaps = append(r.ConfigMaps, nil) }),
			[]string{"configMaps[1]"}},
		{"duplicate Secret", nil, runPods(func(r *podsyncv1.RunPodsRequest) { r.Secrets = append(r.Secrets, baseSecret()) }),
			[]string{"secrets[1].metadata.name"}},
		{"ConfigMap too large", &server.Validator{Limits: server.Limits{MaxConfigMapBytes: 16}}, runPods(nop), []string{"configMaps[0]"}},
		{"Secret too large", &server.Validator{Limits: server.Limits{MaxSecretBytes: 8}}, runPods(nop), []string{"secrets[0]"}},
		{"Secret stringData key", nil, runPods(func(r *podsyncv1.RunPodsRequest) {
			r.Secrets[0].StringData = map[string]string{"db password": "x"}
		}), []string{"secrets[0].stringData[db password]"}},

		// SyncPod and PlanPod.
		{"SyncPod without pod", nil, syncPod(func(r *podsyncv1.SyncPodRequest) { r.Pod = nil }), []string{"pod"}},
		{"SyncPod image", nil, syncPod(func(r *podsyncv1.SyncPodRequest) { r.Pod.Spec.Containers[1].Image = "" }),
			[]string{"pod.spec.containers[1].image"}},
		{"SyncPod quantity", nil, syncPod(func(r *podsyncv1.SyncPodRequest) { r.Pod.Spec.Containers[1].Resources.Limits["cpu"] = "1x" }),
			[]string{"pod.spec.containers[1].resources.limits[cpu]"}},
		{"PlanPod name", nil, planPod(func(r *podsyncv1.PlanPodRequest) { r.Pod.Metadata.Name = "web." }), []string{"pod.metadata.name"}},
		{"PlanPod without spec", nil, planPod(func(r *podsyncv1.PlanPodRequest) { r.Pod.Spec = nil }), []string{"pod.spec"}},

		// GetPod, ListPods, DeletePod, WatchPods, GetContainerLogs.
		{"GetPod name missing", nil, getPod(func(r *podsyncv1.GetPodRequest) { r.Name = "" }), []string{"name"}},
		{"GetPod namespace", nil, getPod(func(r *podsyncv1.GetPodRequest) { r.Namespace = "Shop" }), []string{"namespace"}},
		{"ListPods selector", nil, listPods(func(r *podsyncv1.ListPodsRequest) { r.LabelSelector = "app in (web" }), []string{"labelSelector"}},
		{"ListPods phase", nil, listPods(func(r *podsyncv1.ListPodsRequest) { r.Phases[1] = "running" }), []string{"phases[1]"}},
		{"ListPods namespace", nil, listPods(func(r *podsyncv1.ListPodsRequest) { r.Namespace = "-shop" }), []string{"namespace"}},
		{"DeletePod uid", nil, deletePod(func(r *podsyncv1.DeletePodRequest) { r.Uid = "{0f8fad5b-d9cb-469f-a165-70867728950e}" }), []string{"uid"}},
		{"DeletePod negative grace", nil, deletePod(func(r *podsyncv1.DeletePodRequest) { r.GracePeriodSeconds = ptr.To[int64](-1) }),
			[]string{"gracePeriodSeconds"}},
		{"DeletePod grace above max", nil, deletePod(func(r *podsyncv1.DeletePodRequest) { r.GracePeriodSeconds = ptr.To[int64](7200) }),
			[]string{"gracePeriodSeconds"}},
		{"DeletePod name", nil, deletePod(func(r *podsyncv1.DeletePodRequest) { r.Name = "web/1" }), []string{"name"}},
		{"WatchPods negative revision", nil, watchPods(func(r *podsyncv1.WatchPodsRequest) { r.SinceRevision = -1 }), []string{"sinceRevision"}},
		{"WatchPods selector", nil, watchPods(func(r *podsyncv1.WatchPodsRequest) { r.LabelSelector = "=web" }), []string{"labelSelector"}},
		{"logs container", nil, containerLogs(func(r *podsyncv1.GetContainerLogsRequest) { r.Container = "Web" }), []string{"container"}},
		{"logs tailLines", nil, containerLogs(func(r *podsyncv1.GetContainerLogsRequest) { r.TailLines = ptr.To[int64](-1) }), []string{"tailLines"}},
		{"logs limitBytes", nil, containerLogs(func(r *podsyncv1.GetContainerLogsRequest) { r.LimitBytes = ptr.To[int64](0) }), []string{"limitBytes"}},
		{"logs sinceTime", nil, containerLogs(func(r *podsyncv1.GetContainerLogsRequest) {
			r.SinceTime = &timestamppb.Timestamp{Seconds: 1, Nanos: -1}
		}), []string{"sinceTime"}},
		{"logs name missing", nil, containerLogs(func(r *podsyncv1.GetContainerLogsRequest) { r.Name = "" }), []string{"name"}},

		// Nil requests, as a handler may receive them from a buggy client.
		{"nil RunPods", nil, func(v *server.Validator) field.ErrorList { return v.ValidateRunPodsRequest(nil) }, []string{"pods"}},
		{"nil SyncPod", nil, func(v *server.Validator) field.ErrorList { return v.ValidateSyncPodRequest(nil) }, []string{"pod"}},
		{"nil PlanPod", nil, func(v *server.Validator) field.ErrorList { return v.ValidatePlanPodRequest(nil) }, []string{"pod"}},
		{"nil GetPod", nil, func(v *server.Validator) field.ErrorList { return v.ValidateGetPodRequest(nil) }, []string{"name"}},
		{"nil DeletePod", nil, func(v *server.Validator) field.ErrorList { return v.ValidateDeletePodRequest(nil) }, []string{"name"}},
		{"nil GetContainerLogs", nil, func(v *server.Validator) field.ErrorList { return v.ValidateGetContainerLogsRequest(nil) }, []string{"name"}},
	}
	if len(tests) < 40 {
		t.Fatalf("the table must have at least 40 rows, has %d", len(tests))
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := tt.validator
			if v == nil {
				v = validator()
			}
			errs := tt.validate(v)
			st := server.ToStatus(server.InvalidRequest(errs))
			if st.Code() != codes.InvalidArgument {
				t.Fatalf("code = %s, want InvalidArgument; violations:\n%v", st.Code(), errs.ToAggregate())
			}
			info, br := details(t, st)
			if info.GetReason() != errorinfo.ReasonInvalidSpec || info.GetDomain() != errorinfo.Domain {
				t.Errorf("ErrorInfo = %v, want reason %s in %s", info, errorinfo.ReasonInvalidSpec, errorinfo.Domain)
			}
			var got []string
			for _, fv := range br.GetFieldViolations() {
				got = append(got, fv.GetField())
				if fv.GetDescription() == "" || fv.GetReason() == "" {
					t.Errorf("violation %q has no description or reason", fv.GetField())
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("field paths (-want +got):\n%s\nviolations:\n%v", diff, errs.ToAggregate())
			}
		})
	}
}

// TestValidateManifests checks that every manifest of testdata/manifests,
// decoded and defaulted as podsyncctl does, validates clean as a RunPods
// request and each of its pods as a SyncPod request.
func TestValidateManifests(t *testing.T) {
	files, err := filepath.Glob("../testdata/manifests/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 8 {
		t.Fatalf("want at least 8 manifests, found %d", len(files))
	}
	v := &server.Validator{}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			f, err := os.Open(file)
			if err != nil {
				t.Fatal(err)
			}
			m, err := convert.Decode(f)
			_ = f.Close()
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range m.Pods {
				convert.Default(p)
			}
			for _, cm := range m.ConfigMaps {
				convert.DefaultConfigMap(cm)
			}
			for _, s := range m.Secrets {
				convert.DefaultSecret(s)
			}
			pods, cms, secrets, err := convert.ManifestsToProto(m)
			if err != nil {
				t.Fatal(err)
			}
			run := &podsyncv1.RunPodsRequest{Pods: pods, ConfigMaps: cms, Secrets: secrets}
			if errs := v.ValidateRunPodsRequest(run); len(errs) > 0 {
				t.Errorf("RunPods: %v", errs.ToAggregate())
			}
			for _, p := range pods {
				sync := &podsyncv1.SyncPodRequest{Pod: p, ConfigMaps: cms, Secrets: secrets}
				if errs := v.ValidateSyncPodRequest(sync); len(errs) > 0 {
					t.Errorf("SyncPod %s: %v", p.GetMetadata().GetName(), errs.ToAggregate())
				}
			}
			// What PodsFromRequest returns is what convert gives for
			// the manifest.
			got, _, _, err := v.PodsFromRequest(run)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(m.Pods, got); diff != "" {
				t.Errorf("PodsFromRequest (-manifest +got):\n%s", diff)
			}
		})
	}
}

func TestPodsFromRequest(t *testing.T) {
	v := validator()

	t.Run("defaults", func(t *testing.T) {
		req := &podsyncv1.SyncPodRequest{
			Pod: &podsyncv1.Pod{
				Metadata: &podsyncv1.ObjectMeta{Name: "web", CreationTimestamp: timestamppb.Now()},
				Spec: &podsyncv1.PodSpec{Containers: []*podsyncv1.Container{{
					Name: "c", Image: "busybox",
					Resources: &podsyncv1.ResourceRequirements{Limits: map[string]string{"cpu": "1"}},
				}}},
				Status: &podsyncv1.PodStatus{Phase: "Running"},
			},
			ConfigMaps: []*podsyncv1.ConfigMap{{Metadata: &podsyncv1.ObjectMeta{Name: "cm"}}},
			Secrets:    []*podsyncv1.Secret{{Metadata: &podsyncv1.ObjectMeta{Name: "s"}, StringData: map[string]string{"k": "v"}}},
		}
		pods, cms, secrets, err := v.PodsFromRequest(req)
		if err != nil {
			t.Fatal(err)
		}
		if len(pods) != 1 || len(cms) != 1 || len(secrets) != 1 {
			t.Fatalf("got %d pods, %d ConfigMaps, %d Secrets; want one each", len(pods), len(cms), len(secrets))
		}
		pod := pods[0]
		if pod.Namespace != "default" || pod.UID != convert.PodUID("default", "web") ||
			pod.Spec.RestartPolicy != corev1.RestartPolicyAlways || pod.Spec.Containers[0].ImagePullPolicy != corev1.PullAlways {
			t.Errorf("pod not defaulted: %+v", pod)
		}
		if !pod.CreationTimestamp.IsZero() || pod.Status.Phase != "" {
			t.Errorf("creationTimestamp %v and status %+v must be cleared", pod.CreationTimestamp, pod.Status)
		}
		if got := pod.Spec.Containers[0].Resources.Requests.Cpu().String(); got != "1" {
			t.Errorf("cpu request = %s, want 1 (from the limit)", got)
		}
		if cms[0].Namespace != "default" || string(secrets[0].Data["k"]) != "v" || secrets[0].Type != corev1.SecretTypeOpaque {
			t.Errorf("ConfigMap %+v or Secret %+v not defaulted", cms[0], secrets[0])
		}
		if req.Pod.Status == nil || req.Pod.Metadata.Namespace != "" {
			t.Error("the request was changed")
		}
	})

	t.Run("invalid", func(t *testing.T) {
		req := baseRunPods()
		req.Pods[1].Spec.Containers[0].Resources.Limits["memory"] = "64 Mi"
		req.Pods[0].Spec.Containers[1].Image = ""
		pods, cms, secrets, err := v.PodsFromRequest(req)
		if pods != nil || cms != nil || secrets != nil {
			t.Errorf("want no objects with an error, got %v, %v, %v", pods, cms, secrets)
		}
		var ve *server.ValidationError
		if !errors.As(err, &ve) || !errors.Is(err, errdefs.ErrInvalidSpec) {
			t.Fatalf("err = %v, want a *ValidationError matching errdefs.ErrInvalidSpec", err)
		}
		var got []string
		for _, fe := range ve.Errors {
			got = append(got, fe.Field)
		}
		want := []string{"pods[0].spec.containers[1].image", "pods[1].spec.containers[0].resources.limits[memory]"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("paths (-want +got):\n%s", diff)
		}
	})

	t.Run("RunPods keeps request order", func(t *testing.T) {
		req := baseRunPods()
		pods, _, _, err := v.PodsFromRequest(req)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range pods {
			names = append(names, p.Name)
		}
		if diff := cmp.Diff([]string{"web", "api"}, names); diff != "" {
			t.Errorf("names (-want +got):\n%s", diff)
		}
	})
}

// TestValidationErrorMessage checks the message stays short however many
// violations there are, while the details list them all.
func TestValidationErrorMessage(t *testing.T) {
	var errs field.ErrorList
	for i := range 150 {
		errs = append(errs, field.Required(field.NewPath("pods").Index(i).Child("metadata", "name"), ""))
	}
	err := server.InvalidRequest(errs)
	msg := err.Error()
	if !strings.HasPrefix(msg, "invalid request: pods[0].metadata.name: Required value; ") || !strings.HasSuffix(msg, "; and 145 more") {
		t.Errorf("message = %q", msg)
	}
	_, br := details(t, server.ToStatus(err))
	fvs := br.GetFieldViolations()
	if len(fvs) != 101 || fvs[99].GetField() != "pods[99].metadata.name" || fvs[100].GetReason() != "TRUNCATED" {
		t.Errorf("want 100 violations and a TRUNCATED one, got %d, last %v", len(fvs), fvs[len(fvs)-1])
	}
	if server.InvalidRequest(nil) != nil {
		t.Error("InvalidRequest(nil) must be nil")
	}
}

// details unpacks the ErrorInfo and BadRequest of a status; it fails the
// test on any other detail or a duplicate.
func details(t *testing.T, st interface{ Details() []any }) (*errdetails.ErrorInfo, *errdetails.BadRequest) {
	t.Helper()
	var (
		info *errdetails.ErrorInfo
		br   *errdetails.BadRequest
	)
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			if info != nil {
				t.Errorf("two ErrorInfo details")
			}
			info = d
		case *errdetails.BadRequest:
			if br != nil {
				t.Errorf("two BadRequest details")
			}
			br = d
		default:
			t.Errorf("unexpected detail %T: %v", d, d)
		}
	}
	return info, br
}
