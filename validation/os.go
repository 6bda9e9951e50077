package validation

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// podOSNames are the API server's values of spec.os.name.
var podOSNames = []string{string(corev1.Linux), string(corev1.Windows)}

// windowsStopSignals are the stop signals a Windows pod may give.
var windowsStopSignals = []corev1.Signal{corev1.SIGKILL, corev1.SIGTERM}

// podOS is the API server's validateOS with validateLinux and
// validateWindows: a name is required and is linux or windows, and each
// OS forbids the other's fields. A Windows pod is valid here as on the API
// server: the node refuses it at admission (PodOSNotSupported), as a
// Linux kubelet does.
func podOS(p *field.Path, spec *corev1.PodSpec) field.ErrorList {
	o := spec.OS
	if o == nil {
		return nil
	}
	op := p.Child("os")
	switch {
	case o.Name == "":
		return field.ErrorList{field.Required(op.Child("name"), "")}
	case !slices.Contains(podOSNames, string(o.Name)):
		return field.ErrorList{field.NotSupported(op, o.Name, podOSNames)}
	case o.Name == corev1.Windows:
		return windowsPod(p, spec)
	default:
		return linuxPod(p, spec)
	}
}

// visitContainers calls fn with every container of spec and its path, as
// the API server's VisitContainersWithPath.
func visitContainers(p *field.Path, spec *corev1.PodSpec, fn func(cp *field.Path, sc *corev1.SecurityContext)) {
	for i := range spec.InitContainers {
		fn(p.Child("initContainers").Index(i), spec.InitContainers[i].SecurityContext)
	}
	for i := range spec.Containers {
		fn(p.Child("containers").Index(i), spec.Containers[i].SecurityContext)
	}
	for i := range spec.EphemeralContainers {
		fn(p.Child("ephemeralContainers").Index(i), spec.EphemeralContainers[i].SecurityContext)
	}
}

// linuxPod is the API server's validateLinux.
func linuxPod(p *field.Path, spec *corev1.PodSpec) field.ErrorList {
	var errs field.ErrorList
	if sc := spec.SecurityContext; sc != nil && sc.WindowsOptions != nil {
		errs = append(errs, field.Forbidden(p.Child("securityContext", "windowsOptions"), "windows options cannot be set for a linux pod"))
	}
	visitContainers(p, spec, func(cp *field.Path, sc *corev1.SecurityContext) {
		if sc != nil && sc.WindowsOptions != nil {
			errs = append(errs, field.Forbidden(cp.Child("securityContext", "windowsOptions"), "windows options cannot be set for a linux pod"))
		}
	})
	return errs
}

// windowsPod is the API server's validateWindows: the Linux-only fields
// of the pod and its containers are forbidden.
func windowsPod(p *field.Path, spec *corev1.PodSpec) field.ErrorList {
	var errs field.ErrorList
	forbid := func(path *field.Path, set bool) {
		if set {
			errs = append(errs, field.Forbidden(path, "cannot be set for a windows pod"))
		}
	}
	if sc := spec.SecurityContext; sc != nil {
		sp := p.Child("securityContext")
		forbid(sp.Child("appArmorProfile"), sc.AppArmorProfile != nil)
		forbid(sp.Child("seLinuxOptions"), sc.SELinuxOptions != nil)
		forbid(sp.Child("seccompProfile"), sc.SeccompProfile != nil)
		forbid(sp.Child("fsGroup"), sc.FSGroup != nil)
		forbid(sp.Child("fsGroupChangePolicy"), sc.FSGroupChangePolicy != nil)
		forbid(sp.Child("sysctls"), len(sc.Sysctls) > 0)
		forbid(sp.Child("runAsUser"), sc.RunAsUser != nil)
		forbid(sp.Child("runAsGroup"), sc.RunAsGroup != nil)
		forbid(sp.Child("supplementalGroups"), sc.SupplementalGroups != nil)
		forbid(sp.Child("supplementalGroupsPolicy"), sc.SupplementalGroupsPolicy != nil)
		forbid(sp.Child("seLinuxChangePolicy"), sc.SELinuxChangePolicy != nil)
	}
	forbid(p.Child("hostUsers"), spec.HostUsers != nil)
	forbid(p.Child("hostPID"), spec.HostPID)
	forbid(p.Child("hostIPC"), spec.HostIPC)
	forbid(p.Child("shareProcessNamespace"), spec.ShareProcessNamespace != nil)
	visitContainers(p, spec, func(cp *field.Path, sc *corev1.SecurityContext) {
		if sc == nil {
			return
		}
		sp := cp.Child("securityContext")
		forbid(sp.Child("appArmorProfile"), sc.AppArmorProfile != nil)
		forbid(sp.Child("seLinuxOptions"), sc.SELinuxOptions != nil)
		forbid(sp.Child("seccompProfile"), sc.SeccompProfile != nil)
		forbid(sp.Child("capabilities"), sc.Capabilities != nil)
		forbid(sp.Child("readOnlyRootFilesystem"), sc.ReadOnlyRootFilesystem != nil)
		forbid(sp.Child("privileged"), sc.Privileged != nil)
		forbid(sp.Child("allowPrivilegeEscalation"), sc.AllowPrivilegeEscalation != nil)
		forbid(sp.Child("procMount"), sc.ProcMount != nil)
		forbid(sp.Child("runAsUser"), sc.RunAsUser != nil)
		forbid(sp.Child("runAsGroup"), sc.RunAsGroup != nil)
	})
	return errs
}

// stopSignal is the API server's validateStopSignal: the pod must say its
// OS, whose signals it may give.
func stopSignal(p *field.Path, sig corev1.Signal, os *corev1.PodOS) field.ErrorList {
	switch {
	case os == nil || os.Name == "":
		return field.ErrorList{field.Forbidden(p,
			fmt.Sprintf("stopSignal %s needs the pod's operating system: set spec.os.name: linux", sig))}
	case os.Name == corev1.Windows && !slices.Contains(windowsStopSignals, sig):
		return field.ErrorList{field.NotSupported(p, sig, windowsStopSignals)}
	case os.Name == corev1.Linux && !slices.Contains(stopSignals, sig):
		return field.ErrorList{field.NotSupported(p, sig, stopSignals)}
	}
	return nil
}
