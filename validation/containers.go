package validation

import (
	"fmt"
	"maps"
	"math"
	"path"
	"slices"
	"strings"

	// Digest algorithms must be linked in for image references with a
	// digest to parse (github.com/opencontainers/go-digest).
	_ "crypto/sha256"
	_ "crypto/sha512"

	"github.com/distribution/reference"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// podContainers is what the containers of a pod share: what they are
// checked against, and what must be unique across them.
type podContainers struct {
	namespace   string
	hostNetwork bool
	// restartPolicy is the pod's.
	restartPolicy corev1.RestartPolicy
	// gracePeriod is the pod's terminationGracePeriodSeconds, which
	// bounds a sleep hook.
	gracePeriod *int64
	// os is the pod's spec.os, which a stopSignal needs.
	os *corev1.PodOS
	// volumes are the names of the pod's volumes.
	volumes   map[string]bool
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

func (pv *podValidator) container(p *field.Path, c *corev1.Container, isInit bool, pc *podContainers) {
	switch {
	case c.Name == "":
		pv.add(field.Required(p.Child("name"), ""))
	case pc.names[c.Name]:
		pv.add(field.Duplicate(p.Child("name"), c.Name))
	default:
		pv.add(DNS1123Label(p.Child("name"), c.Name)...)
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

	pv.containerRestartPolicy(p, c, isInit)
	sidecar := isInit && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
	if isInit && !sidecar {
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

	pv.ports(p.Child("ports"), c, pc)
	pv.env(p, pc.namespace, c)
	pv.resources(p.Child("resources"), &c.Resources)
	pv.resizePolicy(p.Child("resizePolicy"), c, isInit, pc.restartPolicy)
	pv.volumeMounts(p.Child("volumeMounts"), c, pc.volumes)
	if lc := c.Lifecycle; lc != nil {
		lp := p.Child("lifecycle")
		pv.handler(lp.Child("postStart"), c, lc.PostStart, pc.gracePeriod)
		pv.handler(lp.Child("preStop"), c, lc.PreStop, pc.gracePeriod)
		if lc.StopSignal != nil {
			pv.add(stopSignal(lp.Child("stopSignal"), *lc.StopSignal, pc.os)...)
		}
	}
	pv.probe(p.Child("livenessProbe"), c, c.LivenessProbe, true)
	pv.probe(p.Child("readinessProbe"), c, c.ReadinessProbe, false)
	pv.probe(p.Child("startupProbe"), c, c.StartupProbe, true)
	pv.securityContext(p.Child("securityContext"), c.SecurityContext)
}

func (pv *podValidator) ports(p *field.Path, c *corev1.Container, pc *podContainers) {
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
		case pc.hostNetwork && port.HostPort != port.ContainerPort:
			pv.add(field.Invalid(pp.Child("hostPort"), port.HostPort, "must equal containerPort when hostNetwork is true"))
		}
		hp := hostPort{protocol: port.Protocol, ip: port.HostIP, port: port.HostPort}
		if slices.ContainsFunc(pc.hostPorts, hp.conflicts) {
			pv.add(field.Duplicate(pp.Child("hostPort"), fmt.Sprintf("%s/%s:%d", hp.protocol, hp.ip, hp.port)))
		}
		pc.hostPorts = append(pc.hostPorts, hp)
	}
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

var supportedResources = []string{"cpu", "memory", "ephemeral-storage", "hugepages-<size>", "<domain>/<name> (an extended resource)"}

// isExtendedResource is the API server's IsExtendedResourceName: a
// qualified name with a domain outside kubernetes.io, not of a quota
// ("requests."), e.g. example.com/foo. podsyncd admits them against its
// --extended-resources.
func isExtendedResource(name corev1.ResourceName) bool {
	s := string(name)
	if !strings.Contains(s, "/") || strings.Contains(s, corev1.ResourceDefaultNamespacePrefix) || strings.HasPrefix(s, "requests.") {
		return false
	}
	return len(validation.IsQualifiedName(s)) == 0
}

func (pv *podValidator) resources(p *field.Path, r *corev1.ResourceRequirements) {
	check := func(lp *field.Path, rl corev1.ResourceList) {
		for _, name := range slices.Sorted(maps.Keys(rl)) {
			q := rl[name]
			np := lp.Key(string(name))
			switch {
			case isExtendedResource(name):
				if q.MilliValue()%1000 != 0 {
					pv.add(field.Invalid(np, q.String(), "must be an integer: an extended resource is counted in whole units"))
				} else if q.Sign() < 0 {
					pv.add(field.Invalid(np, q.String(), "must be greater than or equal to 0"))
				}
			case !supportedResource(name):
				pv.add(field.NotSupported(np, name, supportedResources))
			case q.Sign() < 0:
				pv.add(field.Invalid(np, q.String(), "must be greater than or equal to 0"))
			}
		}
	}
	check(p.Child("limits"), r.Limits)
	check(p.Child("requests"), r.Requests)
	for _, name := range slices.Sorted(maps.Keys(r.Requests)) {
		req := r.Requests[name]
		limit, ok := r.Limits[name]
		if isExtendedResource(name) {
			// The API server's: an extended resource cannot be
			// overcommitted.
			if !ok {
				pv.add(field.Required(p.Child("limits").Key(string(name)), "an extended resource needs a limit equal to its request"))
			} else if req.Cmp(limit) != 0 {
				pv.add(field.Invalid(p.Child("requests").Key(string(name)), req.String(),
					fmt.Sprintf("must be equal to %s limit of %s: an extended resource cannot be overcommitted", name, limit.String())))
			}
			continue
		}
		if ok && req.Cmp(limit) > 0 {
			pv.add(field.Invalid(p.Child("requests").Key(string(name)), req.String(),
				fmt.Sprintf("must be less than or equal to %s limit of %s", name, limit.String())))
		}
	}
}

var (
	resizeResources = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}
	resizePolicies  = []corev1.ResourceResizeRestartPolicy{corev1.NotRequired, corev1.RestartContainer}
)

// resizePolicy is the API server's validateResizePolicy with its rules
// for init containers: cpu and memory once each, NotRequired or
// RestartContainer, not RestartContainer under the pod's restartPolicy
// Never, and none on a classic init container, which is never resized.
func (pv *podValidator) resizePolicy(p *field.Path, c *corev1.Container, isInit bool, podRestart corev1.RestartPolicy) {
	if isInit && (c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways) && len(c.ResizePolicy) > 0 {
		pv.add(field.Forbidden(p, "may only be set on init containers with restartPolicy Always"))
		return
	}
	seen := map[corev1.ResourceName]bool{}
	for i, r := range c.ResizePolicy {
		ip := p.Index(i)
		switch {
		case r.ResourceName == "":
			pv.add(field.Required(ip.Child("resourceName"), ""))
		case !slices.Contains(resizeResources, r.ResourceName):
			pv.add(field.NotSupported(ip.Child("resourceName"), r.ResourceName, resizeResources))
		case seen[r.ResourceName]:
			pv.add(field.Duplicate(ip.Child("resourceName"), r.ResourceName))
		}
		seen[r.ResourceName] = true
		switch {
		case r.RestartPolicy == "":
			pv.add(field.Required(ip.Child("restartPolicy"), ""))
		case !slices.Contains(resizePolicies, r.RestartPolicy):
			pv.add(field.NotSupported(ip.Child("restartPolicy"), r.RestartPolicy, resizePolicies))
		case r.RestartPolicy != corev1.NotRequired && podRestart == corev1.RestartPolicyNever:
			pv.add(field.Invalid(ip.Child("restartPolicy"), r.RestartPolicy, "must be 'NotRequired' when pod `restartPolicy` is 'Never'"))
		}
	}
}

// handler is the API server's validateHandler for a lifecycle hook: one
// of exec, httpGet and sleep (a sleep within the pod's grace period); a
// tcpSocket hook, which the kubelet has never run, is refused.
func (pv *podValidator) handler(p *field.Path, c *corev1.Container, h *corev1.LifecycleHandler, grace *int64) {
	if h == nil {
		return
	}
	var set []string
	if h.Exec != nil {
		set = append(set, "exec")
		if len(h.Exec.Command) == 0 {
			pv.add(field.Required(p.Child("exec", "command"), ""))
		}
	}
	if h.HTTPGet != nil {
		set = append(set, "httpGet")
		pv.httpGet(p.Child("httpGet"), c, h.HTTPGet)
	}
	if h.Sleep != nil {
		set = append(set, "sleep")
		if grace != nil && (h.Sleep.Seconds < 0 || h.Sleep.Seconds > *grace) {
			pv.add(field.Invalid(p.Child("sleep", "seconds"), h.Sleep.Seconds,
				fmt.Sprintf("must be non-negative and less than terminationGracePeriodSeconds (%d)", *grace)))
		}
	}
	if h.TCPSocket != nil {
		pv.add(field.Forbidden(p.Child("tcpSocket"),
			"a tcpSocket lifecycle hook is never run (the kubelet ignores it): use httpGet, exec or sleep"))
		return
	}
	switch len(set) {
	case 0:
		pv.add(field.Required(p, "must specify a handler: exec, httpGet or sleep"))
	case 1:
	default:
		for _, extra := range set[1:] {
			pv.add(field.Forbidden(p.Child(extra), "may not specify more than 1 handler type"))
		}
	}
}

// httpGet validates an httpGet probe or hook: its port, scheme and header
// names.
func (pv *podValidator) httpGet(p *field.Path, c *corev1.Container, h *corev1.HTTPGetAction) {
	pv.probePort(p.Child("port"), c, h.Port)
	if !slices.Contains(uriSchemes, h.Scheme) {
		pv.add(field.NotSupported(p.Child("scheme"), h.Scheme, uriSchemes))
	}
	for i, hd := range h.HTTPHeaders {
		pv.add(invalid(p.Child("httpHeaders").Index(i).Child("name"), hd.Name, validation.IsHTTPHeaderName(hd.Name))...)
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
		pv.httpGet(p.Child("httpGet"), c, h)
	}
	if t := pr.TCPSocket; t != nil {
		set = append(set, "tcpSocket")
		pv.probePort(p.Child("tcpSocket", "port"), c, t.Port)
	}
	if g := pr.GRPC; g != nil {
		set = append(set, "grpc")
		gp := p.Child("grpc")
		pv.add(invalid(gp.Child("port"), g.Port, validation.IsValidPortNum(int(g.Port)))...)
		if g.Mode != nil && !slices.Contains(grpcProbeModes, *g.Mode) {
			pv.add(field.NotSupported(gp.Child("mode"), *g.Mode, grpcProbeModes))
		}
	}
	switch len(set) {
	case 0:
		pv.add(field.Required(p, "must specify a handler: exec, httpGet, tcpSocket or grpc"))
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
			pv.add(gracePeriod(gp, *g, 1, pv.lim.MaxGracePeriodSeconds)...)
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
	pv.add(procMount(p.Child("procMount"), sc.ProcMount)...)
	pv.add(seccompProfile(p.Child("seccompProfile"), sc.SeccompProfile)...)
	pv.add(appArmorProfile(p.Child("appArmorProfile"), sc.AppArmorProfile)...)
}

// containerRestartPolicy is the API server's validateContainerRestartPolicy
// and validateInitContainerRestartPolicy with ContainerRestartRules
// (KEP-5307) on, as in Kubernetes v1.37: a container's restartPolicy is
// Always, OnFailure or Never (on an init container, Always makes it a
// sidecar), and its restartPolicyRules, which need a restartPolicy, each
// restart it on exit codes In or NotIn a list. podsync runs the Restart
// action only; RestartAllContainers (KEP-5532) is refused.
func (pv *podValidator) containerRestartPolicy(p *field.Path, c *corev1.Container, isInit bool) {
	rp, rules := c.RestartPolicy, c.RestartPolicyRules
	switch {
	case rp == nil && len(rules) > 0:
		pv.add(field.Required(p.Child("restartPolicy"), "must specify restartPolicy when restart rules are used"))
	case rp != nil && !slices.Contains(containerRestartPolicies, *rp):
		pv.add(field.NotSupported(p.Child("restartPolicy"), *rp, containerRestartPolicies))
	}
	if len(rules) > maxRestartRules {
		pv.add(field.TooMany(p.Child("restartPolicyRules"), len(rules), maxRestartRules))
	}
	for i, r := range rules {
		rp := p.Child("restartPolicyRules").Index(i)
		if r.Action == corev1.ContainerRestartRuleActionRestartAllContainers {
			pv.add(field.Forbidden(rp.Child("action"), "RestartAllContainers is not supported by podsync, which restarts one container at a time; use Restart"))
		} else if !slices.Contains(restartRuleActions, r.Action) {
			pv.add(field.NotSupported(rp.Child("action"), r.Action, restartRuleActions))
		}
		if r.ExitCodes == nil {
			pv.add(field.Required(rp.Child("exitCodes"), "must be specified"))
			continue
		}
		ep := rp.Child("exitCodes")
		if !slices.Contains(restartRuleOperators, r.ExitCodes.Operator) {
			pv.add(field.NotSupported(ep.Child("operator"), r.ExitCodes.Operator, restartRuleOperators))
		}
		if len(r.ExitCodes.Values) > maxRestartRuleExitCodes {
			pv.add(field.TooMany(ep.Child("values"), len(r.ExitCodes.Values), maxRestartRuleExitCodes))
		}
	}
}

// The API server's bounds on restart rules.
const (
	maxRestartRules         = 20
	maxRestartRuleExitCodes = 255
)

var (
	containerRestartPolicies = []corev1.ContainerRestartPolicy{
		corev1.ContainerRestartPolicyAlways, corev1.ContainerRestartPolicyOnFailure, corev1.ContainerRestartPolicyNever,
	}
	restartRuleActions   = []corev1.ContainerRestartRuleAction{corev1.ContainerRestartRuleActionRestart}
	restartRuleOperators = []corev1.ContainerRestartRuleOnExitCodesOperator{
		corev1.ContainerRestartRuleOnExitCodesOpIn, corev1.ContainerRestartRuleOnExitCodesOpNotIn,
	}
)
