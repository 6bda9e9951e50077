package criconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/convert"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan/plantest"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func goldenOptions() Options {
	return Options{
		ClusterDNS:     []string{"10.96.0.10"},
		ClusterDomain:  "cluster.local",
		HostDNS:        &runtimeapi.DNSConfig{Servers: []string{"192.0.2.53"}, Searches: []string{"example.internal"}},
		NodeName:       "node-1",
		NodeIPs:        []string{"192.0.2.1"},
		MemoryCapacity: 8 << 30,
		NodeAllocatable: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("4"),
			corev1.ResourceMemory: resource.MustParse("8Gi"),
		},
	}
}

type goldenContainer struct {
	Name   string
	Env    []string                    `json:",omitempty"`
	Config *runtimeapi.ContainerConfig `json:",omitempty"`
	Error  string                      `json:",omitempty"`
}

type goldenPod struct {
	Name       string
	QOSClass   corev1.PodQOSClass
	Sandbox    *runtimeapi.PodSandboxConfig
	Containers []goldenContainer
}

func loadManifest(t *testing.T, name string) *convert.Manifests {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "testdata", "manifests", name))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	m, err := convert.Decode(f)
	if err != nil {
		t.Fatalf("decode %s: %v", name, err)
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
	return m
}

// TestConfigsGolden builds the sandbox and container configs of every
// testdata manifest and compares them with testdata/<manifest>.golden.json
// (go test ./engine/criconfig -run TestConfigsGolden -update rewrites them).
func TestConfigsGolden(t *testing.T) {
	manifests, err := filepath.Glob(filepath.Join("..", "..", "testdata", "manifests", "*.yaml"))
	if err != nil || len(manifests) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	for _, path := range manifests {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			m := loadManifest(t, name)
			var out []goldenPod
			for _, pod := range m.Pods {
				sb, err := SandboxConfig(pod, 0, goldenOptions())
				if err != nil {
					t.Fatalf("SandboxConfig(%s): %v", pod.Name, err)
				}
				g := goldenPod{Name: pod.Name, QOSClass: model.GetPodQOS(pod), Sandbox: sb}
				all := append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...)
				for i := range all {
					gc := goldenContainer{Name: all[i].Name}
					cfg, err := ContainerConfig(ContainerConfigInput{
						Pod: pod, Container: &all[i], PodIPs: []string{"10.88.0.5"},
						ConfigMaps: m.ConfigMaps, Secrets: m.Secrets,
					}, goldenOptions())
					if err != nil {
						gc.Error = err.Error()
					} else {
						for _, kv := range cfg.Envs {
							gc.Env = append(gc.Env, kv.Key+"="+string(kv.Value))
						}
						cfg.Envs = nil
						gc.Config = cfg
					}
					g.Containers = append(g.Containers, gc)
				}
				out = append(out, g)
			}
			got, err := json.MarshalIndent(out, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden := filepath.Join("testdata", strings.TrimSuffix(name, ".yaml")+".golden.json")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(want, got) {
				t.Errorf("configs differ from %s (-want +got):\n%s", golden, cmp.Diff(string(want), string(got)))
			}
		})
	}
}

func resources(req, lim map[corev1.ResourceName]string) corev1.ResourceRequirements {
	r := corev1.ResourceRequirements{}
	if req != nil {
		r.Requests = corev1.ResourceList{}
		for k, v := range req {
			r.Requests[k] = resource.MustParse(v)
		}
	}
	if lim != nil {
		r.Limits = corev1.ResourceList{}
		for k, v := range lim {
			r.Limits[k] = resource.MustParse(v)
		}
	}
	return r
}

const (
	cpu = corev1.ResourceCPU
	mem = corev1.ResourceMemory
)

// TestQOSAndCgroups checks QoS class, cgroup parent, CPU shares, quota,
// period, memory limit and OOM score against the kubelet's formulas.
func TestQOSAndCgroups(t *testing.T) {
	type want struct {
		qos      corev1.PodQOSClass
		cgroupfs string
		systemd  string
		shares   int64
		quota    int64
		memory   int64
		oomScore int64
	}
	tests := []struct {
		name      string
		resources []corev1.ResourceRequirements
		want      want
	}{
		{
			name:      "no requests or limits is BestEffort",
			resources: []corev1.ResourceRequirements{{}},
			want: want{corev1.PodQOSBestEffort, "/kubepods/besteffort/pod1234-ab",
				"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1234_ab.slice", 2, 0, 0, 1000},
		},
		{
			name:      "equal cpu and memory requests and limits is Guaranteed",
			resources: []corev1.ResourceRequirements{resources(map[corev1.ResourceName]string{cpu: "500m", mem: "64Mi"}, map[corev1.ResourceName]string{cpu: "500m", mem: "64Mi"})},
			want: want{corev1.PodQOSGuaranteed, "/kubepods/pod1234-ab",
				"/kubepods.slice/kubepods-pod1234_ab.slice", 512, 50000, 64 << 20, -997},
		},
		{
			name:      "requests below limits is Burstable",
			resources: []corev1.ResourceRequirements{resources(map[corev1.ResourceName]string{cpu: "100m", mem: "1Gi"}, map[corev1.ResourceName]string{cpu: "1", mem: "2Gi"})},
			want: want{corev1.PodQOSBurstable, "/kubepods/burstable/pod1234-ab",
				"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_ab.slice", 102, 100000, 2 << 30, 875},
		},
		{
			name:      "cpu limit only defaults shares to the limit and is Burstable",
			resources: []corev1.ResourceRequirements{resources(nil, map[corev1.ResourceName]string{cpu: "250m"})},
			want: want{corev1.PodQOSBurstable, "/kubepods/burstable/pod1234-ab",
				"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_ab.slice", 256, 25000, 0, 999},
		},
		{
			name:      "tiny cpu gets minimum shares and quota",
			resources: []corev1.ResourceRequirements{resources(map[corev1.ResourceName]string{cpu: "1m"}, map[corev1.ResourceName]string{cpu: "1m"})},
			want: want{corev1.PodQOSBurstable, "/kubepods/burstable/pod1234-ab",
				"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_ab.slice", 2, 1000, 0, 999},
		},
		{
			name:      "huge cpu request is capped at max shares",
			resources: []corev1.ResourceRequirements{resources(map[corev1.ResourceName]string{cpu: "300"}, nil)},
			want: want{corev1.PodQOSBurstable, "/kubepods/burstable/pod1234-ab",
				"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_ab.slice", 262144, 0, 0, 999},
		},
		{
			name: "one container without limits makes the pod Burstable",
			resources: []corev1.ResourceRequirements{
				resources(map[corev1.ResourceName]string{cpu: "1", mem: "1Gi"}, map[corev1.ResourceName]string{cpu: "1", mem: "1Gi"}),
				{},
			},
			want: want{corev1.PodQOSBurstable, "/kubepods/burstable/pod1234-ab",
				"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_ab.slice", 1024, 100000, 1 << 30, 875},
		},
		{
			name: "memory request near capacity gets the minimum burstable score",
			resources: []corev1.ResourceRequirements{
				resources(map[corev1.ResourceName]string{mem: "8Gi"}, nil),
			},
			want: want{corev1.PodQOSBurstable, "/kubepods/burstable/pod1234-ab",
				"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_ab.slice", 2, 0, 0, 3},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{}
			pod.Name, pod.Namespace, pod.UID = "p", "default", "1234-ab"
			for i, r := range tt.resources {
				pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: string(rune('a' + i)), Image: "x", Resources: r})
			}
			c := &pod.Spec.Containers[0]
			opts := Options{MemoryCapacity: 8 << 30}
			got := want{qos: model.ComputePodQOS(pod), cgroupfs: PodCgroupParent(pod, opts)}
			opts.CgroupDriver = "systemd"
			got.systemd = PodCgroupParent(pod, opts)
			cfg, err := ContainerConfig(ContainerConfigInput{Pod: pod, Container: c}, Options{MemoryCapacity: 8 << 30})
			if err != nil {
				t.Fatal(err)
			}
			r := cfg.Linux.Resources
			got.shares, got.quota, got.memory, got.oomScore = r.CpuShares, r.CpuQuota, r.MemoryLimitInBytes, r.OomScoreAdj
			if r.CpuPeriod != quotaPeriod {
				t.Errorf("CpuPeriod = %d, want %d", r.CpuPeriod, quotaPeriod)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPodCgroupParentCustomRoot(t *testing.T) {
	pod := &corev1.Pod{}
	pod.UID = "u-1"
	if got, want := PodCgroupParent(pod, Options{CgroupRoot: "/podsync"}), "/podsync/kubepods/besteffort/podu-1"; got != want {
		t.Errorf("PodCgroupParent = %q, want %q", got, want)
	}
}

// QoSCgroup names the cgroups a pod cgroup lives under, as the kubelet's
// QoS container manager: kubepods (the node's, Guaranteed pods' parent)
// and its burstable and besteffort children, below the cgroup root.
func TestQoSCgroup(t *testing.T) {
	tests := []struct {
		qos  corev1.PodQOSClass
		opts Options
		want string
	}{
		{corev1.PodQOSGuaranteed, Options{}, "/kubepods"},
		{corev1.PodQOSBestEffort, Options{}, "/kubepods/besteffort"},
		{corev1.PodQOSBurstable, Options{CgroupRoot: "/podsync-x/"}, "/podsync-x/kubepods/burstable"},
		{corev1.PodQOSGuaranteed, Options{CgroupDriver: "systemd"}, "/kubepods.slice"},
		{corev1.PodQOSBestEffort, Options{CgroupDriver: "systemd", CgroupRoot: "/podsync"}, "/podsync.slice/podsync-kubepods.slice/podsync-kubepods-besteffort.slice"},
	}
	for _, tt := range tests {
		if got := QoSCgroup(tt.qos, tt.opts); got != tt.want {
			t.Errorf("QoSCgroup(%s, %+v) = %q, want %q", tt.qos, tt.opts, got, tt.want)
		}
	}
}

func TestPodDNS(t *testing.T) {
	host := &runtimeapi.DNSConfig{Servers: []string{"192.0.2.53"}, Searches: []string{"example.internal"}, Options: []string{"rotate"}}
	tests := []struct {
		name   string
		mutate func(*corev1.Pod)
		opts   Options
		want   *runtimeapi.DNSConfig
	}{
		{
			name: "ClusterFirst uses cluster DNS and search domains",
			opts: Options{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local", HostDNS: host},
			want: &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: []string{"ns.svc.cluster.local", "svc.cluster.local", "cluster.local", "example.internal"}, Options: []string{"ndots:5"}},
		},
		{
			name: "ClusterFirst without cluster DNS falls back to the host's",
			opts: Options{HostDNS: host},
			want: &runtimeapi.DNSConfig{Servers: []string{"192.0.2.53"}, Searches: []string{"example.internal"}, Options: []string{"rotate"}},
		},
		{
			name:   "ClusterFirst with hostNetwork uses the host's",
			mutate: func(p *corev1.Pod) { p.Spec.HostNetwork = true },
			opts:   Options{ClusterDNS: []string{"10.96.0.10"}, HostDNS: host},
			want:   &runtimeapi.DNSConfig{Servers: []string{"192.0.2.53"}, Searches: []string{"example.internal"}, Options: []string{"rotate"}},
		},
		{
			name:   "ClusterFirstWithHostNet uses cluster DNS",
			mutate: func(p *corev1.Pod) { p.Spec.HostNetwork = true; p.Spec.DNSPolicy = corev1.DNSClusterFirstWithHostNet },
			opts:   Options{ClusterDNS: []string{"10.96.0.10"}, HostDNS: host},
			want:   &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: []string{"example.internal"}, Options: []string{"ndots:5"}},
		},
		{
			name:   "Default with an empty resolv-conf uses localhost",
			mutate: func(p *corev1.Pod) { p.Spec.DNSPolicy = corev1.DNSDefault },
			want:   &runtimeapi.DNSConfig{Servers: []string{"127.0.0.1"}, Searches: []string{"."}},
		},
		{
			name: "None takes only dnsConfig, options merged and sorted, servers capped at 3",
			mutate: func(p *corev1.Pod) {
				p.Spec.DNSPolicy = corev1.DNSNone
				p.Spec.DNSConfig = &corev1.PodDNSConfig{
					Nameservers: []string{"1.1.1.1", "8.8.8.8", "1.1.1.1", "9.9.9.9", "4.4.4.4"},
					Searches:    []string{"a.local"},
					Options:     []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("2")}, {Name: "edns0"}},
				}
			},
			opts: Options{ClusterDNS: []string{"10.96.0.10"}, HostDNS: host},
			want: &runtimeapi.DNSConfig{Servers: []string{"1.1.1.1", "8.8.8.8", "9.9.9.9"}, Searches: []string{"a.local"}, Options: []string{"edns0", "ndots:2"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{}
			pod.Name, pod.Namespace = "p", "ns"
			pod.Spec.DNSPolicy = corev1.DNSClusterFirst
			if tt.mutate != nil {
				tt.mutate(pod)
			}
			got, err := podDNS(pod, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b *runtimeapi.DNSConfig) bool {
				return cmp.Equal(a.Servers, b.Servers) && cmp.Equal(a.Searches, b.Searches) && cmp.Equal(a.Options, b.Options)
			})); diff != "" {
				t.Errorf("PodDNS mismatch (-want +got):\n%s\ngot %v", diff, got)
			}
		})
	}
	pod := &corev1.Pod{}
	pod.Spec.DNSPolicy = "Bogus"
	if _, err := podDNS(pod, Options{}); !errors.Is(err, errdefs.ErrInvalidSpec) {
		t.Errorf("PodDNS(bogus policy) error = %v, want ErrInvalidSpec", err)
	}
}

func TestContainerConfigErrors(t *testing.T) {
	pod := plantest.BasePod()
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{
		ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "missing"}, Key: "k"}}}}
	if _, err := ContainerConfig(ContainerConfigInput{Pod: pod, Container: &pod.Spec.Containers[0]}, Options{}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("missing configmap: error = %v, want ErrNotFound", err)
	}
	pod = plantest.BasePod()
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "nope", MountPath: "/x"}}
	if _, err := ContainerConfig(ContainerConfigInput{Pod: pod, Container: &pod.Spec.Containers[0]}, Options{}); !errors.Is(err, errdefs.ErrInvalidSpec) {
		t.Errorf("unknown volume: error = %v, want ErrInvalidSpec", err)
	}
	pod = plantest.BasePod()
	pod.Spec.Hostname = "Not_Valid"
	if _, err := SandboxConfig(pod, 0, Options{}); !errors.Is(err, errdefs.ErrInvalidSpec) {
		t.Errorf("invalid hostname: error = %v, want ErrInvalidSpec", err)
	}
}

func TestLabelsRoundTrip(t *testing.T) {
	pod := plantest.BasePod()
	pod.Labels = map[string]string{"app": "web"}
	pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 80, Protocol: corev1.ProtocolTCP}}
	pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"stop"}}}}
	c := &pod.Spec.Containers[0]

	sl := model.PodLabels(pod)
	if !model.IsManaged(sl) || sl["app"] != "web" {
		t.Errorf("PodLabels = %v, want managed and the pod's labels", sl)
	}
	if got := model.PodFromLabels(sl); got != (model.PodRef{Name: "web", Namespace: "shop", UID: "uid-1"}) {
		t.Errorf("PodFromLabels = %+v", got)
	}
	info := model.ContainerInfoFromLabels(model.ContainerLabels(pod, c))
	if info.ContainerName != "app" || info.UID != "uid-1" {
		t.Errorf("ContainerInfoFromLabels = %+v", info)
	}
	got := model.ContainerAnnotationsFrom(model.ContainerAnnotations(pod, c, 7))
	want := model.ContainerAnnotationInfo{
		Hash:                      model.ContainerHash(pod, c),
		RestartCount:              7,
		PodTerminationGracePeriod: ptr.To[int64](30),
		TerminationMessagePath:    "/dev/termination-log",
		TerminationMessagePolicy:  "File",
		PreStopHandler:            c.Lifecycle.PreStop,
		ContainerPorts:            c.Ports,
		Spec:                      model.NewContainerSpec(pod, c),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("annotations round trip mismatch (-want +got):\n%s", diff)
	}
	if model.IsManaged(map[string]string{model.LabelManaged: "false"}) {
		t.Error("IsManaged(false) = true")
	}
}

func TestNewRuntimeView(t *testing.T) {
	pod := plantest.BasePod()
	c := &pod.Spec.Containers[0]
	lbl := model.ContainerLabels(pod, c)
	ann := model.ContainerAnnotations(pod, c, 2)
	other := model.ContainerLabels(pod, c)
	delete(other, model.LabelManaged)
	view := model.NewRuntimeView("uid-1",
		[]*runtimeapi.PodSandboxStatus{
			{Id: "old", Metadata: &runtimeapi.PodSandboxMetadata{Attempt: 0}, CreatedAt: 1, Labels: model.PodLabels(pod)},
			{Id: "new", Metadata: &runtimeapi.PodSandboxMetadata{Attempt: 1}, CreatedAt: 2, State: runtimeapi.PodSandboxState_SANDBOX_READY,
				Network: &runtimeapi.PodSandboxNetworkStatus{Ip: "10.0.0.1", AdditionalIps: []*runtimeapi.PodIP{{Ip: "fd00::1"}}}, Labels: model.PodLabels(pod)},
		},
		[]*runtimeapi.ContainerStatus{
			{Id: "c1", CreatedAt: 5, State: runtimeapi.ContainerState_CONTAINER_EXITED, ExitCode: 1, Labels: lbl, Annotations: ann},
			{Id: "c2", CreatedAt: 9, State: runtimeapi.ContainerState_CONTAINER_RUNNING, Labels: lbl, Annotations: ann},
			{Id: "foreign", CreatedAt: 10, State: runtimeapi.ContainerState_CONTAINER_RUNNING, Labels: other},
		})
	if len(view.Sandboxes) != 2 || view.Sandboxes[0].ID != "new" || view.Sandboxes[0].State != model.SandboxReady ||
		!cmp.Equal(view.Sandboxes[0].IPs, []string{"10.0.0.1", "fd00::1"}) {
		t.Errorf("sandboxes = %+v, want new (ready, both IPs) then old", view.Sandboxes)
	}
	if len(view.Containers) != 2 || view.Containers[0].ID != "c2" || view.Containers[0].State != model.ContainerRunning ||
		view.Containers[1].RestartCount != 2 || view.Containers[1].Hash != model.ContainerHash(pod, c) || view.Containers[1].Name != "app" {
		t.Errorf("containers = %+v, want c2 then c1, unmanaged skipped", view.Containers)
	}
}

func TestSandboxNamespacesWithoutPodSecurityContext(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u-1"},
		Spec:       corev1.PodSpec{HostPID: true, Containers: []corev1.Container{{Name: "c", Image: "i"}}},
	}
	cfg, err := SandboxConfig(pod, 0, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ns := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions()
	if ns == nil || ns.Pid != runtimeapi.NamespaceMode_NODE {
		t.Errorf("namespace options = %v, want set (PID NODE) even without a pod security context", ns)
	}
}

// TestSandboxPodFields: shareProcessNamespace puts every container in the
// pod's PID namespace (false is the default, one per container);
// setHostnameAsFQDN makes the hostname the FQDN when the pod has a
// subdomain, as the kubelet's GetNodenameForKernel, and refuses one over
// 64 characters.
func TestSandboxPodFields(t *testing.T) {
	base := func() *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u-1"},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}},
		}
	}
	tests := []struct {
		name     string
		mutate   func(*corev1.Pod)
		pid      runtimeapi.NamespaceMode
		hostname string
		wantErr  string
	}{
		{"default", func(*corev1.Pod) {}, runtimeapi.NamespaceMode_CONTAINER, "p", ""},
		{"shareProcessNamespace false", func(p *corev1.Pod) { p.Spec.ShareProcessNamespace = ptr.To(false) }, runtimeapi.NamespaceMode_CONTAINER, "p", ""},
		{"shareProcessNamespace true", func(p *corev1.Pod) { p.Spec.ShareProcessNamespace = ptr.To(true) }, runtimeapi.NamespaceMode_POD, "p", ""},
		{"setHostnameAsFQDN with a subdomain", func(p *corev1.Pod) {
			p.Spec.Hostname, p.Spec.Subdomain, p.Spec.SetHostnameAsFQDN = "web", "pods", ptr.To(true)
		}, runtimeapi.NamespaceMode_CONTAINER, "web.pods.default.svc.cluster.local", ""},
		{"setHostnameAsFQDN false", func(p *corev1.Pod) {
			p.Spec.Hostname, p.Spec.Subdomain, p.Spec.SetHostnameAsFQDN = "web", "pods", ptr.To(false)
		}, runtimeapi.NamespaceMode_CONTAINER, "web", ""},
		{"setHostnameAsFQDN without a subdomain", func(p *corev1.Pod) {
			p.Spec.Hostname, p.Spec.SetHostnameAsFQDN = "web", ptr.To(true)
		}, runtimeapi.NamespaceMode_CONTAINER, "web", ""},
		{"hostnameOverride over hostname and subdomain", func(p *corev1.Pod) {
			p.Spec.Hostname, p.Spec.Subdomain, p.Spec.HostnameOverride = "web", "pods", ptr.To("override.example.host")
		}, runtimeapi.NamespaceMode_CONTAINER, "override.example.host", ""},
		{"an FQDN over 64 characters", func(p *corev1.Pod) {
			p.Spec.Hostname, p.Spec.Subdomain, p.Spec.SetHostnameAsFQDN = strings.Repeat("h", 30), strings.Repeat("s", 20), ptr.To(true)
		}, 0, "", "FQDN " + strings.Repeat("h", 30) + "." + strings.Repeat("s", 20) + ".default.svc.cluster.local is too long (64 characters is the max, 77 characters requested)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := base()
			tt.mutate(pod)
			cfg, err := SandboxConfig(pod, 0, Options{ClusterDomain: "cluster.local"})
			if tt.wantErr != "" {
				if !errors.Is(err, errdefs.ErrInvalidSpec) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("SandboxConfig error = %v, want ErrInvalidSpec with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetPid(); got != tt.pid {
				t.Errorf("PID namespace = %s, want %s", got, tt.pid)
			}
			if cfg.Hostname != tt.hostname {
				t.Errorf("hostname = %q, want %q", cfg.Hostname, tt.hostname)
			}
			// Every container joins the sandbox's PID namespace.
			cc, err := ContainerConfig(ContainerConfigInput{Pod: pod, Container: &pod.Spec.Containers[0]}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := cc.GetLinux().GetSecurityContext().GetNamespaceOptions().GetPid(); got != tt.pid {
				t.Errorf("container PID namespace = %s, want %s", got, tt.pid)
			}
		})
	}
}

// TestPodLevelResources: pod-level requests and limits, not the
// containers', make the QoS class, the pod cgroup and the sandbox's
// resources (the kubelet's calculateSandboxResources with
// PodLevelResources).
func TestPodLevelResources(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "1234-ab"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "a", Image: "x"}, {Name: "b", Image: "x",
				Resources: resources(map[corev1.ResourceName]string{cpu: "100m"}, nil)}},
			Resources: ptr.To(resources(map[corev1.ResourceName]string{cpu: "500m", mem: "64Mi"}, map[corev1.ResourceName]string{cpu: "500m", mem: "64Mi"})),
		},
	}
	if got := model.ComputePodQOS(pod); got != corev1.PodQOSGuaranteed {
		t.Errorf("QoS = %s, want Guaranteed from the pod-level resources", got)
	}
	if got := PodCgroupParent(pod, Options{}); got != "/kubepods/pod1234-ab" {
		t.Errorf("cgroup parent = %s, want the Guaranteed pod's", got)
	}
	cfg, err := SandboxConfig(pod, 0, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.GetLinux().GetResources()
	if r.CpuShares != 512 || r.CpuQuota != 50000 || r.MemoryLimitInBytes != 64<<20 {
		t.Errorf("sandbox resources shares %d quota %d memory %d, want 512, 50000, %d", r.CpuShares, r.CpuQuota, r.MemoryLimitInBytes, 64<<20)
	}
}

// TestPodOverhead: spec.overhead (the RuntimeClass's) is the sandbox's
// overhead, requests equal to limits, and not part of its resources (the
// kubelet's applySandboxResources: convertOverheadToLinuxResources and
// calculateSandboxResources with ExcludeOverhead); the pod cgroup's
// values count it (ResourceConfigForPod); the containers' do not.
func TestPodOverhead(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u-1"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Image: "i", Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
			}}},
			Overhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
		},
	}
	pod.Spec.Containers[0].Resources.Requests = pod.Spec.Containers[0].Resources.Limits.DeepCopy()
	cfg, err := SandboxConfig(pod, 0, Options{})
	if err != nil {
		t.Fatal(err)
	}
	oh, res := cfg.GetLinux().GetOverhead(), cfg.GetLinux().GetResources()
	if oh.GetMemoryLimitInBytes() != 32<<20 || oh.GetCpuQuota() != 10000 || oh.GetCpuShares() != 102 {
		t.Errorf("sandbox overhead = %v, want 32Mi, quota 10000, shares 102", oh)
	}
	if res.GetMemoryLimitInBytes() != 128<<20 || res.GetCpuQuota() != 50000 || res.GetCpuShares() != 512 {
		t.Errorf("sandbox resources = %v, want the containers' alone: 128Mi, quota 50000, shares 512", res)
	}
	cg := PodCgroupConfig(pod)
	if cg.Memory == nil || *cg.Memory != 160<<20 || cg.CPUQuota == nil || *cg.CPUQuota != 60000 || cg.CPUShares == nil || *cg.CPUShares != 614 {
		t.Errorf("pod cgroup = %+v, want the containers' and the overhead: 160Mi, quota 60000, shares 614", cg)
	}
	cc, err := ContainerConfig(ContainerConfigInput{Pod: pod, Container: &pod.Spec.Containers[0]}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r := cc.GetLinux().GetResources(); r.GetMemoryLimitInBytes() != 128<<20 || r.GetCpuQuota() != 50000 {
		t.Errorf("container resources = %v, want its own", r)
	}
}
