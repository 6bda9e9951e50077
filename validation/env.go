package validation

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

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
			pv.add(invalid(vp.Child("name"), e.Name, validation.IsRelaxedEnvVarName(e.Name))...)
		}
		if e.ValueFrom == nil {
			continue
		}
		fp := vp.Child("valueFrom")
		if e.Value != "" {
			pv.add(field.Invalid(fp, "", "may not be specified when value is not empty"))
		}
		pv.envVarSource(fp, namespace, e.ValueFrom)
	}
	for i, src := range c.EnvFrom {
		pv.envFrom(p.Child("envFrom").Index(i), namespace, src)
	}
}

// envVarSource validates an env var's valueFrom at p: one of fieldRef,
// configMapKeyRef and secretKeyRef.
func (pv *podValidator) envVarSource(p *field.Path, namespace string, from *corev1.EnvVarSource) {
	var set []string
	if r := from.FieldRef; r != nil {
		set = append(set, "fieldRef")
		pv.fieldRef(p.Child("fieldRef"), r, envFieldPaths)
	}
	if r := from.ResourceFieldRef; r != nil {
		set = append(set, "resourceFieldRef")
		pv.resourceFieldRef(p.Child("resourceFieldRef"), r, false)
	}
	if r := from.ConfigMapKeyRef; r != nil {
		set = append(set, "configMapKeyRef")
		rp := p.Child("configMapKeyRef")
		optional := r.Optional != nil && *r.Optional
		var cm *corev1.ConfigMap
		if r.Name != "" {
			cm, _ = pv.objs.configMap(namespace, r.Name)
		}
		pv.keyRef(rp, "ConfigMap", namespace, r.Name, r.Key, optional, cm != nil, func(k string) bool {
			// The kubelet reads env values from data only.
			_, ok := cm.Data[k]
			return ok
		})
	}
	if r := from.SecretKeyRef; r != nil {
		set = append(set, "secretKeyRef")
		rp := p.Child("secretKeyRef")
		optional := r.Optional != nil && *r.Optional
		var sec *corev1.Secret
		if r.Name != "" {
			sec, _ = pv.objs.secret(namespace, r.Name)
		}
		pv.keyRef(rp, "Secret", namespace, r.Name, r.Key, optional, sec != nil, func(k string) bool {
			_, ok := sec.Data[k]
			return ok
		})
	}
	switch len(set) {
	case 0:
		pv.add(field.Required(p, "must specify one of: fieldRef, resourceFieldRef, configMapKeyRef or secretKeyRef"))
	case 1:
	default:
		for _, extra := range set[1:] {
			pv.add(field.Forbidden(p.Child(extra), "may not have more than one field specified at a time"))
		}
	}
}

// envFrom validates one of a container's envFrom sources at p.
func (pv *podValidator) envFrom(p *field.Path, namespace string, src corev1.EnvFromSource) {
	if src.Prefix != "" {
		pv.add(invalid(p.Child("prefix"), src.Prefix, validation.IsRelaxedEnvVarName(src.Prefix))...)
	}
	var set []string
	if r := src.ConfigMapRef; r != nil {
		set = append(set, "configMapRef")
		rp := p.Child("configMapRef", "name")
		_, found := pv.objs.configMap(namespace, r.Name)
		pv.objectRef(rp, "ConfigMap", namespace, r.Name, r.Optional != nil && *r.Optional, found)
	}
	if r := src.SecretRef; r != nil {
		set = append(set, "secretRef")
		rp := p.Child("secretRef", "name")
		_, found := pv.objs.secret(namespace, r.Name)
		pv.objectRef(rp, "Secret", namespace, r.Name, r.Optional != nil && *r.Optional, found)
	}
	switch len(set) {
	case 0:
		pv.add(field.Required(p, "must specify one of: configMapRef or secretRef"))
	case 1:
	default:
		pv.add(field.Forbidden(p.Child(set[1]), "may not have more than one field specified at a time"))
	}
}

// objectRef validates a reference by name to a ConfigMap or Secret at p
// (the name field): it must be among the Options' Objects unless
// optional.
func (pv *podValidator) objectRef(p *field.Path, kind, namespace, name string, optional, found bool) {
	switch {
	case name == "":
		pv.add(field.Required(p, ""))
	case len(validation.IsDNS1123Subdomain(name)) > 0:
		pv.add(DNS1123Subdomain(p, name)...)
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

func (pv *podValidator) fieldRef(p *field.Path, r *corev1.ObjectFieldSelector, allowed []string) {
	if r.APIVersion != "v1" {
		pv.add(field.NotSupported(p.Child("apiVersion"), r.APIVersion, []string{"v1"}))
	}
	fp := p.Child("fieldPath")
	switch {
	case r.FieldPath == "":
		pv.add(field.Required(fp, ""))
		return
	case slices.Contains(allowed, r.FieldPath):
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
	supported := append(slices.Clone(allowed), "metadata.labels['<key>']", "metadata.annotations['<key>']")
	pv.add(field.NotSupported(fp, r.FieldPath, supported))
}

var (
	// resourceFieldResources are what a resourceFieldRef may select,
	// besides limits.hugepages-<size> and requests.hugepages-<size>.
	resourceFieldResources = []string{"limits.cpu", "limits.memory", "limits.ephemeral-storage", "requests.cpu", "requests.memory", "requests.ephemeral-storage"}
	cpuDivisors            = []string{"1m", "1"}
	byteDivisors           = []string{"1", "1k", "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei"}
)

// resourceFieldRef validates a resourceFieldRef of env or of a
// downwardAPI file (inVolume: the container must be named), as the API
// server's validateContainerResourceFieldSelector: a supported resource,
// a container of the pod, a divisor of the resource's units.
func (pv *podValidator) resourceFieldRef(p *field.Path, r *corev1.ResourceFieldSelector, inVolume bool) {
	switch {
	case r.ContainerName == "" && inVolume:
		pv.add(field.Required(p.Child("containerName"), "a downwardAPI file must name the container whose resources it shows"))
	case r.ContainerName != "" && !pv.containerNames[r.ContainerName]:
		pv.add(notFound(p.Child("containerName"), r.ContainerName, "no container or init container of the pod has this name"))
	}
	hugepages := strings.HasPrefix(r.Resource, "limits.hugepages-") || strings.HasPrefix(r.Resource, "requests.hugepages-")
	switch {
	case r.Resource == "":
		pv.add(field.Required(p.Child("resource"), ""))
		return
	case !hugepages && !slices.Contains(resourceFieldResources, r.Resource):
		pv.add(field.NotSupported(p.Child("resource"), r.Resource, append(slices.Clone(resourceFieldResources), "limits.hugepages-<size>", "requests.hugepages-<size>")))
		return
	}
	if r.Divisor.IsZero() {
		return
	}
	divisors := byteDivisors
	if strings.HasSuffix(r.Resource, ".cpu") {
		divisors = cpuDivisors
	}
	if d := r.Divisor.String(); !slices.Contains(divisors, d) {
		pv.add(field.NotSupported(p.Child("divisor"), d, divisors))
	}
}
