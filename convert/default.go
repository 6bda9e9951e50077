package convert

import (
	// Digest algorithms must be linked in for image references with a
	// digest to parse; the API server binary links both.
	_ "crypto/sha256"
	_ "crypto/sha512"

	"github.com/distribution/reference"
	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/validation"
)

// The functions in this file mirror the defaulting the Kubernetes API server
// applies to a Pod on create: SetObjectDefaults_Pod in
// k8s.io/kubernetes/pkg/apis/core/v1/zz_generated.defaults.go, which calls the
// SetDefaults_* functions of defaults.go in the same package, plus what the
// generic registry (k8s.io/apiserver rest.BeforeCreate) fills in, and the pod
// strategy's conversion of legacy seccomp and AppArmor annotations to fields
// (PrepareForCreate's applyAppArmorVersionSkew, and applySeccompVersionSkew
// of v1.19 to v1.26). Each default names the function it mirrors. They run
// in the API server's order.
//
// Defaults deliberately skipped, because podsync rejects the field they
// default, so they can never change a pod podsync accepts:
//   - volume sources other than emptyDir, hostPath, configMap and secret
//     (SetDefaults_DownwardAPIVolumeSource, SetDefaults_ProjectedVolumeSource,
//     SetDefaults_ServiceAccountTokenProjection, ISCSI, RBD, AzureDisk,
//     ScaleIO, ephemeral PVC templates, and image volumes' pullPolicy in
//     SetDefaults_Volume);
//   - pod-level resources (defaultHugePagePodLimits, defaultPodRequests,
//     defaultPodLimits in SetDefaults_Pod);
//   - status (SetDefaults_ResourceList on container statuses).
//
// Skipped because they belong to a full cluster, not to the API server's
// defaulting of the object: admission plugins (ServiceAccount, which sets
// serviceAccountName and mounts a token podsync has no API server to issue;
// Priority; DefaultTolerationSeconds; LimitRanger), the registry strategy's
// status (phase Pending, qosClass) and generation, and creationTimestamp,
// which would make Default neither deterministic nor idempotent.

// PodUIDNamespace is the UUID namespace in which PodUID derives pod UIDs. It
// is the name-based UUID of "https://podsync.io/pod-uid" in the URL
// namespace, uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://podsync.io/pod-uid")).
// It must never change: pod UIDs name runtime state that outlives podsync.
const PodUIDNamespace = "e7e107f4-3de7-5b59-a684-9ac4b0101aa1"

var podUIDNamespace = uuid.MustParse(PodUIDNamespace)

// PodUID returns the UID Default gives a pod that has none: the version 5
// (SHA-1, name-based) UUID of "<namespace>/<name>" in PodUIDNamespace. An
// empty namespace is taken as "default", as Default does, so a manifest
// without a namespace and one naming "default" get the same UID. Kubernetes
// names and namespaces cannot contain "/", so distinct pods get distinct UIDs.
func PodUID(namespace, name string) types.UID {
	if namespace == "" {
		namespace = metav1.NamespaceDefault
	}
	return types.UID(uuid.NewSHA1(podUIDNamespace, []byte(namespace+"/"+name)).String())
}

// Default applies, in place, the defaults the Kubernetes API server applies
// to a Pod on create, for the fields podsync accepts, and derives a missing
// metadata.uid with PodUID, and turns the legacy seccomp and AppArmor
// annotations into the seccompProfile and appArmorProfile fields they name
// (validation.ValidatePodMetadata refuses those it cannot). Fields already
// set are never changed, so Default is idempotent. Default does nothing if pod is nil.
func Default(pod *corev1.Pod) {
	if pod == nil {
		return
	}
	defaultObjectMeta(&pod.ObjectMeta)
	defaultPod(pod)
	defaultPodSpec(&pod.Spec)
	for i := range pod.Spec.Volumes {
		defaultVolume(&pod.Spec.Volumes[i])
	}
	for i := range pod.Spec.InitContainers {
		defaultContainer(&pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		defaultContainer(&pod.Spec.Containers[i])
	}
	for i := range pod.Spec.EphemeralContainers {
		DefaultEphemeralContainer(&pod.Spec.EphemeralContainers[i])
	}
	applySeccompVersionSkew(pod)
	applyAppArmorVersionSkew(pod)
}

// applySeccompVersionSkew mirrors the API server's applySeccompVersionSkew
// of v1.19 to v1.26 (pkg/registry/core/pod/strategy.go), in its direction
// from annotation to field: a seccomp.security.alpha.kubernetes.io/pod or
// container.seccomp.security.alpha.kubernetes.io/<name> annotation whose
// field is unset sets the field. Since v1.27 the API server ignores these
// annotations; podsync converts them rather than run a pod without the
// profile it asked for (validation refuses one it cannot convert). The
// annotations are kept, as the API server kept them.
func applySeccompVersionSkew(pod *corev1.Pod) {
	if v, ok := pod.Annotations[corev1.SeccompPodAnnotationKey]; ok && pod.Spec.SecurityContext.SeccompProfile == nil {
		pod.Spec.SecurityContext.SeccompProfile = validation.SeccompProfileForAnnotation(v)
	}
	visitContainers(&pod.Spec, func(c *corev1.Container) {
		v, ok := pod.Annotations[corev1.SeccompContainerAnnotationKeyPrefix+c.Name]
		if !ok || (c.SecurityContext != nil && c.SecurityContext.SeccompProfile != nil) {
			return
		}
		if f := validation.SeccompProfileForAnnotation(v); f != nil {
			if c.SecurityContext == nil {
				c.SecurityContext = &corev1.SecurityContext{}
			}
			c.SecurityContext.SeccompProfile = f
		}
	})
}

// applyAppArmorVersionSkew mirrors the API server's applyAppArmorVersionSkew
// (pkg/registry/core/pod/strategy.go): a
// container.apparmor.security.beta.kubernetes.io/<name> annotation sets the
// container's appArmorProfile when that is unset, the annotation names a
// valid profile, and it differs from the pod's profile.
func applyAppArmorVersionSkew(pod *corev1.Pod) {
	podProfile := pod.Spec.SecurityContext.AppArmorProfile
	visitContainers(&pod.Spec, func(c *corev1.Container) {
		v, ok := pod.Annotations[corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix+c.Name]
		if !ok || (c.SecurityContext != nil && c.SecurityContext.AppArmorProfile != nil) {
			return
		}
		f := validation.AppArmorProfileForAnnotation(v)
		if f == nil || validation.ValidateAppArmorProfile(f, nil) != nil || equality.Semantic.DeepEqual(f, podProfile) {
			return
		}
		if c.SecurityContext == nil {
			c.SecurityContext = &corev1.SecurityContext{}
		}
		c.SecurityContext.AppArmorProfile = f
	})
}

// visitContainers calls visit with each init and regular container.
func visitContainers(spec *corev1.PodSpec, visit func(*corev1.Container)) {
	for i := range spec.InitContainers {
		visit(&spec.InitContainers[i])
	}
	for i := range spec.Containers {
		visit(&spec.Containers[i])
	}
}

// DefaultConfigMap applies, in place, the defaults the Kubernetes API server
// applies to a ConfigMap on create. It does nothing if cm is nil.
func DefaultConfigMap(cm *corev1.ConfigMap) {
	if cm == nil {
		return
	}
	defaultNamespace(&cm.ObjectMeta)
	// SetDefaults_ConfigMap: data is an empty map, never null.
	if cm.Data == nil {
		cm.Data = make(map[string]string)
	}
}

// DefaultSecret applies, in place, the defaults the Kubernetes API server
// applies to a Secret on create, and folds stringData into data as the API
// server does: stringData is write-only, its entries overwrite those of data
// with the same key, and it is cleared. It does nothing if s is nil.
func DefaultSecret(s *corev1.Secret) {
	if s == nil {
		return
	}
	defaultNamespace(&s.ObjectMeta)
	// SetDefaults_Secret: the type is Opaque.
	if s.Type == "" {
		s.Type = corev1.SecretTypeOpaque
	}
	// Convert_v1_Secret_To_core_Secret: stringData overwrites data; the
	// internal type has no stringData, so it never comes back.
	if len(s.StringData) > 0 {
		if s.Data == nil {
			s.Data = make(map[string][]byte, len(s.StringData))
		}
		for k, v := range s.StringData {
			s.Data[k] = []byte(v)
		}
	}
	s.StringData = nil
}

// defaultNamespace mirrors the API server taking the namespace from the
// request path (rest.BeforeCreate), which kubectl sets to "default" when the
// manifest and the context name none.
func defaultNamespace(meta *metav1.ObjectMeta) {
	if meta.Namespace == "" {
		meta.Namespace = metav1.NamespaceDefault
	}
}

func defaultObjectMeta(meta *metav1.ObjectMeta) {
	defaultNamespace(meta)
	// rest.BeforeCreate draws a random UID; podsync derives one so that
	// re-sending a manifest addresses the same pod. A pod whose name is yet
	// to be generated (generateName) gets its UID with its name, from
	// podsyncd.
	if meta.UID == "" && meta.Name != "" {
		meta.UID = PodUID(meta.Namespace, meta.Name)
	}
}

// defaultPod mirrors SetDefaults_Pod.
func defaultPod(pod *corev1.Pod) {
	// SetDefaults_Pod: requests default to limits, per resource, for
	// regular and init containers (sidecars included).
	for i := range pod.Spec.Containers {
		defaultRequestsFromLimits(&pod.Spec.Containers[i].Resources)
	}
	for i := range pod.Spec.InitContainers {
		defaultRequestsFromLimits(&pod.Spec.InitContainers[i].Resources)
	}
	// SetDefaults_Pod (defaultPodRequests), after the containers' requests.
	defaultPodRequests(pod)
	// SetDefaults_Pod: enableServiceLinks is true.
	if pod.Spec.EnableServiceLinks == nil {
		pod.Spec.EnableServiceLinks = ptr.To(corev1.DefaultEnableServiceLinks)
	}
	// SetDefaults_Pod (defaultHostNetworkPorts): with host networking, each
	// container port without a hostPort is published on the same host port.
	if pod.Spec.HostNetwork {
		defaultHostNetworkPorts(pod.Spec.Containers)
		defaultHostNetworkPorts(pod.Spec.InitContainers)
	}
}

// defaultRequestsFromLimits mirrors the per-container loop of SetDefaults_Pod.
// As there, a non-nil but empty limits map still yields a non-nil requests map.
func defaultRequestsFromLimits(r *corev1.ResourceRequirements) {
	if r.Limits == nil {
		return
	}
	if r.Requests == nil {
		r.Requests = make(corev1.ResourceList, len(r.Limits))
	}
	for name, limit := range r.Limits {
		if _, ok := r.Requests[name]; !ok {
			r.Requests[name] = limit.DeepCopy()
		}
	}
}

// defaultHostNetworkPorts mirrors defaultHostNetworkPorts.
func defaultHostNetworkPorts(containers []corev1.Container) {
	for i := range containers {
		for j := range containers[i].Ports {
			p := &containers[i].Ports[j]
			if p.HostPort == 0 {
				p.HostPort = p.ContainerPort
			}
		}
	}
}

// defaultPodSpec mirrors SetDefaults_PodSpec.
func defaultPodSpec(spec *corev1.PodSpec) {
	if spec.DNSPolicy == "" {
		spec.DNSPolicy = corev1.DNSClusterFirst
	}
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = corev1.RestartPolicyAlways
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	if spec.TerminationGracePeriodSeconds == nil {
		spec.TerminationGracePeriodSeconds = ptr.To(int64(corev1.DefaultTerminationGracePeriodSeconds))
	}
	if spec.SchedulerName == "" {
		spec.SchedulerName = corev1.DefaultSchedulerName
	}
	// SetDefaults_ResourceList of spec.overhead.
	roundResourceList(spec.Overhead)
}

// defaultVolume mirrors SetDefaults_Volume and the defaulters of the volume
// sources podsync accepts.
func defaultVolume(v *corev1.Volume) {
	// SetDefaults_Volume: a volume with no source is an emptyDir.
	if ptr.AllPtrFieldsNil(&v.VolumeSource) {
		v.VolumeSource = corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
	}
	// SetDefaults_HostPathVolumeSource: the type is set, to "" (no check).
	if v.HostPath != nil && v.HostPath.Type == nil {
		v.HostPath.Type = ptr.To(corev1.HostPathUnset)
	}
	// SetDefaults_SecretVolumeSource: files are 0644. Items keep a nil mode,
	// which means defaultMode.
	if v.Secret != nil && v.Secret.DefaultMode == nil {
		v.Secret.DefaultMode = ptr.To(corev1.SecretVolumeSourceDefaultMode)
	}
	// SetDefaults_ConfigMapVolumeSource: files are 0644, as for secrets.
	if v.ConfigMap != nil && v.ConfigMap.DefaultMode == nil {
		v.ConfigMap.DefaultMode = ptr.To(corev1.ConfigMapVolumeSourceDefaultMode)
	}
	// SetDefaults_DownwardAPIVolumeSource, SetDefaults_ProjectedVolumeSource:
	// 0644 as well; SetDefaults_ObjectFieldSelector: fieldRef.apiVersion
	// is "v1" in their files too.
	if v.DownwardAPI != nil {
		if v.DownwardAPI.DefaultMode == nil {
			v.DownwardAPI.DefaultMode = ptr.To(corev1.DownwardAPIVolumeSourceDefaultMode)
		}
		defaultDownwardAPIFiles(v.DownwardAPI.Items)
	}
	if v.Projected != nil {
		if v.Projected.DefaultMode == nil {
			v.Projected.DefaultMode = ptr.To(corev1.ProjectedVolumeSourceDefaultMode)
		}
		for _, src := range v.Projected.Sources {
			if src.DownwardAPI != nil {
				defaultDownwardAPIFiles(src.DownwardAPI.Items)
			}
		}
	}
	// SetDefaults_ImageVolumeSource: the pull policy follows the
	// reference, as a container's follows its image.
	if v.Image != nil && v.Image.PullPolicy == "" {
		v.Image.PullPolicy = defaultPullPolicy(v.Image.Reference)
	}
}

func defaultDownwardAPIFiles(items []corev1.DownwardAPIVolumeFile) {
	for i := range items {
		if r := items[i].FieldRef; r != nil && r.APIVersion == "" {
			r.APIVersion = "v1"
		}
	}
}

// defaultContainer mirrors what SetObjectDefaults_Pod applies to each regular
// and init container. Sidecars (init containers with restartPolicy Always) get
// exactly the same defaults; the API server has none specific to them.
func defaultContainer(c *corev1.Container) {
	// SetDefaults_Container: the pull policy follows the image reference.
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = defaultPullPolicy(c.Image)
	}
	// SetDefaults_Container: termination message location and policy.
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	// ContainerPort.Protocol is declared +default="TCP".
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = corev1.ProtocolTCP
		}
	}
	// SetDefaults_ObjectFieldSelector: fieldRef.apiVersion is "v1".
	for i := range c.Env {
		if from := c.Env[i].ValueFrom; from != nil && from.FieldRef != nil && from.FieldRef.APIVersion == "" {
			from.FieldRef.APIVersion = "v1"
		}
	}
	// SetDefaults_ResourceList, after SetDefaults_Pod copied limits into
	// requests.
	roundResourceList(c.Resources.Limits)
	roundResourceList(c.Resources.Requests)
	defaultProbe(c.LivenessProbe)
	defaultProbe(c.ReadinessProbe)
	defaultProbe(c.StartupProbe)
	if lc := c.Lifecycle; lc != nil {
		for _, h := range []*corev1.LifecycleHandler{lc.PostStart, lc.PreStop} {
			if h != nil {
				defaultHTTPGet(h.HTTPGet)
			}
		}
	}
}

// defaultPullPolicy mirrors SetDefaults_Container's use of
// parsers.ParseImageName: Always when the tag is "latest", explicit or implied
// by a reference with neither tag nor digest; IfNotPresent otherwise, which
// includes a reference that does not parse (validation reports it). As in the
// API server, "name:latest@digest" is Always: the tag decides, not the digest.
func defaultPullPolicy(image string) corev1.PullPolicy {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return corev1.PullIfNotPresent
	}
	var tag string
	if t, ok := named.(reference.Tagged); ok {
		tag = t.Tag()
	}
	if _, digested := named.(reference.Digested); tag == "" && !digested {
		tag = "latest"
	}
	if tag == "latest" {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

// roundResourceList mirrors SetDefaults_ResourceList: quantities are rounded
// up to milli-units, so "100u" of CPU becomes "1m".
func roundResourceList(rl corev1.ResourceList) {
	for name, q := range rl {
		const milliScale = -3
		q.RoundUp(milliScale)
		rl[name] = q
	}
}

// defaultProbe mirrors SetDefaults_Probe and, for httpGet probes,
// SetDefaults_HTTPGetAction, and a grpc probe's service default.
func defaultProbe(p *corev1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	defaultHTTPGet(p.HTTPGet)
	// GRPCAction.Service is declared +default="".
	if g := p.GRPC; g != nil && g.Service == nil {
		g.Service = ptr.To("")
	}
}

// defaultHTTPGet mirrors SetDefaults_HTTPGetAction, for probes and
// lifecycle hooks alike.
func defaultHTTPGet(h *corev1.HTTPGetAction) {
	if h == nil {
		return
	}
	if h.Path == "" {
		h.Path = "/"
	}
	if h.Scheme == "" {
		h.Scheme = corev1.URISchemeHTTP
	}
}

// defaultPodRequests is the API server's defaultPodRequests
// (PodLevelResources): with pod-level limits, each supported pod-level
// resource without a pod-level request takes the containers' aggregate
// request (cpu and memory, which may be overcommitted) or, when no
// container requests it, the pod-level limit.
func defaultPodRequests(pod *corev1.Pod) {
	r := pod.Spec.Resources
	if r == nil || len(r.Limits) == 0 {
		return
	}
	reqs := r.Requests
	if reqs == nil {
		reqs = corev1.ResourceList{}
	}
	for name, q := range resourcehelper.AggregateContainerRequests(pod, resourcehelper.PodResourcesOptions{}) {
		if _, ok := reqs[name]; !ok && (name == corev1.ResourceCPU || name == corev1.ResourceMemory) {
			reqs[name] = q.DeepCopy()
		}
	}
	for name, q := range r.Limits {
		if _, ok := reqs[name]; !ok && resourcehelper.IsSupportedPodLevelResource(name) {
			reqs[name] = q.DeepCopy()
		}
	}
	if len(reqs) > 0 {
		r.Requests = reqs
	}
}

// DefaultEphemeralContainer fills in what the API server defaults in an
// ephemeral container (SetDefaults_EphemeralContainer: a container's
// defaults), for one added through the ephemeralcontainers subresource.
func DefaultEphemeralContainer(ec *corev1.EphemeralContainer) {
	defaultContainer((*corev1.Container)(&ec.EphemeralContainerCommon))
}
