package server

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/convert"
	"github.com/podsync/podsync/validation"
)

// Defaults of Limits. Those that bound one object are validation's.
const (
	DefaultMaxPodsPerRequest       = 256
	DefaultMaxContainersPerPod     = validation.DefaultMaxContainersPerPod
	DefaultMaxEnvVarsPerContainer  = validation.DefaultMaxEnvVarsPerContainer
	DefaultMaxEnvBytesPerContainer = validation.DefaultMaxEnvBytesPerContainer
	DefaultMaxConfigMapBytes       = validation.DefaultMaxConfigMapBytes
	DefaultMaxSecretBytes          = validation.DefaultMaxSecretBytes
	DefaultMaxRequestBytes         = 16 << 20
	DefaultMaxGracePeriodSeconds   = validation.DefaultMaxGracePeriodSeconds
	DefaultMaxLabelSelectorBytes   = 4096
)

// Bounds of RunPodsRequest.timeout.
const (
	// DefaultRunPodsTimeout applies when a RunPodsRequest has no timeout.
	DefaultRunPodsTimeout = 5 * time.Minute
	// MaxRunPodsTimeout is the longest timeout a RunPodsRequest may ask for.
	MaxRunPodsTimeout = 24 * time.Hour
	// MaxMinReadySeconds bounds RunPodsRequest.min_ready_seconds.
	MaxMinReadySeconds = 3600
)

// Limits bound the size of what a request may ask for. A zero (or
// negative) field takes its default, so the zero Limits is DefaultLimits.
// The request's own bounds are checked here; those of one pod, ConfigMap
// or Secret are passed on to package validation (validation.Limits).
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

// validationLimits are the bounds of one object, for package validation.
func (l Limits) validationLimits() validation.Limits {
	return validation.Limits{
		MaxContainersPerPod:     l.MaxContainersPerPod,
		MaxEnvVarsPerContainer:  l.MaxEnvVarsPerContainer,
		MaxEnvBytesPerContainer: l.MaxEnvBytesPerContainer,
		MaxConfigMapBytes:       l.MaxConfigMapBytes,
		MaxSecretBytes:          l.MaxSecretBytes,
		MaxGracePeriodSeconds:   l.MaxGracePeriodSeconds,
	}
}

// Validator checks requests before anything changes on the node. Each
// Validate method returns every violation it finds, with paths into the
// request in the API's JSON names ("pods[0].spec.containers[1].image"); an
// empty list means the request is valid. Wrap a non-empty list with
// InvalidRequest to return it from a handler.
//
// A Validator checks what is the request's own (its fields, its size, how
// many pods it carries, their uniqueness) and converts and defaults the
// pods, ConfigMaps and Secrets it carries; their content is checked by
// package validation (ValidatePod, ValidateConfigMap, ValidateSecret),
// under the request's paths.
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
// wait_for and admission_mode known values, a timeout, when set, above
// zero and at most MaxRunPodsTimeout, min_ready_seconds from 0 to
// MaxMinReadySeconds.
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

// ValidateListEventsRequest validates a ListEventsRequest: namespace
// empty or a DNS-1123 label, pod_name empty or a pod name (with a
// namespace), pod_uid empty or a UUID.
func (v *Validator) ValidateListEventsRequest(req *podsyncv1.ListEventsRequest) field.ErrorList {
	errs := validateOptionalNamespace(field.NewPath("namespace"), req.GetNamespace())
	if req.GetPodName() != "" {
		if req.GetNamespace() == "" {
			errs = append(errs, field.Required(field.NewPath("namespace"), "a pod name needs its namespace"))
		}
		errs = append(errs, validation.DNS1123Subdomain(field.NewPath("podName"), req.GetPodName())...)
	}
	if uid := req.GetPodUid(); uid != "" {
		errs = append(errs, validation.ValidateUID(uid, field.NewPath("podUID"))...)
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
		errs = append(errs, validation.ValidateUID(uid, field.NewPath("uid"))...)
	}
	if req.GracePeriodSeconds != nil {
		errs = append(errs, validation.ValidateGracePeriod(*req.GracePeriodSeconds, field.NewPath("gracePeriodSeconds"), v.limits().validationLimits())...)
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
		errs = append(errs, validation.DNS1123Label(field.NewPath("container"), c)...)
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
	opts := validation.Options{Limits: lim.validationLimits(), NodeName: v.nodeName(), StoredObjects: true}
	var cmErrs, secErrs field.ErrorList
	objs.configMaps, cmErrs = configMapsFromProto(field.NewPath("configMaps"), req.GetConfigMaps(), opts)
	objs.secrets, secErrs = secretsFromProto(field.NewPath("secrets"), req.GetSecrets(), opts)
	errs = append(errs, cmErrs...)
	errs = append(errs, secErrs...)
	opts.Objects = validation.NewObjects(objs.configMaps, objs.secrets)

	// The pods' violations follow the request's, in pod order.
	var podErrs field.ErrorList
	fromProto := func(p *field.Path, in *podsyncv1.Pod) *corev1.Pod {
		pod, perrs := podFromProto(p, in, opts)
		podErrs = append(podErrs, perrs...)
		return pod
	}
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
			pod := fromProto(p, in)
			if pod == nil {
				continue
			}
			objs.pods = append(objs.pods, pod)
			key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
			if byName[key] {
				podErrs = append(podErrs, field.Duplicate(p.Child("metadata", "name"), key.String()))
			} else if byUID[pod.UID] {
				podErrs = append(podErrs, field.Duplicate(p.Child("metadata", "uid"), string(pod.UID)))
			}
			byName[key] = true
			byUID[pod.UID] = true
		}
	case *podsyncv1.SyncPodRequest:
		if pod := fromProto(field.NewPath("pod"), r.GetPod()); pod != nil {
			objs.pods = append(objs.pods, pod)
		}
	case *podsyncv1.PlanPodRequest:
		if pod := fromProto(field.NewPath("pod"), r.GetPod()); pod != nil {
			objs.pods = append(objs.pods, pod)
		}
	default:
		errs = append(errs, field.InternalError(nil, fmt.Errorf("unexpected request type %T", req)))
	}
	errs = append(errs, podErrs...)
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
	if m := r.GetMinReadySeconds(); m < 0 || m > MaxMinReadySeconds {
		errs = append(errs, field.Invalid(field.NewPath("minReadySeconds"), m, fmt.Sprintf("must be from 0 to %d", MaxMinReadySeconds)))
	}
	return errs
}

func enumNames(m map[int32]string) []string {
	return slices.Sorted(maps.Values(m))
}

// configMapsFromProto converts, defaults and validates the request's
// ConfigMaps, which must be unique by namespace/name.
func configMapsFromProto(p *field.Path, in []*podsyncv1.ConfigMap, opts validation.Options) ([]*corev1.ConfigMap, field.ErrorList) {
	var errs field.ErrorList
	out := make([]*corev1.ConfigMap, 0, len(in))
	seen := make(map[types.NamespacedName]bool, len(in))
	for i, m := range in {
		ip := p.Index(i)
		if m == nil {
			errs = append(errs, field.Required(ip, ""))
			continue
		}
		cm := convert.ConfigMapFromProto(m)
		convert.DefaultConfigMap(cm)
		errs = append(errs, validation.ValidateConfigMap(cm, ip, opts)...)
		errs = append(errs, sourceAnnotation(ip, cm.Annotations)...)
		key := types.NamespacedName{Namespace: cm.Namespace, Name: cm.Name}
		if seen[key] {
			errs = append(errs, field.Duplicate(ip.Child("metadata", "name"), key.String()))
		}
		seen[key] = true
		out = append(out, cm)
	}
	return out, errs
}

// secretsFromProto converts, validates and defaults the request's Secrets,
// which must be unique by namespace/name.
func secretsFromProto(p *field.Path, in []*podsyncv1.Secret, opts validation.Options) ([]*corev1.Secret, field.ErrorList) {
	var errs field.ErrorList
	out := make([]*corev1.Secret, 0, len(in))
	seen := make(map[types.NamespacedName]bool, len(in))
	for i, m := range in {
		ip := p.Index(i)
		if m == nil {
			errs = append(errs, field.Required(ip, ""))
			continue
		}
		s := convert.SecretFromProto(m)
		// Validated before DefaultSecret folds stringData into data, so
		// that a violation names the field it was sent in.
		errs = append(errs, validation.ValidateSecret(s, ip, opts)...)
		errs = append(errs, sourceAnnotation(ip, s.Annotations)...)
		convert.DefaultSecret(s)
		key := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
		if seen[key] {
			errs = append(errs, field.Duplicate(ip.Child("metadata", "name"), key.String()))
		}
		seen[key] = true
		out = append(out, s)
	}
	return out, errs
}

// podFromProto converts, defaults and validates one pod at path p. It
// returns no pod when the pod cannot be converted.
func podFromProto(p *field.Path, in *podsyncv1.Pod, opts validation.Options) (*corev1.Pod, field.ErrorList) {
	if in == nil {
		return nil, field.ErrorList{field.Required(p, "")}
	}
	pod, err := convert.PodFromProto(in)
	if err != nil {
		var inv *convert.InvalidError
		if !errors.As(err, &inv) {
			return nil, field.ErrorList{field.InternalError(p, err)}
		}
		// The conversion's paths are relative to the pod.
		errs := make(field.ErrorList, 0, len(inv.Errors))
		for _, fe := range inv.Errors {
			c := *fe
			c.Field = p.String() + "." + fe.Field
			errs = append(errs, &c)
		}
		return nil, errs
	}
	// Requests may not set what only podsyncd observes.
	pod.Status = corev1.PodStatus{}
	pod.CreationTimestamp = metav1.Time{}
	pod.DeletionTimestamp, pod.DeletionGracePeriodSeconds = nil, nil
	pod.ResourceVersion = ""
	convert.Default(pod)

	errs := validation.ValidatePodMetadata(pod, p)
	errs = append(errs, sourceAnnotation(p, pod.Annotations)...)
	if len(pod.Spec.EphemeralContainers) > 0 {
		// The API server's rule: only the ephemeralcontainers subresource
		// adds them; a spec update keeps those the node holds.
		errs = append(errs, field.Forbidden(p.Child("spec", "ephemeralContainers"),
			"ephemeral containers are added to a running pod by AddEphemeralContainer (podsyncctl debug), not in its spec; remove them"))
	}
	if in.GetSpec() == nil {
		return pod, append(errs, field.Required(p.Child("spec"), ""))
	}
	return pod, append(errs, validation.ValidatePodSpec(&pod.Spec, &pod.ObjectMeta, p.Child("spec"), opts)...)
}

// podPhases are the phases ListPods may filter on.
var podPhases = []corev1.PodPhase{corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed, corev1.PodUnknown}

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
	return append(errs, validation.DNS1123Subdomain(child("name"), name)...)
}

func validateOptionalNamespace(p *field.Path, namespace string) field.ErrorList {
	if namespace == "" {
		return nil
	}
	return validation.DNS1123Label(p, namespace)
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

// objectKinds are the kinds an object request may name.
var objectKinds = []string{podsyncv1.ObjectKind_OBJECT_KIND_CONFIG_MAP.String(), podsyncv1.ObjectKind_OBJECT_KIND_SECRET.String()}
