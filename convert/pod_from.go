package convert

import (
	"math"

	"google.golang.org/protobuf/types/known/structpb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// fromProto converts API messages to core/v1, collecting the values that
// core/v1 cannot represent.
type fromProto struct {
	errs field.ErrorList
}

func (c *fromProto) podSpec(path *field.Path, in *podsyncv1.PodSpec) corev1.PodSpec {
	return corev1.PodSpec{
		Containers:                    c.containers(path.Child("containers"), in.Containers),
		InitContainers:                c.containers(path.Child("initContainers"), in.InitContainers),
		RestartPolicy:                 corev1.RestartPolicy(in.RestartPolicy),
		TerminationGracePeriodSeconds: in.TerminationGracePeriodSeconds,
		ActiveDeadlineSeconds:         in.ActiveDeadlineSeconds,
		HostNetwork:                   in.HostNetwork,
		HostPID:                       in.HostPid,
		HostIPC:                       in.HostIpc,
		Hostname:                      in.Hostname,
		Subdomain:                     in.Subdomain,
		DNSPolicy:                     corev1.DNSPolicy(in.DnsPolicy),
		DNSConfig:                     dnsConfigFromProto(in.DnsConfig),
		HostAliases: toSlice(in.HostAliases, func(h *podsyncv1.HostAlias) corev1.HostAlias {
			return corev1.HostAlias{IP: h.GetIp(), Hostnames: h.GetHostnames()}
		}),
		Volumes:                   c.volumes(path.Child("volumes"), in.Volumes),
		SecurityContext:           podSecurityContextFromProto(in.SecurityContext),
		NodeName:                  in.NodeName,
		EnableServiceLinks:        in.EnableServiceLinks,
		SchedulerName:             in.SchedulerName,
		ServiceAccountName:        in.ServiceAccountName,
		NodeSelector:              in.NodeSelector,
		Tolerations:               toSlice(in.Tolerations, tolerationFromProto),
		Affinity:                  c.affinity(path.Child("affinity"), in.Affinity),
		TopologySpreadConstraints: c.topologySpreadConstraints(path.Child("topologySpreadConstraints"), in.TopologySpreadConstraints),
		ShareProcessNamespace:     in.ShareProcessNamespace,
		HostUsers:                 in.HostUsers,
		SetHostnameAsFQDN:         in.SetHostnameAsFqdn,
		OS:                        podOSFromProto(in.Os),
		Resources:                 c.podResources(path.Child("resources"), in.Resources),
		Priority:                  in.Priority,
		PriorityClassName:         in.PriorityClassName,
		ImagePullSecrets: toSlice(in.ImagePullSecrets, func(r *podsyncv1.LocalObjectReference) corev1.LocalObjectReference {
			return corev1.LocalObjectReference{Name: r.GetName()}
		}),
		EphemeralContainers: c.ephemeralContainers(path.Child("ephemeralContainers"), in.EphemeralContainers),
		HostnameOverride:    in.HostnameOverride,
		RuntimeClassName:    in.RuntimeClassName,
		Overhead:            c.resourceList(path.Child("overhead"), in.Overhead),
	}
}

func (c *fromProto) ephemeralContainers(path *field.Path, in []*podsyncv1.EphemeralContainer) []corev1.EphemeralContainer {
	if in == nil {
		return nil
	}
	out := make([]corev1.EphemeralContainer, len(in))
	for i, ec := range in {
		out[i] = c.ephemeralContainer(path.Index(i), ec)
	}
	return out
}

func (c *fromProto) ephemeralContainer(path *field.Path, in *podsyncv1.EphemeralContainer) corev1.EphemeralContainer {
	ct := c.container(path, &podsyncv1.Container{
		Name: in.GetName(), Image: in.GetImage(), ImagePullPolicy: in.GetImagePullPolicy(), Command: in.GetCommand(),
		Args: in.GetArgs(), WorkingDir: in.GetWorkingDir(), Env: in.GetEnv(), EnvFrom: in.GetEnvFrom(),
		VolumeMounts: in.GetVolumeMounts(), TerminationMessagePath: in.GetTerminationMessagePath(),
		TerminationMessagePolicy: in.GetTerminationMessagePolicy(), SecurityContext: in.GetSecurityContext(),
		Stdin: in.GetStdin(), Tty: in.GetTty(), StdinOnce: in.GetStdinOnce(),
	})
	return corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon(ct), TargetContainerName: in.GetTargetContainerName()}
}

// EphemeralContainerFromProto converts the API's EphemeralContainer to
// core/v1. It fails with an *InvalidError (kind EphemeralContainer) when a
// value cannot be represented, such as a malformed env var source.
func EphemeralContainerFromProto(in *podsyncv1.EphemeralContainer) (corev1.EphemeralContainer, error) {
	c := &fromProto{}
	out := c.ephemeralContainer(field.NewPath("ephemeralContainer"), in)
	if len(c.errs) > 0 {
		return corev1.EphemeralContainer{}, &InvalidError{Kind: "EphemeralContainer", Name: in.GetName(), Errors: c.errs}
	}
	return out, nil
}

func podOSFromProto(in *podsyncv1.PodOS) *corev1.PodOS {
	if in == nil {
		return nil
	}
	return &corev1.PodOS{Name: corev1.OSName(in.Name)}
}

// podResources converts the pod-level resources; absent stays nil.
func (c *fromProto) podResources(path *field.Path, in *podsyncv1.ResourceRequirements) *corev1.ResourceRequirements {
	if in == nil {
		return nil
	}
	r := c.resources(path, in)
	return &r
}

func dnsConfigFromProto(in *podsyncv1.PodDNSConfig) *corev1.PodDNSConfig {
	if in == nil {
		return nil
	}
	return &corev1.PodDNSConfig{
		Nameservers: in.Nameservers,
		Searches:    in.Searches,
		Options: toSlice(in.Options, func(o *podsyncv1.PodDNSConfigOption) corev1.PodDNSConfigOption {
			return corev1.PodDNSConfigOption{Name: o.GetName(), Value: o.Value}
		}),
	}
}

func podSecurityContextFromProto(in *podsyncv1.PodSecurityContext) *corev1.PodSecurityContext {
	if in == nil {
		return nil
	}
	return &corev1.PodSecurityContext{
		RunAsUser:          in.RunAsUser,
		RunAsGroup:         in.RunAsGroup,
		RunAsNonRoot:       in.RunAsNonRoot,
		FSGroup:            in.FsGroup,
		SupplementalGroups: in.SupplementalGroups,
		Sysctls: toSlice(in.Sysctls, func(s *podsyncv1.Sysctl) corev1.Sysctl {
			return corev1.Sysctl{Name: s.GetName(), Value: s.GetValue()}
		}),
		SELinuxOptions:      seLinuxOptionsFromProto(in.SeLinuxOptions),
		SeccompProfile:      seccompProfileFromProto(in.SeccompProfile),
		AppArmorProfile:     appArmorProfileFromProto(in.AppArmorProfile),
		FSGroupChangePolicy: (*corev1.PodFSGroupChangePolicy)(in.FsGroupChangePolicy),
	}
}

func seLinuxOptionsFromProto(in *podsyncv1.SELinuxOptions) *corev1.SELinuxOptions {
	if in == nil {
		return nil
	}
	return &corev1.SELinuxOptions{User: in.User, Role: in.Role, Type: in.Type, Level: in.Level}
}

func seccompProfileFromProto(in *podsyncv1.SeccompProfile) *corev1.SeccompProfile {
	if in == nil {
		return nil
	}
	return &corev1.SeccompProfile{Type: corev1.SeccompProfileType(in.Type), LocalhostProfile: in.LocalhostProfile}
}

func appArmorProfileFromProto(in *podsyncv1.AppArmorProfile) *corev1.AppArmorProfile {
	if in == nil {
		return nil
	}
	return &corev1.AppArmorProfile{Type: corev1.AppArmorProfileType(in.Type), LocalhostProfile: in.LocalhostProfile}
}

func (c *fromProto) volumes(path *field.Path, in []*podsyncv1.Volume) []corev1.Volume {
	if in == nil {
		return nil
	}
	out := make([]corev1.Volume, len(in))
	for i, v := range in {
		p := path.Index(i)
		out[i].Name = v.GetName()
		if s := v.GetEmptyDir(); s != nil {
			out[i].EmptyDir = &corev1.EmptyDirVolumeSource{
				Medium:    corev1.StorageMedium(s.Medium),
				SizeLimit: c.quantityPtr(p.Child("emptyDir", "sizeLimit"), s.SizeLimit),
			}
		}
		if s := v.GetHostPath(); s != nil {
			out[i].HostPath = &corev1.HostPathVolumeSource{Path: s.Path, Type: (*corev1.HostPathType)(s.Type)}
		}
		if s := v.GetConfigMap(); s != nil {
			out[i].ConfigMap = &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: s.Name},
				Items:                toSlice(s.Items, keyToPathFromProto),
				DefaultMode:          s.DefaultMode,
				Optional:             s.Optional,
			}
		}
		if s := v.GetSecret(); s != nil {
			out[i].Secret = &corev1.SecretVolumeSource{
				SecretName:  s.SecretName,
				Items:       toSlice(s.Items, keyToPathFromProto),
				DefaultMode: s.DefaultMode,
				Optional:    s.Optional,
			}
		}
		if s := v.GetDownwardApi(); s != nil {
			fp := p.Child("downwardAPI", "items")
			out[i].DownwardAPI = &corev1.DownwardAPIVolumeSource{Items: c.downwardAPIFiles(fp, s.Items), DefaultMode: s.DefaultMode}
		}
		if s := v.GetProjected(); s != nil {
			sp := p.Child("projected", "sources")
			proj := &corev1.ProjectedVolumeSource{DefaultMode: s.DefaultMode}
			if s.Sources != nil {
				proj.Sources = make([]corev1.VolumeProjection, len(s.Sources))
			}
			for j, src := range s.Sources {
				o := &proj.Sources[j]
				if r := src.GetConfigMap(); r != nil {
					o.ConfigMap = &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: r.Name}, Items: toSlice(r.Items, keyToPathFromProto), Optional: r.Optional}
				}
				if r := src.GetSecret(); r != nil {
					o.Secret = &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: r.Name}, Items: toSlice(r.Items, keyToPathFromProto), Optional: r.Optional}
				}
				if r := src.GetDownwardApi(); r != nil {
					o.DownwardAPI = &corev1.DownwardAPIProjection{Items: c.downwardAPIFiles(sp.Index(j).Child("downwardAPI", "items"), r.Items)}
				}
			}
			out[i].Projected = proj
		}
		if s := v.GetPersistentVolumeClaim(); s != nil {
			out[i].PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: s.ClaimName, ReadOnly: s.ReadOnly}
		}
		if s := v.GetImage(); s != nil {
			out[i].Image = &corev1.ImageVolumeSource{Reference: s.Reference, PullPolicy: corev1.PullPolicy(s.PullPolicy)}
		}
	}
	return out
}

func (c *fromProto) downwardAPIFiles(path *field.Path, in []*podsyncv1.DownwardAPIVolumeFile) []corev1.DownwardAPIVolumeFile {
	if in == nil {
		return nil
	}
	out := make([]corev1.DownwardAPIVolumeFile, len(in))
	for i, f := range in {
		out[i] = corev1.DownwardAPIVolumeFile{Path: f.GetPath(), Mode: f.Mode}
		if r := f.GetFieldRef(); r != nil {
			out[i].FieldRef = &corev1.ObjectFieldSelector{APIVersion: r.ApiVersion, FieldPath: r.FieldPath}
		}
		out[i].ResourceFieldRef = c.resourceField(path.Index(i).Child("resourceFieldRef"), f.GetResourceFieldRef())
	}
	return out
}

func (c *fromProto) resourceField(path *field.Path, in *podsyncv1.ResourceFieldSelector) *corev1.ResourceFieldSelector {
	if in == nil {
		return nil
	}
	out := &corev1.ResourceFieldSelector{ContainerName: in.ContainerName, Resource: in.Resource}
	if q := c.quantityPtr(path.Child("divisor"), in.Divisor); q != nil {
		out.Divisor = *q
	}
	return out
}

func keyToPathFromProto(in *podsyncv1.KeyToPath) corev1.KeyToPath {
	return corev1.KeyToPath{Key: in.GetKey(), Path: in.GetPath(), Mode: in.Mode}
}

func (c *fromProto) containers(path *field.Path, in []*podsyncv1.Container) []corev1.Container {
	if in == nil {
		return nil
	}
	out := make([]corev1.Container, len(in))
	for i, ct := range in {
		out[i] = c.container(path.Index(i), ct)
	}
	return out
}

func (c *fromProto) container(path *field.Path, in *podsyncv1.Container) corev1.Container {
	return corev1.Container{
		Name:            in.GetName(),
		Image:           in.GetImage(),
		ImagePullPolicy: corev1.PullPolicy(in.GetImagePullPolicy()),
		Command:         in.GetCommand(),
		Args:            in.GetArgs(),
		WorkingDir:      in.GetWorkingDir(),
		Env:             c.envVars(path.Child("env"), in.GetEnv()),
		EnvFrom:         toSlice(in.GetEnvFrom(), envFromFromProto),
		Ports: toSlice(in.GetPorts(), func(p *podsyncv1.ContainerPort) corev1.ContainerPort {
			return corev1.ContainerPort{
				Name: p.GetName(), ContainerPort: p.GetContainerPort(), HostPort: p.GetHostPort(),
				HostIP: p.GetHostIp(), Protocol: corev1.Protocol(p.GetProtocol()),
			}
		}),
		Resources: c.resources(path.Child("resources"), in.GetResources()),
		VolumeMounts: toSlice(in.GetVolumeMounts(), func(m *podsyncv1.VolumeMount) corev1.VolumeMount {
			return corev1.VolumeMount{
				Name: m.GetName(), MountPath: m.GetMountPath(), SubPath: m.GetSubPath(), ReadOnly: m.GetReadOnly(),
				MountPropagation: (*corev1.MountPropagationMode)(m.MountPropagation), SubPathExpr: m.GetSubPathExpr(),
			}
		}),
		Lifecycle:                c.lifecycle(path.Child("lifecycle"), in.GetLifecycle()),
		LivenessProbe:            c.probe(path.Child("livenessProbe"), in.GetLivenessProbe()),
		ReadinessProbe:           c.probe(path.Child("readinessProbe"), in.GetReadinessProbe()),
		StartupProbe:             c.probe(path.Child("startupProbe"), in.GetStartupProbe()),
		TerminationMessagePath:   in.GetTerminationMessagePath(),
		TerminationMessagePolicy: corev1.TerminationMessagePolicy(in.GetTerminationMessagePolicy()),
		SecurityContext:          securityContextFromProto(in.GetSecurityContext()),
		RestartPolicy:            (*corev1.ContainerRestartPolicy)(in.RestartPolicy),
		Stdin:                    in.GetStdin(),
		StdinOnce:                in.GetStdinOnce(),
		TTY:                      in.GetTty(),
		ResizePolicy: toSlice(in.GetResizePolicy(), func(r *podsyncv1.ContainerResizePolicy) corev1.ContainerResizePolicy {
			return corev1.ContainerResizePolicy{ResourceName: corev1.ResourceName(r.GetResourceName()),
				RestartPolicy: corev1.ResourceResizeRestartPolicy(r.GetRestartPolicy())}
		}),
		RestartPolicyRules: toSlice(in.GetRestartPolicyRules(), func(r *podsyncv1.ContainerRestartRule) corev1.ContainerRestartRule {
			out := corev1.ContainerRestartRule{Action: corev1.ContainerRestartRuleAction(r.GetAction())}
			if e := r.GetExitCodes(); e != nil {
				out.ExitCodes = &corev1.ContainerRestartRuleOnExitCodes{
					Operator: corev1.ContainerRestartRuleOnExitCodesOperator(e.GetOperator()), Values: e.GetValues()}
			}
			return out
		}),
	}
}

func (c *fromProto) envVars(path *field.Path, in []*podsyncv1.EnvVar) []corev1.EnvVar {
	if in == nil {
		return nil
	}
	out := make([]corev1.EnvVar, len(in))
	for i, e := range in {
		out[i] = c.envVar(path.Index(i), e)
	}
	return out
}

func (c *fromProto) envVar(path *field.Path, in *podsyncv1.EnvVar) corev1.EnvVar {
	out := corev1.EnvVar{Name: in.GetName(), Value: in.GetValue()}
	if src := in.GetValueFrom(); src != nil {
		out.ValueFrom = &corev1.EnvVarSource{}
		if r := src.GetFieldRef(); r != nil {
			out.ValueFrom.FieldRef = &corev1.ObjectFieldSelector{APIVersion: r.ApiVersion, FieldPath: r.FieldPath}
		}
		if r := src.GetConfigMapKeyRef(); r != nil {
			out.ValueFrom.ConfigMapKeyRef = &corev1.ConfigMapKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: r.Name}, Key: r.Key, Optional: r.Optional,
			}
		}
		if r := src.GetSecretKeyRef(); r != nil {
			out.ValueFrom.SecretKeyRef = &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: r.Name}, Key: r.Key, Optional: r.Optional,
			}
		}
		out.ValueFrom.ResourceFieldRef = c.resourceField(path.Child("valueFrom", "resourceFieldRef"), src.GetResourceFieldRef())
	}
	return out
}

func envFromFromProto(in *podsyncv1.EnvFromSource) corev1.EnvFromSource {
	out := corev1.EnvFromSource{Prefix: in.GetPrefix()}
	if r := in.GetConfigMapRef(); r != nil {
		out.ConfigMapRef = &corev1.ConfigMapEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: r.Name}, Optional: r.Optional,
		}
	}
	if r := in.GetSecretRef(); r != nil {
		out.SecretRef = &corev1.SecretEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: r.Name}, Optional: r.Optional,
		}
	}
	return out
}

func (c *fromProto) resources(path *field.Path, in *podsyncv1.ResourceRequirements) corev1.ResourceRequirements {
	if in == nil {
		return corev1.ResourceRequirements{}
	}
	return corev1.ResourceRequirements{
		Requests: c.resourceList(path.Child("requests"), in.Requests),
		Limits:   c.resourceList(path.Child("limits"), in.Limits),
	}
}

func (c *fromProto) resourceList(path *field.Path, in map[string]string) corev1.ResourceList {
	if in == nil {
		return nil
	}
	out := make(corev1.ResourceList, len(in))
	for name, v := range in {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			c.errs = append(c.errs, field.Invalid(path.Key(name), v, err.Error()))
			continue
		}
		out[corev1.ResourceName(name)] = q
	}
	return out
}

func (c *fromProto) quantityPtr(path *field.Path, v string) *resource.Quantity {
	if v == "" {
		return nil
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		c.errs = append(c.errs, field.Invalid(path, v, err.Error()))
		return nil
	}
	return &q
}

func (c *fromProto) lifecycle(path *field.Path, in *podsyncv1.Lifecycle) *corev1.Lifecycle {
	if in == nil {
		return nil
	}
	return &corev1.Lifecycle{
		PostStart:  c.handler(path.Child("postStart"), in.PostStart),
		PreStop:    c.handler(path.Child("preStop"), in.PreStop),
		StopSignal: (*corev1.Signal)(in.StopSignal),
	}
}

func (c *fromProto) handler(path *field.Path, in *podsyncv1.LifecycleHandler) *corev1.LifecycleHandler {
	if in == nil {
		return nil
	}
	out := &corev1.LifecycleHandler{Exec: execFromProto(in.Exec), HTTPGet: c.httpGet(path.Child("httpGet"), in.HttpGet)}
	if s := in.Sleep; s != nil {
		out.Sleep = &corev1.SleepAction{Seconds: s.Seconds}
	}
	return out
}

func (c *fromProto) httpGet(path *field.Path, h *podsyncv1.HTTPGetAction) *corev1.HTTPGetAction {
	if h == nil {
		return nil
	}
	return &corev1.HTTPGetAction{
		Path:   h.Path,
		Port:   c.port(path.Child("port"), h.Port),
		Host:   h.Host,
		Scheme: corev1.URIScheme(h.Scheme),
		HTTPHeaders: toSlice(h.HttpHeaders, func(hd *podsyncv1.HTTPHeader) corev1.HTTPHeader {
			return corev1.HTTPHeader{Name: hd.GetName(), Value: hd.GetValue()}
		}),
	}
}

func execFromProto(in *podsyncv1.ExecAction) *corev1.ExecAction {
	if in == nil {
		return nil
	}
	return &corev1.ExecAction{Command: in.Command}
}

func (c *fromProto) probe(path *field.Path, in *podsyncv1.Probe) *corev1.Probe {
	if in == nil {
		return nil
	}
	out := &corev1.Probe{
		ProbeHandler:                  corev1.ProbeHandler{Exec: execFromProto(in.Exec), HTTPGet: c.httpGet(path.Child("httpGet"), in.HttpGet)},
		InitialDelaySeconds:           in.InitialDelaySeconds,
		TimeoutSeconds:                in.TimeoutSeconds,
		PeriodSeconds:                 in.PeriodSeconds,
		SuccessThreshold:              in.SuccessThreshold,
		FailureThreshold:              in.FailureThreshold,
		TerminationGracePeriodSeconds: in.TerminationGracePeriodSeconds,
	}
	if t := in.TcpSocket; t != nil {
		out.TCPSocket = &corev1.TCPSocketAction{Port: c.port(path.Child("tcpSocket", "port"), t.Port), Host: t.Host}
	}
	if g := in.Grpc; g != nil {
		out.GRPC = &corev1.GRPCAction{Port: g.Port, Service: g.Service, Mode: (*corev1.GRPCProbeMode)(g.Mode)}
	}
	return out
}

// port converts a probe port: a whole number in int32 range or a port name.
func (c *fromProto) port(path *field.Path, v *structpb.Value) intstr.IntOrString {
	switch k := v.GetKind().(type) {
	case nil:
		return intstr.IntOrString{}
	case *structpb.Value_StringValue:
		return intstr.FromString(k.StringValue)
	case *structpb.Value_NumberValue:
		n := k.NumberValue
		if n == math.Trunc(n) && n >= math.MinInt32 && n <= math.MaxInt32 {
			return intstr.FromInt32(int32(n))
		}
		c.errs = append(c.errs, field.Invalid(path, n, "must be a whole number or a port name"))
	default:
		c.errs = append(c.errs, field.Invalid(path, v.AsInterface(), "must be a whole number or a port name"))
	}
	return intstr.IntOrString{}
}

func securityContextFromProto(in *podsyncv1.SecurityContext) *corev1.SecurityContext {
	if in == nil {
		return nil
	}
	out := &corev1.SecurityContext{
		Privileged:               in.Privileged,
		RunAsUser:                in.RunAsUser,
		RunAsGroup:               in.RunAsGroup,
		RunAsNonRoot:             in.RunAsNonRoot,
		ReadOnlyRootFilesystem:   in.ReadOnlyRootFilesystem,
		AllowPrivilegeEscalation: in.AllowPrivilegeEscalation,
		SELinuxOptions:           seLinuxOptionsFromProto(in.SeLinuxOptions),
		SeccompProfile:           seccompProfileFromProto(in.SeccompProfile),
		AppArmorProfile:          appArmorProfileFromProto(in.AppArmorProfile),
		ProcMount:                (*corev1.ProcMountType)(in.ProcMount),
	}
	if c := in.Capabilities; c != nil {
		out.Capabilities = &corev1.Capabilities{
			Add:  toSlice(c.Add, func(s string) corev1.Capability { return corev1.Capability(s) }),
			Drop: toSlice(c.Drop, func(s string) corev1.Capability { return corev1.Capability(s) }),
		}
	}
	return out
}
