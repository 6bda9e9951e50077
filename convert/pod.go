package convert

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// PodToProto converts a core/v1 Pod, spec and status, to the API's Pod.
//
// Every field of the pod must be one podsync supports: a field that would
// be lost in the conversion is reported in an *InvalidError naming its path
// (such as "spec.tolerations"), never dropped; so is
// spec.ephemeralContainers, which only AddEphemeralContainer adds. The pod is not defaulted;
// call Default first where the API server's defaults are wanted.
func PodToProto(pod *corev1.Pod) (*podsyncv1.Pod, error) {
	if pod == nil {
		return nil, nil
	}
	out := podToProto(pod)
	back, err := PodFromProto(out)
	if err != nil {
		return nil, fmt.Errorf("convert pod %q back from proto: %w", pod.Name, err)
	}
	errs := unsupportedFields(pod, back)
	if len(pod.Spec.EphemeralContainers) > 0 {
		// The API carries them (GetPod shows those AddEphemeralContainer
		// added), but a pod document may not: the API server adds them
		// only through its ephemeralcontainers subresource.
		errs = append(errs, unsupported(field.NewPath("spec", "ephemeralContainers"), nil))
	}
	if len(errs) > 0 {
		return nil, &InvalidError{Kind: "Pod", Name: pod.Name, Errors: errs}
	}
	return out, nil
}

// StoredPodToProto converts a pod that came from PodFromProto (such as a
// pod podsyncd stored from a request, then defaulted) without PodToProto's
// check for unsupported fields: such a pod has none. The check converts
// the pod back and compares JSON, thirty times the cost of the conversion,
// which GetPod and ListPods would otherwise pay for every stored pod.
func StoredPodToProto(pod *corev1.Pod) *podsyncv1.Pod {
	if pod == nil {
		return nil
	}
	return podToProto(pod)
}

// PodFromProto converts the API's Pod to a core/v1 Pod. It fails with an
// *InvalidError when a value cannot be represented in core/v1, such as a
// malformed quantity or a port given both by number and by name.
func PodFromProto(in *podsyncv1.Pod) (*corev1.Pod, error) {
	if in == nil {
		return nil, nil
	}
	c := &fromProto{}
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: in.GetApiVersion(), Kind: in.GetKind()},
		ObjectMeta: objectMetaFromProto(in.GetMetadata()),
	}
	if in.Spec != nil {
		pod.Spec = c.podSpec(field.NewPath("spec"), in.Spec)
	}
	if in.Status != nil {
		pod.Status = podStatusFromProto(in.Status)
	}
	if len(c.errs) > 0 {
		return nil, &InvalidError{Kind: "Pod", Name: pod.Name, Errors: c.errs}
	}
	return pod, nil
}

// InvalidError reports fields of an object that podsync cannot accept: a
// field it does not support, or a value that cannot be converted. Each
// entry names the field's path within the object.
type InvalidError struct {
	// Kind of the object: Pod, ConfigMap or Secret.
	Kind string
	// Name of the object.
	Name string
	// Errors, one per field, with paths relative to the object.
	Errors field.ErrorList
}

func (e *InvalidError) Error() string {
	msgs := make([]string, len(e.Errors))
	for i, fe := range e.Errors {
		msgs[i] = fe.Error()
	}
	return fmt.Sprintf("%s %q: %s", e.Kind, e.Name, strings.Join(msgs, "; "))
}

func podToProto(pod *corev1.Pod) *podsyncv1.Pod {
	out := &podsyncv1.Pod{
		ApiVersion: pod.APIVersion,
		Kind:       pod.Kind,
		Metadata:   objectMetaToProto(&pod.ObjectMeta),
		Spec:       podSpecToProto(&pod.Spec),
	}
	if !isZeroPodStatus(&pod.Status) {
		out.Status = PodStatusToProto(&pod.Status)
	}
	return out
}

func objectMetaToProto(in *metav1.ObjectMeta) *podsyncv1.ObjectMeta {
	return &podsyncv1.ObjectMeta{
		Name:                       in.Name,
		GenerateName:               in.GenerateName,
		Namespace:                  in.Namespace,
		Uid:                        string(in.UID),
		Labels:                     in.Labels,
		Annotations:                in.Annotations,
		CreationTimestamp:          timeToProto(in.CreationTimestamp),
		DeletionTimestamp:          timePtrToProto(in.DeletionTimestamp),
		DeletionGracePeriodSeconds: in.DeletionGracePeriodSeconds,
		ResourceVersion:            in.ResourceVersion,
	}
}

func objectMetaFromProto(in *podsyncv1.ObjectMeta) metav1.ObjectMeta {
	if in == nil {
		return metav1.ObjectMeta{}
	}
	return metav1.ObjectMeta{
		Name:                       in.Name,
		GenerateName:               in.GenerateName,
		Namespace:                  in.Namespace,
		UID:                        types.UID(in.Uid),
		Labels:                     in.Labels,
		Annotations:                in.Annotations,
		CreationTimestamp:          timeFromProto(in.CreationTimestamp),
		DeletionTimestamp:          timePtrFromProto(in.DeletionTimestamp),
		DeletionGracePeriodSeconds: in.DeletionGracePeriodSeconds,
		ResourceVersion:            in.ResourceVersion,
	}
}

func podSpecToProto(in *corev1.PodSpec) *podsyncv1.PodSpec {
	return &podsyncv1.PodSpec{
		Containers:                    toSlice(in.Containers, containerToProto),
		InitContainers:                toSlice(in.InitContainers, containerToProto),
		RestartPolicy:                 string(in.RestartPolicy),
		TerminationGracePeriodSeconds: in.TerminationGracePeriodSeconds,
		ActiveDeadlineSeconds:         in.ActiveDeadlineSeconds,
		HostNetwork:                   in.HostNetwork,
		HostPid:                       in.HostPID,
		HostIpc:                       in.HostIPC,
		Hostname:                      in.Hostname,
		Subdomain:                     in.Subdomain,
		DnsPolicy:                     string(in.DNSPolicy),
		DnsConfig:                     dnsConfigToProto(in.DNSConfig),
		HostAliases: toSlice(in.HostAliases, func(h corev1.HostAlias) *podsyncv1.HostAlias {
			return &podsyncv1.HostAlias{Ip: h.IP, Hostnames: h.Hostnames}
		}),
		Volumes:            toSlice(in.Volumes, volumeToProto),
		SecurityContext:    podSecurityContextToProto(in.SecurityContext),
		NodeName:           in.NodeName,
		EnableServiceLinks: in.EnableServiceLinks,
		SchedulerName:      in.SchedulerName,
		ServiceAccountName: in.ServiceAccountName,
		NodeSelector:       in.NodeSelector,
		Tolerations:        toSlice(in.Tolerations, tolerationToProto),
		Affinity:           affinityToProto(in.Affinity),
		TopologySpreadConstraints: toSlice(in.TopologySpreadConstraints, func(t corev1.TopologySpreadConstraint) *structpb.Struct {
			return jsonToStruct(t)
		}),
		ShareProcessNamespace: in.ShareProcessNamespace,
		HostUsers:             in.HostUsers,
		SetHostnameAsFqdn:     in.SetHostnameAsFQDN,
		Os:                    podOSToProto(in.OS),
		Resources:             resourcesToProto(in.Resources),
		Priority:              in.Priority,
		PriorityClassName:     in.PriorityClassName,
		ImagePullSecrets: toSlice(in.ImagePullSecrets, func(r corev1.LocalObjectReference) *podsyncv1.LocalObjectReference {
			return &podsyncv1.LocalObjectReference{Name: r.Name}
		}),
		EphemeralContainers: toSlice(in.EphemeralContainers, EphemeralContainerToProto),
		HostnameOverride:    in.HostnameOverride,
		RuntimeClassName:    in.RuntimeClassName,
		Overhead:            resourceListToProto(in.Overhead),
	}
}

// EphemeralContainerToProto converts a core/v1 EphemeralContainer. The
// fields a debug container may not have (ports, probes, lifecycle,
// resources, resize and restart policies) have no place in the API's
// message and are dropped: validation refuses them first.
func EphemeralContainerToProto(in corev1.EphemeralContainer) *podsyncv1.EphemeralContainer {
	c := containerToProto(corev1.Container(in.EphemeralContainerCommon))
	return &podsyncv1.EphemeralContainer{
		Name: c.Name, Image: c.Image, ImagePullPolicy: c.ImagePullPolicy, Command: c.Command, Args: c.Args,
		WorkingDir: c.WorkingDir, Env: c.Env, EnvFrom: c.EnvFrom, VolumeMounts: c.VolumeMounts,
		TerminationMessagePath: c.TerminationMessagePath, TerminationMessagePolicy: c.TerminationMessagePolicy,
		SecurityContext: c.SecurityContext, Stdin: c.Stdin, Tty: c.Tty, StdinOnce: c.StdinOnce,
		TargetContainerName: in.TargetContainerName,
	}
}

func podOSToProto(in *corev1.PodOS) *podsyncv1.PodOS {
	if in == nil {
		return nil
	}
	return &podsyncv1.PodOS{Name: string(in.Name)}
}

func dnsConfigToProto(in *corev1.PodDNSConfig) *podsyncv1.PodDNSConfig {
	if in == nil {
		return nil
	}
	return &podsyncv1.PodDNSConfig{
		Nameservers: in.Nameservers,
		Searches:    in.Searches,
		Options: toSlice(in.Options, func(o corev1.PodDNSConfigOption) *podsyncv1.PodDNSConfigOption {
			return &podsyncv1.PodDNSConfigOption{Name: o.Name, Value: o.Value}
		}),
	}
}

func podSecurityContextToProto(in *corev1.PodSecurityContext) *podsyncv1.PodSecurityContext {
	if in == nil {
		return nil
	}
	return &podsyncv1.PodSecurityContext{
		RunAsUser:          in.RunAsUser,
		RunAsGroup:         in.RunAsGroup,
		RunAsNonRoot:       in.RunAsNonRoot,
		FsGroup:            in.FSGroup,
		SupplementalGroups: in.SupplementalGroups,
		Sysctls: toSlice(in.Sysctls, func(s corev1.Sysctl) *podsyncv1.Sysctl {
			return &podsyncv1.Sysctl{Name: s.Name, Value: s.Value}
		}),
		SeLinuxOptions:      seLinuxOptionsToProto(in.SELinuxOptions),
		SeccompProfile:      seccompProfileToProto(in.SeccompProfile),
		AppArmorProfile:     appArmorProfileToProto(in.AppArmorProfile),
		FsGroupChangePolicy: (*string)(in.FSGroupChangePolicy),
	}
}

func seLinuxOptionsToProto(in *corev1.SELinuxOptions) *podsyncv1.SELinuxOptions {
	if in == nil {
		return nil
	}
	return &podsyncv1.SELinuxOptions{User: in.User, Role: in.Role, Type: in.Type, Level: in.Level}
}

func seccompProfileToProto(in *corev1.SeccompProfile) *podsyncv1.SeccompProfile {
	if in == nil {
		return nil
	}
	return &podsyncv1.SeccompProfile{Type: string(in.Type), LocalhostProfile: in.LocalhostProfile}
}

func appArmorProfileToProto(in *corev1.AppArmorProfile) *podsyncv1.AppArmorProfile {
	if in == nil {
		return nil
	}
	return &podsyncv1.AppArmorProfile{Type: string(in.Type), LocalhostProfile: in.LocalhostProfile}
}

func volumeToProto(in corev1.Volume) *podsyncv1.Volume {
	out := &podsyncv1.Volume{Name: in.Name}
	if s := in.EmptyDir; s != nil {
		out.EmptyDir = &podsyncv1.EmptyDirVolumeSource{Medium: string(s.Medium), SizeLimit: quantityPtrToString(s.SizeLimit)}
	}
	if s := in.HostPath; s != nil {
		out.HostPath = &podsyncv1.HostPathVolumeSource{Path: s.Path, Type: (*string)(s.Type)}
	}
	if s := in.ConfigMap; s != nil {
		out.ConfigMap = &podsyncv1.ConfigMapVolumeSource{
			Name:        s.Name,
			Items:       toSlice(s.Items, keyToPathToProto),
			DefaultMode: s.DefaultMode,
			Optional:    s.Optional,
		}
	}
	if s := in.Secret; s != nil {
		out.Secret = &podsyncv1.SecretVolumeSource{
			SecretName:  s.SecretName,
			Items:       toSlice(s.Items, keyToPathToProto),
			DefaultMode: s.DefaultMode,
			Optional:    s.Optional,
		}
	}
	if s := in.DownwardAPI; s != nil {
		out.DownwardApi = &podsyncv1.DownwardAPIVolumeSource{Items: toSlice(s.Items, downwardAPIFileToProto), DefaultMode: s.DefaultMode}
	}
	if s := in.Projected; s != nil {
		out.Projected = &podsyncv1.ProjectedVolumeSource{DefaultMode: s.DefaultMode, Sources: toSlice(s.Sources, func(p corev1.VolumeProjection) *podsyncv1.VolumeProjection {
			// A source podsync does not serve stays an empty element, so
			// that the refusal names its field.
			o := &podsyncv1.VolumeProjection{}
			if c := p.ConfigMap; c != nil {
				o.ConfigMap = &podsyncv1.ConfigMapProjection{Name: c.Name, Items: toSlice(c.Items, keyToPathToProto), Optional: c.Optional}
			}
			if c := p.Secret; c != nil {
				o.Secret = &podsyncv1.SecretProjection{Name: c.Name, Items: toSlice(c.Items, keyToPathToProto), Optional: c.Optional}
			}
			if c := p.DownwardAPI; c != nil {
				o.DownwardApi = &podsyncv1.DownwardAPIProjection{Items: toSlice(c.Items, downwardAPIFileToProto)}
			}
			return o
		})}
	}
	if s := in.PersistentVolumeClaim; s != nil {
		out.PersistentVolumeClaim = &podsyncv1.PersistentVolumeClaimVolumeSource{ClaimName: s.ClaimName, ReadOnly: s.ReadOnly}
	}
	if s := in.Image; s != nil {
		out.Image = &podsyncv1.ImageVolumeSource{Reference: s.Reference, PullPolicy: string(s.PullPolicy)}
	}
	return out
}

func downwardAPIFileToProto(in corev1.DownwardAPIVolumeFile) *podsyncv1.DownwardAPIVolumeFile {
	out := &podsyncv1.DownwardAPIVolumeFile{Path: in.Path, Mode: in.Mode}
	if r := in.FieldRef; r != nil {
		out.FieldRef = &podsyncv1.ObjectFieldSelector{ApiVersion: r.APIVersion, FieldPath: r.FieldPath}
	}
	out.ResourceFieldRef = resourceFieldToProto(in.ResourceFieldRef)
	return out
}

func resourceFieldToProto(in *corev1.ResourceFieldSelector) *podsyncv1.ResourceFieldSelector {
	if in == nil {
		return nil
	}
	out := &podsyncv1.ResourceFieldSelector{ContainerName: in.ContainerName, Resource: in.Resource}
	if !in.Divisor.IsZero() {
		out.Divisor = in.Divisor.String()
	}
	return out
}

func keyToPathToProto(in corev1.KeyToPath) *podsyncv1.KeyToPath {
	return &podsyncv1.KeyToPath{Key: in.Key, Path: in.Path, Mode: in.Mode}
}

func containerToProto(in corev1.Container) *podsyncv1.Container {
	return &podsyncv1.Container{
		Name:            in.Name,
		Image:           in.Image,
		ImagePullPolicy: string(in.ImagePullPolicy),
		Command:         in.Command,
		Args:            in.Args,
		WorkingDir:      in.WorkingDir,
		Env:             toSlice(in.Env, envVarToProto),
		EnvFrom:         toSlice(in.EnvFrom, envFromToProto),
		Ports: toSlice(in.Ports, func(p corev1.ContainerPort) *podsyncv1.ContainerPort {
			return &podsyncv1.ContainerPort{
				Name: p.Name, ContainerPort: p.ContainerPort, HostPort: p.HostPort,
				HostIp: p.HostIP, Protocol: string(p.Protocol),
			}
		}),
		Resources: resourcesToProto(&in.Resources),
		VolumeMounts: toSlice(in.VolumeMounts, func(m corev1.VolumeMount) *podsyncv1.VolumeMount {
			return &podsyncv1.VolumeMount{
				Name: m.Name, MountPath: m.MountPath, SubPath: m.SubPath, ReadOnly: m.ReadOnly,
				MountPropagation: (*string)(m.MountPropagation), SubPathExpr: m.SubPathExpr,
			}
		}),
		Lifecycle:                lifecycleToProto(in.Lifecycle),
		LivenessProbe:            probeToProto(in.LivenessProbe),
		ReadinessProbe:           probeToProto(in.ReadinessProbe),
		StartupProbe:             probeToProto(in.StartupProbe),
		TerminationMessagePath:   in.TerminationMessagePath,
		TerminationMessagePolicy: string(in.TerminationMessagePolicy),
		SecurityContext:          securityContextToProto(in.SecurityContext),
		RestartPolicy:            (*string)(in.RestartPolicy),
		Stdin:                    in.Stdin,
		StdinOnce:                in.StdinOnce,
		Tty:                      in.TTY,
		ResizePolicy: toSlice(in.ResizePolicy, func(r corev1.ContainerResizePolicy) *podsyncv1.ContainerResizePolicy {
			return &podsyncv1.ContainerResizePolicy{ResourceName: string(r.ResourceName), RestartPolicy: string(r.RestartPolicy)}
		}),
		RestartPolicyRules: toSlice(in.RestartPolicyRules, func(r corev1.ContainerRestartRule) *podsyncv1.ContainerRestartRule {
			out := &podsyncv1.ContainerRestartRule{Action: string(r.Action)}
			if e := r.ExitCodes; e != nil {
				out.ExitCodes = &podsyncv1.ContainerRestartRuleOnExitCodes{Operator: string(e.Operator), Values: e.Values}
			}
			return out
		}),
	}
}

func envVarToProto(in corev1.EnvVar) *podsyncv1.EnvVar {
	out := &podsyncv1.EnvVar{Name: in.Name, Value: in.Value}
	if src := in.ValueFrom; src != nil {
		out.ValueFrom = &podsyncv1.EnvVarSource{}
		if r := src.FieldRef; r != nil {
			out.ValueFrom.FieldRef = &podsyncv1.ObjectFieldSelector{ApiVersion: r.APIVersion, FieldPath: r.FieldPath}
		}
		if r := src.ConfigMapKeyRef; r != nil {
			out.ValueFrom.ConfigMapKeyRef = &podsyncv1.ConfigMapKeySelector{Name: r.Name, Key: r.Key, Optional: r.Optional}
		}
		if r := src.SecretKeyRef; r != nil {
			out.ValueFrom.SecretKeyRef = &podsyncv1.SecretKeySelector{Name: r.Name, Key: r.Key, Optional: r.Optional}
		}
		out.ValueFrom.ResourceFieldRef = resourceFieldToProto(src.ResourceFieldRef)
	}
	return out
}

func envFromToProto(in corev1.EnvFromSource) *podsyncv1.EnvFromSource {
	out := &podsyncv1.EnvFromSource{Prefix: in.Prefix}
	if r := in.ConfigMapRef; r != nil {
		out.ConfigMapRef = &podsyncv1.ConfigMapEnvSource{Name: r.Name, Optional: r.Optional}
	}
	if r := in.SecretRef; r != nil {
		out.SecretRef = &podsyncv1.SecretEnvSource{Name: r.Name, Optional: r.Optional}
	}
	return out
}

func resourcesToProto(in *corev1.ResourceRequirements) *podsyncv1.ResourceRequirements {
	if in == nil || in.Requests == nil && in.Limits == nil {
		return nil
	}
	return &podsyncv1.ResourceRequirements{
		Requests: resourceListToProto(in.Requests),
		Limits:   resourceListToProto(in.Limits),
	}
}

func resourceListToProto(in corev1.ResourceList) map[string]string {
	if in == nil {
		return nil
	}
	out := make(map[string]string, len(in))
	for name, q := range in {
		out[string(name)] = q.String()
	}
	return out
}

func lifecycleToProto(in *corev1.Lifecycle) *podsyncv1.Lifecycle {
	if in == nil {
		return nil
	}
	return &podsyncv1.Lifecycle{
		PostStart: handlerToProto(in.PostStart), PreStop: handlerToProto(in.PreStop),
		StopSignal: (*string)(in.StopSignal),
	}
}

func handlerToProto(in *corev1.LifecycleHandler) *podsyncv1.LifecycleHandler {
	if in == nil {
		return nil
	}
	out := &podsyncv1.LifecycleHandler{Exec: execToProto(in.Exec), HttpGet: httpGetToProto(in.HTTPGet)}
	if s := in.Sleep; s != nil {
		out.Sleep = &podsyncv1.SleepAction{Seconds: s.Seconds}
	}
	return out
}

func httpGetToProto(h *corev1.HTTPGetAction) *podsyncv1.HTTPGetAction {
	if h == nil {
		return nil
	}
	return &podsyncv1.HTTPGetAction{
		Path: h.Path, Port: portToProto(h.Port), Host: h.Host, Scheme: string(h.Scheme),
		HttpHeaders: toSlice(h.HTTPHeaders, func(hd corev1.HTTPHeader) *podsyncv1.HTTPHeader {
			return &podsyncv1.HTTPHeader{Name: hd.Name, Value: hd.Value}
		}),
	}
}

func execToProto(in *corev1.ExecAction) *podsyncv1.ExecAction {
	if in == nil {
		return nil
	}
	return &podsyncv1.ExecAction{Command: in.Command}
}

func probeToProto(in *corev1.Probe) *podsyncv1.Probe {
	if in == nil {
		return nil
	}
	out := &podsyncv1.Probe{
		Exec:                          execToProto(in.Exec),
		HttpGet:                       httpGetToProto(in.HTTPGet),
		InitialDelaySeconds:           in.InitialDelaySeconds,
		TimeoutSeconds:                in.TimeoutSeconds,
		PeriodSeconds:                 in.PeriodSeconds,
		SuccessThreshold:              in.SuccessThreshold,
		FailureThreshold:              in.FailureThreshold,
		TerminationGracePeriodSeconds: in.TerminationGracePeriodSeconds,
	}
	if t := in.TCPSocket; t != nil {
		out.TcpSocket = &podsyncv1.TCPSocketAction{Port: portToProto(t.Port), Host: t.Host}
	}
	if g := in.GRPC; g != nil {
		out.Grpc = &podsyncv1.GRPCAction{Port: g.Port, Service: g.Service, Mode: (*string)(g.Mode)}
	}
	return out
}

func portToProto(p intstr.IntOrString) *structpb.Value {
	if p.Type == intstr.String {
		return structpb.NewStringValue(p.StrVal)
	}
	return structpb.NewNumberValue(float64(p.IntVal))
}

func securityContextToProto(in *corev1.SecurityContext) *podsyncv1.SecurityContext {
	if in == nil {
		return nil
	}
	out := &podsyncv1.SecurityContext{
		Privileged:               in.Privileged,
		RunAsUser:                in.RunAsUser,
		RunAsGroup:               in.RunAsGroup,
		RunAsNonRoot:             in.RunAsNonRoot,
		ReadOnlyRootFilesystem:   in.ReadOnlyRootFilesystem,
		AllowPrivilegeEscalation: in.AllowPrivilegeEscalation,
		SeLinuxOptions:           seLinuxOptionsToProto(in.SELinuxOptions),
		SeccompProfile:           seccompProfileToProto(in.SeccompProfile),
		AppArmorProfile:          appArmorProfileToProto(in.AppArmorProfile),
		ProcMount:                (*string)(in.ProcMount),
	}
	if c := in.Capabilities; c != nil {
		out.Capabilities = &podsyncv1.Capabilities{
			Add:  toSlice(c.Add, func(c corev1.Capability) string { return string(c) }),
			Drop: toSlice(c.Drop, func(c corev1.Capability) string { return string(c) }),
		}
	}
	return out
}

// toSlice maps a slice, keeping nil as nil.
func toSlice[T, U any](in []T, f func(T) U) []U {
	if in == nil {
		return nil
	}
	out := make([]U, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}
