package server

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/distribution/reference"
	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/convert"
)

// Defaults of Limits.
const (
	DefaultMaxPodsPerRequest       = 256
	DefaultMaxContainersPerPod     = 64
	DefaultMaxEnvVarsPerContainer  = 512
	DefaultMaxEnvBytesPerContainer = 1 << 20
	DefaultMaxConfigMapBytes       = 1 << 20
	DefaultMaxSecretBytes          = 1 << 20
	DefaultMaxRequestBytes         = 16 << 20
	DefaultMaxGracePeriodSeconds   = 3600
	DefaultMaxLabelSelectorBytes   = 4096
)

// Bounds of RunPodsRequest.timeout.
const (
	// DefaultRunPodsTimeout applies when a RunPodsRequest has no timeout.
	DefaultRunPodsTimeout = 5 * time.Minute
	// MaxRunPodsTimeout is the longest timeout a RunPodsRequest may ask for.
	MaxRunPodsTimeout = 24 * time.Hour
)

// Limits bound the size of what a request may ask for. A zero (or
// negative) field takes its default, so the zero Limits is DefaultLimits.
type Limits struct {
	// MaxPodsPerRequest bounds RunPodsRequest.pods. Default 256.
	MaxPodsPerRequest int
	// MaxContainersPerPod bounds a pod's init and regular containers
	// together. Default 64.
	MaxContainersPerPod int
	// MaxEnvVarsPerContainer bounds a container's env list. Default 512.
	MaxEnvVarsPerContainer int
	// MaxEnvBytesPerContainer bounds the names and values of a
	// container's env list together, in bytes. Default 1 MiB: Linux
	// refuses to start a process whose arguments and environment exceed
	// ARG_MAX (2 MiB with the default stack limit).
	MaxEnvBytesPerContainer int
	// MaxConfigMapBytes bounds the keys and values of one ConfigMap's data
	// and binaryData together. Default 1 MiB, as in Kubernetes.
	MaxConfigMapBytes int
	// MaxSecretBytes bounds the keys and values of one Secret's data and
	// stringData together. Default 1 MiB, as in Kubernetes.
	MaxSecretBytes int
	// MaxRequestBytes bounds the encoded size of a whole request. Default
	// 16 MiB. The gRPC server's grpc.MaxRecvMsgSize must be at least this
	// large for the limit to be the one that applies.
	MaxRequestBytes int
	// MaxGracePeriodSeconds bounds terminationGracePeriodSeconds (pod and
	// probe) and DeletePodRequest.grace_period_seconds. Default 3600.
	MaxGracePeriodSeconds int64
	// MaxLabelSelectorBytes bounds the label_selector of ListPods and
	// WatchPods, which a watch evaluates for every change. Default 4096.
	MaxLabelSelectorBytes int
}

// DefaultLimits returns the default Limits.
func DefaultLimits() Limits {
	return Limits{
		MaxPodsPerRequest:       DefaultMaxPodsPerRequest,
		MaxContainersPerPod:     DefaultMaxContainersPerPod,
		MaxEnvVarsPerContainer:  DefaultMaxEnvVarsPerContainer,
		MaxEnvBytesPerContainer: DefaultMaxEnvBytesPerContainer,
		MaxConfigMapBytes:       DefaultMaxConfigMapBytes,
		MaxSecretBytes:          DefaultMaxSecretBytes,
		MaxRequestBytes:         DefaultMaxRequestBytes,
		MaxGracePeriodSeconds:   DefaultMaxGracePeriodSeconds,
		MaxLabelSelectorBytes:   DefaultMaxLabelSelectorBytes,
	}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	orDefault := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	orDefault(&l.MaxPodsPerRequest, d.MaxPodsPerRequest)
	orDefault(&l.MaxContainersPerPod, d.MaxContainersPerPod)
	orDefault(&l.MaxEnvVarsPerContainer, d.MaxEnvVarsPerContainer)
	orDefault(&l.MaxEnvBytesPerContainer, d.MaxEnvBytesPerContainer)
	orDefault(&l.MaxLabelSelectorBytes, d.MaxLabelSelectorBytes)
	orDefault(&l.MaxConfigMapBytes, d.MaxConfigMapBytes)
	orDefault(&l.MaxSecretBytes, d.MaxSecretBytes)
	orDefault(&l.MaxRequestBytes, d.MaxRequestBytes)
	if l.MaxGracePeriodSeconds <= 0 {
		l.MaxGracePeriodSeconds = d.MaxGracePeriodSeconds
	}
	return l
}

// Validator checks requests before anything changes on the node. Each
// Validate method returns every violation it finds, with paths into the
// request in the API's JSON names ("pods[0].spec.containers[1].image"); an
// empty list means the request is valid. Wrap a non-empty list with
// InvalidRequest to return it from a handler.
//
// The zero Validator, and a nil *Validator, use DefaultLimits and accept any
// spec.nodeName that is a DNS-1123 subdomain. A Validator is safe for
// concurrent use; it is not changed by its methods.
type Validator struct {
	// Limits bound request sizes. Zero fields take their defaults.
	Limits Limits
	// NodeName is podsyncd's node name. When set, a pod's spec.nodeName
	// must be empty or equal to it.
	NodeName string
}

func (v *Validator) limits() Limits {
	if v == nil {
		return DefaultLimits()
	}
	return v.Limits.withDefaults()
}

func (v *Validator) nodeName() string {
	if v == nil {
		return ""
	}
	return v.NodeName
}

// PodsRequest is a request that carries pods with the ConfigMaps and
// Secrets they reference: *podsyncv1.RunPodsRequest,
// *podsyncv1.SyncPodRequest or *podsyncv1.PlanPodRequest.
type PodsRequest interface {
	proto.Message
	GetConfigMaps() []*podsyncv1.ConfigMap
	GetSecrets() []*podsyncv1.Secret
}

// PodsFromRequest converts the pods, ConfigMaps and Secrets of a RunPods,
// SyncPod or PlanPod request to core/v1, applies the API server's defaults
// (convert.Default, DefaultConfigMap, DefaultSecret) and validates the
// request as its Validate method does. Pods keep request order; their
// status and creationTimestamp, which requests may not set, are cleared.
//
// It returns a *ValidationError listing every violation, and no objects,
// when the request is invalid; a value that cannot be converted is a
// violation too, named with its request path
// ("pods[0].spec.containers[1].resources.limits[cpu]").
func (v *Validator) PodsFromRequest(req PodsRequest) (pods []*corev1.Pod, configMaps []*corev1.ConfigMap, secrets []*corev1.Secret, err error) {
	objs, errs := v.podsRequest(req)
	if len(errs) > 0 {
		return nil, nil, nil, InvalidRequest(errs)
	}
	return objs.pods, objs.configMaps, objs.secrets, nil
}

// ValidateRunPodsRequest validates a RunPodsRequest: its pods, ConfigMaps
// and Secrets (see PodsFromRequest), at least one and at most
// Limits.MaxPodsPerRequest pods, unique by namespace/name and by uid,
// wait_for and admission_mode known values, and a timeout, when set, above
// zero and at most MaxRunPodsTimeout.
func (v *Validator) ValidateRunPodsRequest(req *podsyncv1.RunPodsRequest) field.ErrorList {
	_, errs := v.podsRequest(req)
	return errs
}

// ValidateSyncPodRequest validates a SyncPodRequest: a pod is required, and
// it, the ConfigMaps and the Secrets must be valid (see PodsFromRequest).
func (v *Validator) ValidateSyncPodRequest(req *podsyncv1.SyncPodRequest) field.ErrorList {
	_, errs := v.podsRequest(req)
	return errs
}

// ValidatePlanPodRequest validates a PlanPodRequest as a SyncPodRequest.
func (v *Validator) ValidatePlanPodRequest(req *podsyncv1.PlanPodRequest) field.ErrorList {
	_, errs := v.podsRequest(req)
	return errs
}

// ValidateGetPodRequest validates a GetPodRequest: name is a DNS-1123
// subdomain, namespace empty or a DNS-1123 label.
func (v *Validator) ValidateGetPodRequest(req *podsyncv1.GetPodRequest) field.ErrorList {
	return validatePodName(nil, req.GetNamespace(), req.GetName())
}

// ValidateListPodsRequest validates a ListPodsRequest: namespace empty or a
// DNS-1123 label, label_selector in Kubernetes syntax and at most
// Limits.MaxLabelSelectorBytes long, phases known values.
func (v *Validator) ValidateListPodsRequest(req *podsyncv1.ListPodsRequest) field.ErrorList {
	errs := validateOptionalNamespace(field.NewPath("namespace"), req.GetNamespace())
	errs = append(errs, validateSelector(field.NewPath("labelSelector"), req.GetLabelSelector(), v.limits().MaxLabelSelectorBytes)...)
	for i, ph := range req.GetPhases() {
		if !slices.Contains(podPhases, corev1.PodPhase(ph)) {
			errs = append(errs, field.NotSupported(field.NewPath("phases").Index(i), ph, podPhases))
		}
	}
	return errs
}

// ValidateDeletePodRequest validates a DeletePodRequest: the pod's name and
// namespace as for GetPod, uid empty or a UUID, grace_period_seconds, when
// set, between 0 and Limits.MaxGracePeriodSeconds.
func (v *Validator) ValidateDeletePodRequest(req *podsyncv1.DeletePodRequest) field.ErrorList {
	if req == nil {
		req = &podsyncv1.DeletePodRequest{}
	}
	errs := validatePodName(nil, req.GetNamespace(), req.GetName())
	if uid := req.GetUid(); uid != "" {
		errs = append(errs, validateUID(field.NewPath("uid"), uid)...)
	}
	if req.GracePeriodSeconds != nil {
		errs = append(errs, validateGracePeriod(field.NewPath("gracePeriodSeconds"), *req.GracePeriodSeconds, 0, v.limits().MaxGracePeriodSeconds)...)
	}
	return errs
}

// ValidateWatchPodsRequest validates a WatchPodsRequest: since_revision not
// negative, namespace empty or a DNS-1123 label, label_selector in
// Kubernetes syntax and at most Limits.MaxLabelSelectorBytes long.
func (v *Validator) ValidateWatchPodsRequest(req *podsyncv1.WatchPodsRequest) field.ErrorList {
	var errs field.ErrorList
	if r := req.GetSinceRevision(); r < 0 {
		errs = append(errs, field.Invalid(field.NewPath("sinceRevision"), r, "must be greater than or equal to 0"))
	}
	errs = append(errs, validateOptionalNamespace(field.NewPath("namespace"), req.GetNamespace())...)
	errs = append(errs, validateSelector(field.NewPath("labelSelector"), req.GetLabelSelector(), v.limits().MaxLabelSelectorBytes)...)
	return errs
}

// ValidateGetContainerLogsRequest validates a GetContainerLogsRequest: the
// pod's name and namespace as for GetPod, container empty or a DNS-1123
// label, tail_lines not negative, limit_bytes at least 1, since_time a
// valid timestamp.
func (v *Validator) ValidateGetContainerLogsRequest(req *podsyncv1.GetContainerLogsRequest) field.ErrorList {
	if req == nil {
		req = &podsyncv1.GetContainerLogsRequest{}
	}
	errs := validatePodName(nil, req.GetNamespace(), req.GetName())
	if c := req.GetContainer(); c != "" {
		errs = append(errs, dns1123Label(field.NewPath("container"), c)...)
	}
	if req.TailLines != nil && *req.TailLines < 0 {
		errs = append(errs, field.Invalid(field.NewPath("tailLines"), *req.TailLines, "must be greater than or equal to 0"))
	}
	if req.LimitBytes != nil && *req.LimitBytes < 1 {
		errs = append(errs, field.Invalid(field.NewPath("limitBytes"), *req.LimitBytes, "must be greater than 0"))
	}
	if t := req.GetSinceTime(); t != nil {
		if err := t.CheckValid(); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("sinceTime"), t.String(), err.Error()))
		}
	}
	return errs
}

// requestObjects are the core/v1 objects of a request.
type requestObjects struct {
	pods       []*corev1.Pod
	configMaps []*corev1.ConfigMap
	secrets    []*corev1.Secret
}

// podsRequest converts, defaults and validates a request carrying pods.
func (v *Validator) podsRequest(req PodsRequest) (requestObjects, field.ErrorList) {
	lim := v.limits()
	var (
		errs field.ErrorList
		objs requestObjects
	)
	if n := proto.Size(req); n > lim.MaxRequestBytes {
		tooLong := field.TooLong(nil, nil, lim.MaxRequestBytes)
		tooLong.Field = "" // the whole request
		errs = append(errs, tooLong)
	}
	var (
		cmErrs, secErrs field.ErrorList
		idx             objectIndex
	)
	objs.configMaps, idx.configMaps, cmErrs = configMapsFromProto(field.NewPath("configMaps"), req.GetConfigMaps(), lim)
	objs.secrets, idx.secrets, secErrs = secretsFromProto(field.NewPath("secrets"), req.GetSecrets(), lim)
	errs = append(errs, cmErrs...)
	errs = append(errs, secErrs...)

	pv := &podValidator{lim: lim, nodeName: v.nodeName(), objs: idx}
	switch r := req.(type) {
	case *podsyncv1.RunPodsRequest:
		errs = append(errs, validateRunPodsOptions(r)...)
		podsPath := field.NewPath("pods")
		switch n := len(r.GetPods()); {
		case n == 0:
			errs = append(errs, field.Required(podsPath, "at least one pod is required"))
		case n > lim.MaxPodsPerRequest:
			errs = append(errs, field.TooMany(podsPath, n, lim.MaxPodsPerRequest))
		}
		byName := make(map[types.NamespacedName]bool)
		byUID := make(map[types.UID]bool)
		for i, in := range r.GetPods() {
			p := podsPath.Index(i)
			pod := pv.pod(p, in)
			if pod == nil {
				continue
			}
			objs.pods = append(objs.pods, pod)
			key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
			if byName[key] {
				pv.errs = append(pv.errs, field.Duplicate(p.Child("metadata", "name"), key.String()))
			} else if byUID[pod.UID] {
				pv.errs = append(pv.errs, field.Duplicate(p.Child("metadata", "uid"), string(pod.UID)))
			}
			byName[key] = true
			byUID[pod.UID] = true
		}
	case *podsyncv1.SyncPodRequest:
		if pod := pv.pod(field.NewPath("pod"), r.GetPod()); pod != nil {
			objs.pods = append(objs.pods, pod)
		}
	case *podsyncv1.PlanPodRequest:
		if pod := pv.pod(field.NewPath("pod"), r.GetPod()); pod != nil {
			objs.pods = append(objs.pods, pod)
		}
	default:
		errs = append(errs, field.InternalError(nil, fmt.Errorf("unexpected request type %T", req)))
	}
	errs = append(errs, pv.errs...)
	return objs, errs
}

func validateRunPodsOptions(r *podsyncv1.RunPodsRequest) field.ErrorList {
	var errs field.ErrorList
	if _, ok := podsyncv1.WaitFor_name[int32(r.GetWaitFor())]; !ok {
		errs = append(errs, field.NotSupported(field.NewPath("waitFor"), r.GetWaitFor().String(), enumNames(podsyncv1.WaitFor_name)))
	}
	if _, ok := podsyncv1.AdmissionMode_name[int32(r.GetAdmissionMode())]; !ok {
		errs = append(errs, field.NotSupported(field.NewPath("admissionMode"), r.GetAdmissionMode().String(), enumNames(podsyncv1.AdmissionMode_name)))
	}
	if t := r.GetTimeout(); t != nil {
		p := field.NewPath("timeout")
		if err := t.CheckValid(); err != nil {
			errs = append(errs, field.Invalid(p, t.String(), err.Error()))
		} else if d := t.AsDuration(); d <= 0 || d > MaxRunPodsTimeout {
			errs = append(errs, field.Invalid(p, d.String(), fmt.Sprintf("must be greater than 0 and at most %s", MaxRunPodsTimeout)))
		}
	}
	return errs
}

func enumNames(m map[int32]string) []string {
	return slices.Sorted(maps.Values(m))
}

// objectIndex finds the request's ConfigMaps and Secrets by namespace/name.
type objectIndex struct {
	configMaps map[types.NamespacedName]*corev1.ConfigMap
	secrets    map[types.NamespacedName]*corev1.Secret
}

func configMapsFromProto(p *field.Path, in []*podsyncv1.ConfigMap, lim Limits) ([]*corev1.ConfigMap, map[types.NamespacedName]*corev1.ConfigMap, field.ErrorList) {
	var errs field.ErrorList
	out := make([]*corev1.ConfigMap, 0, len(in))
	idx := make(map[types.NamespacedName]*corev1.ConfigMap, len(in))
	for i, m := range in {
		ip := p.Index(i)
		if m == nil {
			errs = append(errs, field.Required(ip, ""))
			continue
		}
		cm := convert.ConfigMapFromProto(m)
		convert.DefaultConfigMap(cm)
		errs = append(errs, validateTypeMeta(ip, cm.TypeMeta, "ConfigMap")...)
		errs = append(errs, validateObjectMeta(ip.Child("metadata"), &cm.ObjectMeta)...)
		size := 0
		for _, k := range slices.Sorted(maps.Keys(cm.Data)) {
			errs = append(errs, configMapKey(ip.Child("data").Key(k), k)...)
			size += len(k) + len(cm.Data[k])
		}
		for _, k := range slices.Sorted(maps.Keys(cm.BinaryData)) {
			kp := ip.Child("binaryData").Key(k)
			errs = append(errs, configMapKey(kp, k)...)
			if _, dup := cm.Data[k]; dup {
				errs = append(errs, field.Duplicate(kp, k))
			}
			size += len(k) + len(cm.BinaryData[k])
		}
		if size > lim.MaxConfigMapBytes {
			errs = append(errs, field.TooLong(ip, nil, lim.MaxConfigMapBytes))
		}
		key := types.NamespacedName{Namespace: cm.Namespace, Name: cm.Name}
		if _, dup := idx[key]; dup {
			errs = append(errs, field.Duplicate(ip.Child("metadata", "name"), key.String()))
		}
		idx[key] = cm
		out = append(out, cm)
	}
	return out, idx, errs
}

func secretsFromProto(p *field.Path, in []*podsyncv1.Secret, lim Limits) ([]*corev1.Secret, map[types.NamespacedName]*corev1.Secret, field.ErrorList) {
	var errs field.ErrorList
	out := make([]*corev1.Secret, 0, len(in))
	idx := make(map[types.NamespacedName]*corev1.Secret, len(in))
	for i, m := range in {
		ip := p.Index(i)
		if m == nil {
			errs = append(errs, field.Required(ip, ""))
			continue
		}
		s := convert.SecretFromProto(m)
		// Keys are checked before DefaultSecret folds stringData into
		// data, so that a violation names the field it was sent in.
		for _, k := range slices.Sorted(maps.Keys(s.Data)) {
			errs = append(errs, configMapKey(ip.Child("data").Key(k), k)...)
		}
		for _, k := range slices.Sorted(maps.Keys(s.StringData)) {
			errs = append(errs, configMapKey(ip.Child("stringData").Key(k), k)...)
		}
		convert.DefaultSecret(s)
		errs = append(errs, validateTypeMeta(ip, s.TypeMeta, "Secret")...)
		errs = append(errs, validateObjectMeta(ip.Child("metadata"), &s.ObjectMeta)...)
		if t := string(s.Type); len(validation.IsQualifiedName(t)) > 0 {
			errs = append(errs, field.Invalid(ip.Child("type"), t, "must be a qualified name, such as Opaque"))
		}
		size := 0
		for k, val := range s.Data {
			size += len(k) + len(val)
		}
		if size > lim.MaxSecretBytes {
			errs = append(errs, field.TooLong(ip, nil, lim.MaxSecretBytes))
		}
		key := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
		if _, dup := idx[key]; dup {
			errs = append(errs, field.Duplicate(ip.Child("metadata", "name"), key.String()))
		}
		idx[key] = s
		out = append(out, s)
	}
	return out, idx, errs
}

// podValidator validates the pods of one request and collects violations.
type podValidator struct {
	lim      Limits
	nodeName string
	objs     objectIndex
	errs     field.ErrorList
	// skipRefs turns off the checks that referenced ConfigMaps and
	// Secrets are in the request, for a pod whose namespace is invalid.
	skipRefs bool
}

func (pv *podValidator) add(errs ...*field.Error) {
	pv.errs = append(pv.errs, errs...)
}

// pod converts, defaults and validates one pod at path p. It returns nil
// when the pod cannot be converted.
func (pv *podValidator) pod(p *field.Path, in *podsyncv1.Pod) *corev1.Pod {
	if in == nil {
		pv.add(field.Required(p, ""))
		return nil
	}
	pod, err := convert.PodFromProto(in)
	if err != nil {
		var inv *convert.InvalidError
		if !errors.As(err, &inv) {
			pv.add(field.InternalError(p, err))
			return nil
		}
		// The conversion's paths are relative to the pod.
		for _, fe := range inv.Errors {
			c := *fe
			c.Field = p.String() + "." + fe.Field
			pv.add(&c)
		}
		return nil
	}
	// Requests may not set what only podsyncd observes.
	pod.Status = corev1.PodStatus{}
	pod.CreationTimestamp = metav1.Time{}
	pod.DeletionTimestamp, pod.DeletionGracePeriodSeconds = nil, nil
	convert.Default(pod)

	pv.skipRefs = len(validation.IsDNS1123Label(pod.Namespace)) > 0
	pv.add(validateTypeMeta(p, pod.TypeMeta, "Pod")...)
	pv.add(validateObjectMeta(p.Child("metadata"), &pod.ObjectMeta)...)
	pv.add(validateUID(p.Child("metadata", "uid"), string(pod.UID))...)
	// The pod's log directory is named <namespace>_<name>_<uid>, one file
	// name (the kubelet's layout).
	if maxName := maxFileNameBytes - len(pod.Namespace) - len(pod.UID) - 2; !pv.skipRefs && len(pod.UID) == 36 && len(pod.Name) > maxName {
		pv.add(field.Invalid(p.Child("metadata", "name"), pod.Name, fmt.Sprintf(
			"must be at most %d bytes long in namespace %q: the log directory name <namespace>_<name>_<uid> may not exceed %d bytes",
			maxName, pod.Namespace, maxFileNameBytes)))
	}
	if in.GetSpec() == nil {
		pv.add(field.Required(p.Child("spec"), ""))
		return pod
	}
	pv.spec(p.Child("spec"), pod)
	return pod
}

var (
	restartPolicies        = []corev1.RestartPolicy{corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever}
	dnsPolicies            = []corev1.DNSPolicy{corev1.DNSClusterFirst, corev1.DNSClusterFirstWithHostNet, corev1.DNSDefault, corev1.DNSNone}
	pullPolicies           = []corev1.PullPolicy{corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever}
	protocols              = []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP}
	terminationMsgPolicies = []corev1.TerminationMessagePolicy{corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError}
	storageMedia           = []corev1.StorageMedium{corev1.StorageMediumDefault, corev1.StorageMediumMemory}
	uriSchemes             = []corev1.URIScheme{corev1.URISchemeHTTP, corev1.URISchemeHTTPS}
	initRestartPolicies    = []corev1.ContainerRestartPolicy{corev1.ContainerRestartPolicyAlways}
	podPhases              = []corev1.PodPhase{corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed, corev1.PodUnknown}
	hostPathTypes          = []corev1.HostPathType{
		corev1.HostPathUnset, corev1.HostPathDirectoryOrCreate, corev1.HostPathDirectory, corev1.HostPathFileOrCreate,
		corev1.HostPathFile, corev1.HostPathSocket, corev1.HostPathCharDev, corev1.HostPathBlockDev,
	}
	// envFieldPaths are the downward API fields an env var may select,
	// besides metadata.labels['key'] and metadata.annotations['key'].
	envFieldPaths = []string{
		"metadata.name", "metadata.namespace", "metadata.uid",
		"spec.nodeName", "status.podIP", "status.podIPs", "status.hostIP", "status.hostIPs",
	}
)

// Kubernetes' bounds on DNS configuration (k8s.io/kubernetes
// pkg/apis/core/validation).
const (
	maxDNSNameservers     = 3
	maxDNSSearchPaths     = 32
	maxDNSSearchListChars = 2048
)

func (pv *podValidator) spec(p *field.Path, pod *corev1.Pod) {
	spec := &pod.Spec
	if !slices.Contains(restartPolicies, spec.RestartPolicy) {
		pv.add(field.NotSupported(p.Child("restartPolicy"), spec.RestartPolicy, restartPolicies))
	}
	if g := spec.TerminationGracePeriodSeconds; g != nil {
		pv.add(validateGracePeriod(p.Child("terminationGracePeriodSeconds"), *g, 0, pv.lim.MaxGracePeriodSeconds)...)
	}
	if d := spec.ActiveDeadlineSeconds; d != nil && *d <= 0 {
		pv.add(field.Invalid(p.Child("activeDeadlineSeconds"), *d, "must be greater than 0"))
	}
	if spec.Hostname != "" {
		pv.add(dns1123Label(p.Child("hostname"), spec.Hostname)...)
	}
	if spec.Subdomain != "" {
		pv.add(dns1123Label(p.Child("subdomain"), spec.Subdomain)...)
	}
	if n := spec.NodeName; n != "" {
		if pv.nodeName != "" && n != pv.nodeName {
			pv.add(field.Invalid(p.Child("nodeName"), n, fmt.Sprintf("must be empty or this node's name %q", pv.nodeName)))
		} else {
			pv.add(dns1123Subdomain(p.Child("nodeName"), n)...)
		}
	}
	pv.dns(p, spec)
	for i, h := range spec.HostAliases {
		hp := p.Child("hostAliases").Index(i)
		pv.add(validation.IsValidIP(hp.Child("ip"), h.IP)...)
		for j, name := range h.Hostnames {
			pv.add(dns1123Subdomain(hp.Child("hostnames").Index(j), name)...)
		}
	}
	pv.podSecurityContext(p.Child("securityContext"), spec.SecurityContext)
	volumes := pv.volumes(p.Child("volumes"), pod.Namespace, spec.Volumes)

	if len(spec.Containers) == 0 {
		pv.add(field.Required(p.Child("containers"), "at least one container is required"))
	}
	if n := len(spec.Containers) + len(spec.InitContainers); n > pv.lim.MaxContainersPerPod {
		tooMany := field.TooMany(p.Child("containers"), n, pv.lim.MaxContainersPerPod)
		tooMany.Detail += ", init and regular containers together"
		pv.add(tooMany)
	}
	pc := &podContainers{
		names:     make(map[string]bool),
		portNames: make(map[string]bool),
	}
	for i := range spec.InitContainers {
		pv.container(p.Child("initContainers").Index(i), pod, &spec.InitContainers[i], true, volumes, pc)
	}
	for i := range spec.Containers {
		pv.container(p.Child("containers").Index(i), pod, &spec.Containers[i], false, volumes, pc)
	}
}

func (pv *podValidator) dns(p *field.Path, spec *corev1.PodSpec) {
	if !slices.Contains(dnsPolicies, spec.DNSPolicy) {
		pv.add(field.NotSupported(p.Child("dnsPolicy"), spec.DNSPolicy, dnsPolicies))
	}
	cfg := spec.DNSConfig
	if spec.DNSPolicy == corev1.DNSNone {
		switch {
		case cfg == nil:
			pv.add(field.Required(p.Child("dnsConfig"), "must provide dnsConfig when dnsPolicy is None"))
		case len(cfg.Nameservers) == 0:
			pv.add(field.Required(p.Child("dnsConfig", "nameservers"), "must provide at least one DNS nameserver when dnsPolicy is None"))
		}
	}
	if cfg == nil {
		return
	}
	cp := p.Child("dnsConfig")
	if n := len(cfg.Nameservers); n > maxDNSNameservers {
		pv.add(field.TooMany(cp.Child("nameservers"), n, maxDNSNameservers))
	}
	for i, ns := range cfg.Nameservers {
		pv.add(validation.IsValidIP(cp.Child("nameservers").Index(i), ns)...)
	}
	if n := len(cfg.Searches); n > maxDNSSearchPaths {
		pv.add(field.TooMany(cp.Child("searches"), n, maxDNSSearchPaths))
	}
	if n := len(strings.Join(cfg.Searches, " ")); n > maxDNSSearchListChars {
		pv.add(field.TooLong(cp.Child("searches"), nil, maxDNSSearchListChars))
	}
	for i, s := range cfg.Searches {
		// A trailing dot (a fully qualified name) and "." itself are
		// allowed, as in Kubernetes.
		if s == "." {
			continue
		}
		pv.add(dns1123Subdomain(cp.Child("searches").Index(i), strings.TrimSuffix(s, "."))...)
	}
	for i, o := range cfg.Options {
		if o.Name == "" {
			pv.add(field.Required(cp.Child("options").Index(i).Child("name"), ""))
		}
	}
}

var sysctlRE = regexp.MustCompile(`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$`)

const maxSysctlNameLen = 253

func (pv *podValidator) podSecurityContext(p *field.Path, sc *corev1.PodSecurityContext) {
	if sc == nil {
		return
	}
	pv.add(userID(p.Child("runAsUser"), sc.RunAsUser)...)
	pv.add(groupID(p.Child("runAsGroup"), sc.RunAsGroup)...)
	pv.add(groupID(p.Child("fsGroup"), sc.FSGroup)...)
	for i, g := range sc.SupplementalGroups {
		pv.add(groupID(p.Child("supplementalGroups").Index(i), &g)...)
	}
	seen := make(map[string]bool, len(sc.Sysctls))
	for i, s := range sc.Sysctls {
		sp := p.Child("sysctls").Index(i)
		switch {
		case s.Name == "":
			pv.add(field.Required(sp.Child("name"), ""))
		case len(s.Name) > maxSysctlNameLen:
			pv.add(field.TooLong(sp.Child("name"), s.Name, maxSysctlNameLen))
		case !sysctlRE.MatchString(s.Name):
			pv.add(field.Invalid(sp.Child("name"), s.Name, "must be a sysctl name of lower-case segments separated by '.' or '/', such as net.ipv4.ip_forward"))
		case seen[s.Name]:
			pv.add(field.Duplicate(sp.Child("name"), s.Name))
		}
		seen[s.Name] = true
		if s.Value == "" {
			pv.add(field.Required(sp.Child("value"), ""))
		}
	}
}

// volumes validates the pod's volumes and returns their names.
func (pv *podValidator) volumes(p *field.Path, namespace string, vols []corev1.Volume) map[string]bool {
	names := make(map[string]bool, len(vols))
	for i := range vols {
		vol := &vols[i]
		vp := p.Index(i)
		switch {
		case vol.Name == "":
			pv.add(field.Required(vp.Child("name"), ""))
		case names[vol.Name]:
			pv.add(field.Duplicate(vp.Child("name"), vol.Name))
		default:
			pv.add(dns1123Label(vp.Child("name"), vol.Name)...)
		}
		names[vol.Name] = true

		// convert.Default made a volume without a source an emptyDir, as
		// the API server does; more than one is an error.
		var sources []string
		if s := vol.EmptyDir; s != nil {
			sources = append(sources, "emptyDir")
			sp := vp.Child("emptyDir")
			if !slices.Contains(storageMedia, s.Medium) {
				pv.add(field.NotSupported(sp.Child("medium"), s.Medium, storageMedia))
			}
			if s.SizeLimit != nil && s.SizeLimit.Sign() < 0 {
				pv.add(field.Invalid(sp.Child("sizeLimit"), s.SizeLimit.String(), "must be greater than or equal to 0"))
			}
		}
		if s := vol.HostPath; s != nil {
			sources = append(sources, "hostPath")
			sp := vp.Child("hostPath")
			switch {
			case s.Path == "":
				pv.add(field.Required(sp.Child("path"), ""))
			case !path.IsAbs(s.Path):
				pv.add(field.Invalid(sp.Child("path"), s.Path, "must be an absolute path"))
			case hasDotDot(s.Path):
				pv.add(field.Invalid(sp.Child("path"), s.Path, "must not contain '..'"))
			default:
				pv.add(pathBytes(sp.Child("path"), s.Path)...)
			}
			if s.Type != nil && !slices.Contains(hostPathTypes, *s.Type) {
				pv.add(field.NotSupported(sp.Child("type"), *s.Type, hostPathTypes))
			}
		}
		if s := vol.ConfigMap; s != nil {
			sources = append(sources, "configMap")
			sp := vp.Child("configMap")
			optional := s.Optional != nil && *s.Optional
			var data func(string) bool
			if s.Name == "" {
				pv.add(field.Required(sp.Child("name"), ""))
			} else if cm, ok := pv.objs.configMaps[types.NamespacedName{Namespace: namespace, Name: s.Name}]; ok {
				data = func(k string) bool {
					_, inData := cm.Data[k]
					_, inBinary := cm.BinaryData[k]
					return inData || inBinary
				}
			} else if !optional && !pv.skipRefs {
				pv.add(notFound(sp.Child("name"), s.Name, notInRequest("ConfigMap", namespace)))
			}
			pv.keyToPaths(sp, s.Items, s.DefaultMode, data, optional)
		}
		if s := vol.Secret; s != nil {
			sources = append(sources, "secret")
			sp := vp.Child("secret")
			optional := s.Optional != nil && *s.Optional
			var data func(string) bool
			if s.SecretName == "" {
				pv.add(field.Required(sp.Child("secretName"), ""))
			} else if sec, ok := pv.objs.secrets[types.NamespacedName{Namespace: namespace, Name: s.SecretName}]; ok {
				data = func(k string) bool { _, ok := sec.Data[k]; return ok }
			} else if !optional && !pv.skipRefs {
				pv.add(notFound(sp.Child("secretName"), s.SecretName, notInRequest("Secret", namespace)))
			}
			pv.keyToPaths(sp, s.Items, s.DefaultMode, data, optional)
		}
		for _, extra := range sources[min(1, len(sources)):] {
			pv.add(field.Forbidden(vp.Child(extra), "may not specify more than 1 volume source"))
		}
	}
	return names
}

// notInRequest is the detail of a reference to an object that is not in
// the request.
func notInRequest(kind, namespace string) string {
	return fmt.Sprintf("no %s of this name in namespace %q in the request; set optional to run without it", kind, namespace)
}

// notFound is field.NotFound with a detail.
func notFound(p *field.Path, value any, detail string) *field.Error {
	e := field.NotFound(p, value)
	e.Detail = detail
	return e
}

// keyToPaths validates the items of a configMap or secret volume. has
// reports whether the referenced object holds a key; it is nil when the
// object is not in the request.
func (pv *podValidator) keyToPaths(p *field.Path, items []corev1.KeyToPath, defaultMode *int32, has func(string) bool, optional bool) {
	if defaultMode != nil {
		pv.add(fileMode(p.Child("defaultMode"), *defaultMode)...)
	}
	for i, it := range items {
		ip := p.Child("items").Index(i)
		if it.Key == "" {
			pv.add(field.Required(ip.Child("key"), ""))
		} else if errs := configMapKey(ip.Child("key"), it.Key); len(errs) > 0 {
			pv.add(errs...)
		} else if has != nil && !optional && !has(it.Key) {
			pv.add(notFound(ip.Child("key"), it.Key, "no such key in the object"))
		}
		pv.add(relativePath(ip.Child("path"), it.Path, true)...)
		if it.Mode != nil {
			pv.add(fileMode(ip.Child("mode"), *it.Mode)...)
		}
	}
}

// podContainers is what must be unique across a pod's containers.
type podContainers struct {
	names     map[string]bool
	portNames map[string]bool
	hostPorts []hostPort
}

type hostPort struct {
	protocol corev1.Protocol
	ip       string
	port     int32
}

// conflicts reports whether two host ports cannot both be bound: same
// protocol and port, and the same address or a wildcard one.
func (a hostPort) conflicts(b hostPort) bool {
	wildcard := func(ip string) bool { return ip == "" || ip == "0.0.0.0" || ip == "::" }
	return a.protocol == b.protocol && a.port == b.port && (a.ip == b.ip || wildcard(a.ip) || wildcard(b.ip))
}

func (pv *podValidator) container(p *field.Path, pod *corev1.Pod, c *corev1.Container, isInit bool, volumes map[string]bool, pc *podContainers) {
	switch {
	case c.Name == "":
		pv.add(field.Required(p.Child("name"), ""))
	case pc.names[c.Name]:
		pv.add(field.Duplicate(p.Child("name"), c.Name))
	default:
		pv.add(dns1123Label(p.Child("name"), c.Name)...)
	}
	pc.names[c.Name] = true

	if c.Image == "" {
		pv.add(field.Required(p.Child("image"), ""))
	} else if _, err := reference.ParseNormalizedNamed(c.Image); err != nil {
		pv.add(field.Invalid(p.Child("image"), c.Image, err.Error()))
	}
	if !slices.Contains(pullPolicies, c.ImagePullPolicy) {
		pv.add(field.NotSupported(p.Child("imagePullPolicy"), c.ImagePullPolicy, pullPolicies))
	}
	if !slices.Contains(terminationMsgPolicies, c.TerminationMessagePolicy) {
		pv.add(field.NotSupported(p.Child("terminationMessagePolicy"), c.TerminationMessagePolicy, terminationMsgPolicies))
	}
	if c.WorkingDir != "" && !path.IsAbs(c.WorkingDir) {
		pv.add(field.Invalid(p.Child("workingDir"), c.WorkingDir, "must be an absolute path"))
	}

	if rp := c.RestartPolicy; rp != nil {
		switch {
		case !isInit:
			pv.add(field.Forbidden(p.Child("restartPolicy"), "may only be set on init containers"))
		case !slices.Contains(initRestartPolicies, *rp):
			pv.add(field.NotSupported(p.Child("restartPolicy"), *rp, initRestartPolicies))
		}
	}
	if isInit && c.RestartPolicy == nil {
		// Only a native sidecar (restartPolicy Always) keeps running, so
		// only it may have hooks and probes.
		for _, f := range []struct {
			name string
			set  bool
		}{
			{"lifecycle", c.Lifecycle != nil},
			{"livenessProbe", c.LivenessProbe != nil},
			{"readinessProbe", c.ReadinessProbe != nil},
			{"startupProbe", c.StartupProbe != nil},
		} {
			if f.set {
				pv.add(field.Forbidden(p.Child(f.name), "may only be set on init containers with restartPolicy Always"))
			}
		}
	}

	pv.ports(p.Child("ports"), pod, c, pc)
	pv.env(p, pod.Namespace, c)
	pv.resources(p.Child("resources"), &c.Resources)
	pv.volumeMounts(p.Child("volumeMounts"), c.VolumeMounts, volumes)
	if lc := c.Lifecycle; lc != nil {
		pv.handler(p.Child("lifecycle", "postStart"), lc.PostStart)
		pv.handler(p.Child("lifecycle", "preStop"), lc.PreStop)
	}
	pv.probe(p.Child("livenessProbe"), c, c.LivenessProbe, true)
	pv.probe(p.Child("readinessProbe"), c, c.ReadinessProbe, false)
	pv.probe(p.Child("startupProbe"), c, c.StartupProbe, true)
	pv.securityContext(p.Child("securityContext"), c.SecurityContext)
}

func (pv *podValidator) ports(p *field.Path, pod *corev1.Pod, c *corev1.Container, pc *podContainers) {
	for i, port := range c.Ports {
		pp := p.Index(i)
		if port.Name != "" {
			if msgs := validation.IsValidPortName(port.Name); len(msgs) > 0 {
				pv.add(invalid(pp.Child("name"), port.Name, msgs)...)
			} else if pc.portNames[port.Name] {
				pv.add(field.Duplicate(pp.Child("name"), port.Name))
			}
			pc.portNames[port.Name] = true
		}
		if msgs := validation.IsValidPortNum(int(port.ContainerPort)); len(msgs) > 0 {
			pv.add(invalid(pp.Child("containerPort"), port.ContainerPort, msgs)...)
		}
		if !slices.Contains(protocols, port.Protocol) {
			pv.add(field.NotSupported(pp.Child("protocol"), port.Protocol, protocols))
		}
		if port.HostIP != "" {
			pv.add(validation.IsValidIP(pp.Child("hostIP"), port.HostIP)...)
		}
		switch {
		case port.HostPort == 0:
			continue
		case port.HostPort < 0 || port.HostPort > math.MaxUint16:
			pv.add(field.Invalid(pp.Child("hostPort"), port.HostPort, validation.InclusiveRangeError(0, math.MaxUint16)))
			continue
		case pod.Spec.HostNetwork && port.HostPort != port.ContainerPort:
			pv.add(field.Invalid(pp.Child("hostPort"), port.HostPort, "must equal containerPort when hostNetwork is true"))
		}
		hp := hostPort{protocol: port.Protocol, ip: port.HostIP, port: port.HostPort}
		if slices.ContainsFunc(pc.hostPorts, hp.conflicts) {
			pv.add(field.Duplicate(pp.Child("hostPort"), fmt.Sprintf("%s/%s:%d", hp.protocol, hp.ip, hp.port)))
		}
		pc.hostPorts = append(pc.hostPorts, hp)
	}
}

func (pv *podValidator) env(p *field.Path, namespace string, c *corev1.Container) {
	ep := p.Child("env")
	if n := len(c.Env); n > pv.lim.MaxEnvVarsPerContainer {
		pv.add(field.TooMany(ep, n, pv.lim.MaxEnvVarsPerContainer))
	}
	size := 0
	for _, e := range c.Env {
		size += len(e.Name) + len(e.Value)
	}
	if size > pv.lim.MaxEnvBytesPerContainer {
		tooLong := field.TooLong(ep, nil, pv.lim.MaxEnvBytesPerContainer)
		tooLong.Detail += " (names and values together)"
		pv.add(tooLong)
	}
	for i, e := range c.Env {
		vp := ep.Index(i)
		if e.Name == "" {
			pv.add(field.Required(vp.Child("name"), ""))
		} else {
			pv.add(invalid(vp.Child("name"), e.Name, validation.IsEnvVarName(e.Name))...)
		}
		if e.ValueFrom == nil {
			continue
		}
		fp := vp.Child("valueFrom")
		if e.Value != "" {
			pv.add(field.Invalid(fp, "", "may not be specified when value is not empty"))
		}
		from := e.ValueFrom
		var set []string
		if r := from.FieldRef; r != nil {
			set = append(set, "fieldRef")
			pv.fieldRef(fp.Child("fieldRef"), r)
		}
		if r := from.ConfigMapKeyRef; r != nil {
			set = append(set, "configMapKeyRef")
			rp := fp.Child("configMapKeyRef")
			optional := r.Optional != nil && *r.Optional
			var cm *corev1.ConfigMap
			if r.Name != "" {
				cm = pv.objs.configMaps[types.NamespacedName{Namespace: namespace, Name: r.Name}]
			}
			pv.keyRef(rp, "ConfigMap", namespace, r.Name, r.Key, optional, cm != nil, func(k string) bool {
				// The kubelet reads env values from data only.
				_, ok := cm.Data[k]
				return ok
			})
		}
		if r := from.SecretKeyRef; r != nil {
			set = append(set, "secretKeyRef")
			rp := fp.Child("secretKeyRef")
			optional := r.Optional != nil && *r.Optional
			var sec *corev1.Secret
			if r.Name != "" {
				sec = pv.objs.secrets[types.NamespacedName{Namespace: namespace, Name: r.Name}]
			}
			pv.keyRef(rp, "Secret", namespace, r.Name, r.Key, optional, sec != nil, func(k string) bool {
				_, ok := sec.Data[k]
				return ok
			})
		}
		switch len(set) {
		case 0:
			pv.add(field.Required(fp, "must specify one of: fieldRef, configMapKeyRef or secretKeyRef"))
		case 1:
		default:
			for _, extra := range set[1:] {
				pv.add(field.Forbidden(fp.Child(extra), "may not have more than one field specified at a time"))
			}
		}
	}
	for i, src := range c.EnvFrom {
		sp := p.Child("envFrom").Index(i)
		if src.Prefix != "" {
			pv.add(invalid(sp.Child("prefix"), src.Prefix, validation.IsEnvVarName(src.Prefix))...)
		}
		var set []string
		if r := src.ConfigMapRef; r != nil {
			set = append(set, "configMapRef")
			rp := sp.Child("configMapRef", "name")
			_, found := pv.objs.configMaps[types.NamespacedName{Namespace: namespace, Name: r.Name}]
			pv.objectRef(rp, "ConfigMap", namespace, r.Name, r.Optional != nil && *r.Optional, found)
		}
		if r := src.SecretRef; r != nil {
			set = append(set, "secretRef")
			rp := sp.Child("secretRef", "name")
			_, found := pv.objs.secrets[types.NamespacedName{Namespace: namespace, Name: r.Name}]
			pv.objectRef(rp, "Secret", namespace, r.Name, r.Optional != nil && *r.Optional, found)
		}
		switch len(set) {
		case 0:
			pv.add(field.Required(sp, "must specify one of: configMapRef or secretRef"))
		case 1:
		default:
			pv.add(field.Forbidden(sp.Child(set[1]), "may not have more than one field specified at a time"))
		}
	}
}

// objectRef validates a reference by name to a ConfigMap or Secret at p
// (the name field): it must be present in the request unless optional.
func (pv *podValidator) objectRef(p *field.Path, kind, namespace, name string, optional, found bool) {
	switch {
	case name == "":
		pv.add(field.Required(p, ""))
	case len(validation.IsDNS1123Subdomain(name)) > 0:
		pv.add(dns1123Subdomain(p, name)...)
	case !found && !optional && !pv.skipRefs:
		pv.add(notFound(p, name, notInRequest(kind, namespace)))
	}
}

// keyRef validates a configMapKeyRef or secretKeyRef at p.
func (pv *podValidator) keyRef(p *field.Path, kind, namespace, name, key string, optional, found bool, has func(string) bool) {
	pv.objectRef(p.Child("name"), kind, namespace, name, optional, found)
	kp := p.Child("key")
	switch {
	case key == "":
		pv.add(field.Required(kp, ""))
	case len(validation.IsConfigMapKey(key)) > 0:
		pv.add(configMapKey(kp, key)...)
	case found && !optional && !has(key):
		pv.add(notFound(kp, key, "no such key in the object"))
	}
}

func (pv *podValidator) fieldRef(p *field.Path, r *corev1.ObjectFieldSelector) {
	if r.APIVersion != "v1" {
		pv.add(field.NotSupported(p.Child("apiVersion"), r.APIVersion, []string{"v1"}))
	}
	fp := p.Child("fieldPath")
	switch {
	case r.FieldPath == "":
		pv.add(field.Required(fp, ""))
		return
	case slices.Contains(envFieldPaths, r.FieldPath):
		return
	}
	for _, prefix := range []string{"metadata.labels", "metadata.annotations"} {
		rest, ok := strings.CutPrefix(r.FieldPath, prefix+"['")
		if !ok {
			continue
		}
		key, ok := strings.CutSuffix(rest, "']")
		if !ok {
			break
		}
		if prefix == "metadata.annotations" {
			key = strings.ToLower(key)
		}
		if msgs := validation.IsQualifiedName(key); len(msgs) > 0 {
			pv.add(invalid(fp, r.FieldPath, msgs)...)
		}
		return
	}
	supported := append(slices.Clone(envFieldPaths), "metadata.labels['<key>']", "metadata.annotations['<key>']")
	pv.add(field.NotSupported(fp, r.FieldPath, supported))
}

// supportedResource reports whether podsync accounts for a resource name.
func supportedResource(name corev1.ResourceName) bool {
	switch name {
	case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
		return true
	}
	size, ok := strings.CutPrefix(string(name), corev1.ResourceHugePagesPrefix)
	if !ok {
		return false
	}
	q, err := resource.ParseQuantity(size)
	return err == nil && q.Sign() > 0
}

var supportedResources = []string{"cpu", "memory", "ephemeral-storage", "hugepages-<size>"}

func (pv *podValidator) resources(p *field.Path, r *corev1.ResourceRequirements) {
	check := func(lp *field.Path, rl corev1.ResourceList) {
		for _, name := range slices.Sorted(maps.Keys(rl)) {
			q := rl[name]
			np := lp.Key(string(name))
			if !supportedResource(name) {
				pv.add(field.NotSupported(np, name, supportedResources))
			} else if q.Sign() < 0 {
				pv.add(field.Invalid(np, q.String(), "must be greater than or equal to 0"))
			}
		}
	}
	check(p.Child("limits"), r.Limits)
	check(p.Child("requests"), r.Requests)
	for _, name := range slices.Sorted(maps.Keys(r.Requests)) {
		req := r.Requests[name]
		limit, ok := r.Limits[name]
		if ok && req.Cmp(limit) > 0 {
			pv.add(field.Invalid(p.Child("requests").Key(string(name)), req.String(),
				fmt.Sprintf("must be less than or equal to %s limit of %s", name, limit.String())))
		}
	}
}

func (pv *podValidator) volumeMounts(p *field.Path, mounts []corev1.VolumeMount, volumes map[string]bool) {
	paths := make(map[string]bool, len(mounts))
	for i, m := range mounts {
		mp := p.Index(i)
		switch {
		case m.Name == "":
			pv.add(field.Required(mp.Child("name"), ""))
		case !volumes[m.Name]:
			pv.add(notFound(mp.Child("name"), m.Name, "no volume of the pod has this name"))
		}
		switch {
		case m.MountPath == "":
			pv.add(field.Required(mp.Child("mountPath"), ""))
		case !path.IsAbs(m.MountPath):
			pv.add(field.Invalid(mp.Child("mountPath"), m.MountPath, "must be an absolute path"))
		case paths[path.Clean(m.MountPath)]:
			pv.add(field.Duplicate(mp.Child("mountPath"), m.MountPath))
		}
		paths[path.Clean(m.MountPath)] = true
		if m.SubPath != "" {
			pv.add(relativePath(mp.Child("subPath"), m.SubPath, false)...)
		}
	}
}

func (pv *podValidator) handler(p *field.Path, h *corev1.LifecycleHandler) {
	if h == nil {
		return
	}
	switch {
	case h.Exec == nil:
		pv.add(field.Required(p.Child("exec"), "hooks must use exec"))
	case len(h.Exec.Command) == 0:
		pv.add(field.Required(p.Child("exec", "command"), ""))
	}
}

func (pv *podValidator) probe(p *field.Path, c *corev1.Container, pr *corev1.Probe, stops bool) {
	if pr == nil {
		return
	}
	var set []string
	if pr.Exec != nil {
		set = append(set, "exec")
		if len(pr.Exec.Command) == 0 {
			pv.add(field.Required(p.Child("exec", "command"), ""))
		}
	}
	if h := pr.HTTPGet; h != nil {
		set = append(set, "httpGet")
		hp := p.Child("httpGet")
		pv.probePort(hp.Child("port"), c, h.Port)
		if !slices.Contains(uriSchemes, h.Scheme) {
			pv.add(field.NotSupported(hp.Child("scheme"), h.Scheme, uriSchemes))
		}
		for i, hd := range h.HTTPHeaders {
			pv.add(invalid(hp.Child("httpHeaders").Index(i).Child("name"), hd.Name, validation.IsHTTPHeaderName(hd.Name))...)
		}
	}
	if t := pr.TCPSocket; t != nil {
		set = append(set, "tcpSocket")
		pv.probePort(p.Child("tcpSocket", "port"), c, t.Port)
	}
	switch len(set) {
	case 0:
		pv.add(field.Required(p, "must specify a handler: exec, httpGet or tcpSocket"))
	case 1:
	default:
		for _, extra := range set[1:] {
			pv.add(field.Forbidden(p.Child(extra), "may not specify more than 1 handler type"))
		}
	}
	atLeast := func(name string, v int32, minimum int32) {
		if v < minimum {
			pv.add(field.Invalid(p.Child(name), v, fmt.Sprintf("must be greater than or equal to %d", minimum)))
		}
	}
	atLeast("initialDelaySeconds", pr.InitialDelaySeconds, 0)
	atLeast("timeoutSeconds", pr.TimeoutSeconds, 1)
	atLeast("periodSeconds", pr.PeriodSeconds, 1)
	atLeast("successThreshold", pr.SuccessThreshold, 1)
	atLeast("failureThreshold", pr.FailureThreshold, 1)
	if stops && pr.SuccessThreshold > 1 {
		pv.add(field.Invalid(p.Child("successThreshold"), pr.SuccessThreshold, "must be 1 for liveness and startup probes"))
	}
	if g := pr.TerminationGracePeriodSeconds; g != nil {
		gp := p.Child("terminationGracePeriodSeconds")
		if stops {
			pv.add(validateGracePeriod(gp, *g, 1, pv.lim.MaxGracePeriodSeconds)...)
		} else {
			pv.add(field.Forbidden(gp, "may only be set on liveness and startup probes"))
		}
	}
}

// probePort validates a probe's port: a number in 1-65535, or the name of
// one of the container's ports.
func (pv *podValidator) probePort(p *field.Path, c *corev1.Container, port intstr.IntOrString) {
	if port.Type == intstr.Int {
		pv.add(invalid(p, port.IntVal, validation.IsValidPortNum(int(port.IntVal)))...)
		return
	}
	if msgs := validation.IsValidPortName(port.StrVal); len(msgs) > 0 {
		pv.add(invalid(p, port.StrVal, msgs)...)
		return
	}
	if !slices.ContainsFunc(c.Ports, func(cp corev1.ContainerPort) bool { return cp.Name == port.StrVal }) {
		pv.add(notFound(p, port.StrVal, "no port of the container has this name"))
	}
}

func (pv *podValidator) securityContext(p *field.Path, sc *corev1.SecurityContext) {
	if sc == nil {
		return
	}
	pv.add(userID(p.Child("runAsUser"), sc.RunAsUser)...)
	pv.add(groupID(p.Child("runAsGroup"), sc.RunAsGroup)...)
	if sc.Privileged != nil && *sc.Privileged && sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
		pv.add(field.Invalid(p.Child("allowPrivilegeEscalation"), false, "cannot be false when privileged is true"))
	}
}

func validateTypeMeta(p *field.Path, tm metav1.TypeMeta, kind string) field.ErrorList {
	var errs field.ErrorList
	if tm.APIVersion != "" && tm.APIVersion != "v1" {
		errs = append(errs, field.NotSupported(p.Child("apiVersion"), tm.APIVersion, []string{"", "v1"}))
	}
	if tm.Kind != "" && tm.Kind != kind {
		errs = append(errs, field.NotSupported(p.Child("kind"), tm.Kind, []string{"", kind}))
	}
	return errs
}

// validateObjectMeta validates a defaulted object's name, namespace, labels
// and annotations.
func validateObjectMeta(p *field.Path, m *metav1.ObjectMeta) field.ErrorList {
	var errs field.ErrorList
	if m.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	} else {
		errs = append(errs, dns1123Subdomain(p.Child("name"), m.Name)...)
	}
	errs = append(errs, dns1123Label(p.Child("namespace"), m.Namespace)...)
	errs = append(errs, metav1validation.ValidateLabels(m.Labels, p.Child("labels"))...)
	errs = append(errs, apivalidation.ValidateAnnotations(m.Annotations, p.Child("annotations"))...)
	return errs
}

// validatePodName validates the namespace and name fields of a request
// naming one pod, under p (nil for the request's top level).
func validatePodName(p *field.Path, namespace, name string) field.ErrorList {
	child := func(n string) *field.Path {
		if p == nil {
			return field.NewPath(n)
		}
		return p.Child(n)
	}
	errs := validateOptionalNamespace(child("namespace"), namespace)
	if name == "" {
		return append(errs, field.Required(child("name"), ""))
	}
	return append(errs, dns1123Subdomain(child("name"), name)...)
}

func validateOptionalNamespace(p *field.Path, namespace string) field.ErrorList {
	if namespace == "" {
		return nil
	}
	return dns1123Label(p, namespace)
}

func validateSelector(p *field.Path, selector string, maxBytes int) field.ErrorList {
	if selector == "" {
		return nil
	}
	if len(selector) > maxBytes {
		return field.ErrorList{field.TooLong(p, nil, maxBytes)}
	}
	if _, err := labels.Parse(selector); err != nil {
		return field.ErrorList{field.Invalid(p, selector, err.Error())}
	}
	return nil
}

// validateUID accepts a UUID in its canonical 36-character form.
func validateUID(p *field.Path, uid string) field.ErrorList {
	if _, err := uuid.Parse(uid); err != nil || len(uid) != 36 {
		return field.ErrorList{field.Invalid(p, uid, "must be a UUID such as 0f8fad5b-d9cb-469f-a165-70867728950e")}
	}
	return nil
}

func validateGracePeriod(p *field.Path, seconds, minimum, maximum int64) field.ErrorList {
	if seconds < minimum || seconds > maximum {
		return field.ErrorList{field.Invalid(p, seconds, validation.InclusiveRangeError(int(minimum), int(maximum)))}
	}
	return nil
}

func invalid(p *field.Path, value any, msgs []string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range msgs {
		errs = append(errs, field.Invalid(p, value, msg))
	}
	return errs
}

func dns1123Label(p *field.Path, v string) field.ErrorList {
	return invalid(p, v, validation.IsDNS1123Label(v))
}

func dns1123Subdomain(p *field.Path, v string) field.ErrorList {
	return invalid(p, v, validation.IsDNS1123Subdomain(v))
}

func configMapKey(p *field.Path, k string) field.ErrorList {
	return invalid(p, k, validation.IsConfigMapKey(k))
}

func userID(p *field.Path, id *int64) field.ErrorList {
	if id == nil {
		return nil
	}
	return invalid(p, *id, validation.IsValidUserID(*id))
}

func groupID(p *field.Path, id *int64) field.ErrorList {
	if id == nil {
		return nil
	}
	return invalid(p, *id, validation.IsValidGroupID(*id))
}

// fileMode accepts modes 0 to 0777.
func fileMode(p *field.Path, mode int32) field.ErrorList {
	if mode < 0 || mode > 0o777 {
		return field.ErrorList{field.Invalid(p, mode, "must be a number between 0 and 0777 (octal), both inclusive")}
	}
	return nil
}

// relativePath accepts a relative path with no ".." element; required says
// whether it may be empty.
func relativePath(p *field.Path, v string, required bool) field.ErrorList {
	switch {
	case v == "":
		if required {
			return field.ErrorList{field.Required(p, "")}
		}
	case path.IsAbs(v):
		return field.ErrorList{field.Invalid(p, v, "must be a relative path")}
	case hasDotDot(v):
		return field.ErrorList{field.Invalid(p, v, "must not contain '..'")}
	}
	return pathBytes(p, v)
}

// Linux's bounds on file names (NAME_MAX) and paths (PATH_MAX, less its
// NUL).
const (
	maxFileNameBytes = 255
	maxPathBytes     = 4095
)

// pathBytes accepts a path the kernel can take: no NUL byte, at most
// maxPathBytes long, no element longer than maxFileNameBytes.
func pathBytes(p *field.Path, v string) field.ErrorList {
	switch {
	case strings.IndexByte(v, 0) >= 0:
		return field.ErrorList{field.Invalid(p, v, "must not contain a NUL byte")}
	case len(v) > maxPathBytes:
		return field.ErrorList{field.TooLong(p, nil, maxPathBytes)}
	}
	for _, e := range strings.Split(v, "/") {
		if len(e) > maxFileNameBytes {
			return field.ErrorList{field.Invalid(p, v, fmt.Sprintf("must not have an element longer than %d bytes", maxFileNameBytes))}
		}
	}
	return nil
}

func hasDotDot(v string) bool {
	return slices.Contains(strings.Split(v, "/"), "..")
}
