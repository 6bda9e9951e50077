package validation

import (
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

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
			pv.add(DNS1123Label(vp.Child("name"), vol.Name)...)
		}
		names[vol.Name] = true

		// convert.Default made a volume without a source an emptyDir, as
		// the API server does; more than one is an error.
		var sources []string
		if s := vol.EmptyDir; s != nil {
			sources = append(sources, "emptyDir")
			pv.emptyDir(vp.Child("emptyDir"), s)
		}
		if s := vol.HostPath; s != nil {
			sources = append(sources, "hostPath")
			pv.hostPath(vp.Child("hostPath"), s)
		}
		if s := vol.ConfigMap; s != nil {
			sources = append(sources, "configMap")
			pv.configMapVolume(vp.Child("configMap"), namespace, s)
		}
		if s := vol.Secret; s != nil {
			sources = append(sources, "secret")
			pv.secretVolume(vp.Child("secret"), namespace, s)
		}
		if s := vol.DownwardAPI; s != nil {
			sources = append(sources, "downwardAPI")
			dp := vp.Child("downwardAPI")
			if s.DefaultMode != nil {
				pv.add(fileMode(dp.Child("defaultMode"), *s.DefaultMode)...)
			}
			pv.downwardAPIFiles(dp.Child("items"), s.Items, map[string]bool{})
		}
		if s := vol.Projected; s != nil {
			sources = append(sources, "projected")
			pv.projected(vp.Child("projected"), namespace, s)
		}
		if s := vol.PersistentVolumeClaim; s != nil {
			sources = append(sources, "persistentVolumeClaim")
			cp := vp.Child("persistentVolumeClaim", "claimName")
			if s.ClaimName == "" {
				pv.add(field.Required(cp, "the name of the node-local volume"))
			} else {
				pv.add(DNS1123Subdomain(cp, s.ClaimName)...)
			}
		}
		if s := vol.Image; s != nil {
			sources = append(sources, "image")
			if pv.imageVolumes == nil {
				pv.imageVolumes = map[string]bool{}
			}
			pv.imageVolumes[vol.Name] = true
			ip := vp.Child("image")
			if s.Reference == "" {
				pv.add(field.Required(ip.Child("reference"), ""))
			}
			if !slices.Contains(pullPolicies, s.PullPolicy) {
				pv.add(field.NotSupported(ip.Child("pullPolicy"), s.PullPolicy, pullPolicies))
			}
		}
		for _, extra := range sources[min(1, len(sources)):] {
			pv.add(field.Forbidden(vp.Child(extra), "may not specify more than 1 volume source"))
		}
	}
	return names
}

func (pv *podValidator) emptyDir(p *field.Path, s *corev1.EmptyDirVolumeSource) {
	if !slices.Contains(storageMedia, s.Medium) {
		pv.add(field.NotSupported(p.Child("medium"), s.Medium, storageMedia))
	}
	if s.SizeLimit != nil && s.SizeLimit.Sign() < 0 {
		pv.add(field.Invalid(p.Child("sizeLimit"), s.SizeLimit.String(), "must be greater than or equal to 0"))
	}
}

func (pv *podValidator) hostPath(p *field.Path, s *corev1.HostPathVolumeSource) {
	switch {
	case s.Path == "":
		pv.add(field.Required(p.Child("path"), ""))
	case !path.IsAbs(s.Path):
		pv.add(field.Invalid(p.Child("path"), s.Path, "must be an absolute path"))
	case hasDotDot(s.Path):
		pv.add(field.Invalid(p.Child("path"), s.Path, "must not contain '..'"))
	default:
		pv.add(pathBytes(p.Child("path"), s.Path)...)
	}
	if s.Type != nil && !slices.Contains(hostPathTypes, *s.Type) {
		pv.add(field.NotSupported(p.Child("type"), *s.Type, hostPathTypes))
	}
}

func (pv *podValidator) configMapVolume(p *field.Path, namespace string, s *corev1.ConfigMapVolumeSource) {
	optional := s.Optional != nil && *s.Optional
	var data func(string) bool
	if s.Name == "" {
		pv.add(field.Required(p.Child("name"), ""))
	} else if cm, ok := pv.objs.configMap(namespace, s.Name); ok {
		data = func(k string) bool {
			_, inData := cm.Data[k]
			_, inBinary := cm.BinaryData[k]
			return inData || inBinary
		}
	} else if !optional && !pv.skipRefs {
		pv.add(notFound(p.Child("name"), s.Name, notInRequest("ConfigMap", namespace)))
	}
	pv.keyToPaths(p, s.Items, s.DefaultMode, data, optional)
}

func (pv *podValidator) secretVolume(p *field.Path, namespace string, s *corev1.SecretVolumeSource) {
	optional := s.Optional != nil && *s.Optional
	var data func(string) bool
	if s.SecretName == "" {
		pv.add(field.Required(p.Child("secretName"), ""))
	} else if sec, ok := pv.objs.secret(namespace, s.SecretName); ok {
		data = func(k string) bool { _, ok := sec.Data[k]; return ok }
	} else if !optional && !pv.skipRefs {
		pv.add(notFound(p.Child("secretName"), s.SecretName, notInRequest("Secret", namespace)))
	}
	pv.keyToPaths(p, s.Items, s.DefaultMode, data, optional)
}

// keyToPaths validates the items of a configMap or secret volume. has
// reports whether the referenced object holds a key; it is nil when the
// object is not among the Options' Objects.
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
		pv.add(volumeFilePath(ip.Child("path"), it.Path)...)
		if it.Mode != nil {
			pv.add(fileMode(ip.Child("mode"), *it.Mode)...)
		}
	}
}

func (pv *podValidator) volumeMounts(p *field.Path, c *corev1.Container, volumes map[string]bool) {
	mounts := c.VolumeMounts
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
		if m.SubPathExpr != "" {
			if m.SubPath != "" {
				pv.add(field.Invalid(mp.Child("subPathExpr"), m.SubPathExpr, "subPathExpr and subPath are mutually exclusive: keep one of them"))
			}
			// Checked again once expanded (engine/criconfig).
			pv.add(relativePath(mp.Child("subPathExpr"), m.SubPathExpr, false)...)
		}
		pv.add(mountPropagation(mp.Child("mountPropagation"), m.MountPropagation, c)...)
		if pv.imageVolumes[m.Name] {
			for _, sp := range []struct{ field, v string }{{"subPath", m.SubPath}, {"subPathExpr", m.SubPathExpr}} {
				if sp.v != "" {
					pv.add(field.Forbidden(mp.Child(sp.field), "a subPath of an image volume is not supported by podsync; mount the whole image volume and use the path below its mount point"))
				}
			}
		}
	}
}

// mountPropagation is the API server's validateMountPropagation: None,
// HostToContainer, or Bidirectional in a privileged container.
func mountPropagation(p *field.Path, mode *corev1.MountPropagationMode, c *corev1.Container) field.ErrorList {
	if mode == nil {
		return nil
	}
	if !slices.Contains(mountPropagations, *mode) {
		return field.ErrorList{field.NotSupported(p, *mode, mountPropagations)}
	}
	privileged := c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged
	if *mode == corev1.MountPropagationBidirectional && !privileged {
		return field.ErrorList{field.Forbidden(p,
			"Bidirectional mount propagation is available only to privileged containers: set securityContext.privileged: true, or use HostToContainer")}
	}
	return nil
}

// volumeFilePath accepts the path of a file in a volume of files: a
// relative path without "..", not starting with ".." (the API server's
// validateLocalNonReservedPath: the atomic writer's own names).
func volumeFilePath(p *field.Path, v string) field.ErrorList {
	if errs := relativePath(p, v, true); len(errs) > 0 {
		return errs
	}
	if strings.HasPrefix(v, "..") {
		return field.ErrorList{field.Invalid(p, v, "must not start with '..': the volume's own links and directories have such names")}
	}
	return nil
}

// projected validates a projected volume: each source one of configMap,
// secret and downwardAPI, no two files at the same path.
func (pv *podValidator) projected(p *field.Path, namespace string, s *corev1.ProjectedVolumeSource) {
	if s.DefaultMode != nil {
		pv.add(fileMode(p.Child("defaultMode"), *s.DefaultMode)...)
	}
	paths := map[string]bool{}
	for i, src := range s.Sources {
		sp := p.Child("sources").Index(i)
		var set []string
		if c := src.ConfigMap; c != nil {
			set = append(set, "configMap")
			pv.configMapVolume(sp.Child("configMap"), namespace, &corev1.ConfigMapVolumeSource{LocalObjectReference: c.LocalObjectReference, Items: c.Items, Optional: c.Optional})
			pv.uniquePaths(sp.Child("configMap", "items"), c.Items, paths)
		}
		if c := src.Secret; c != nil {
			set = append(set, "secret")
			sec := &corev1.SecretVolumeSource{SecretName: c.Name, Items: c.Items, Optional: c.Optional}
			before := len(pv.errs)
			pv.secretVolume(sp.Child("secret"), namespace, sec)
			// The projection's field is name, not secretName.
			for _, e := range pv.errs[before:] {
				e.Field = strings.Replace(e.Field, sp.Child("secret", "secretName").String(), sp.Child("secret", "name").String(), 1)
			}
			pv.uniquePaths(sp.Child("secret", "items"), c.Items, paths)
		}
		if c := src.DownwardAPI; c != nil {
			set = append(set, "downwardAPI")
			pv.downwardAPIFiles(sp.Child("downwardAPI", "items"), c.Items, paths)
		}
		for _, refused := range []struct {
			name string
			set  bool
		}{{"serviceAccountToken", src.ServiceAccountToken != nil}, {"clusterTrustBundle", src.ClusterTrustBundle != nil}, {"podCertificate", src.PodCertificate != nil}} {
			if refused.set {
				set = append(set, refused.name)
				pv.add(field.Forbidden(sp.Child(refused.name), NoTokensReason))
			}
		}
		switch len(set) {
		case 0:
			pv.add(field.Required(sp, "must specify one of: configMap, secret or downwardAPI"))
		case 1:
		default:
			for _, extra := range set[1:] {
				pv.add(field.Forbidden(sp.Child(extra), "may not specify more than 1 volume type per source"))
			}
		}
	}
}

// NoTokensReason is why a projected serviceAccountToken,
// clusterTrustBundle or podCertificate source is refused.
const NoTokensReason = "a single node has no API server, so it mints no service account tokens, trust bundles or pod certificates; " +
	"mount the credentials from a Secret (a secret source) or remove the source"

func (pv *podValidator) uniquePaths(p *field.Path, items []corev1.KeyToPath, paths map[string]bool) {
	for i, it := range items {
		clean := path.Clean(it.Path)
		if paths[clean] {
			pv.add(field.Invalid(p.Index(i).Child("path"), it.Path, "conflicting duplicate paths"))
		}
		paths[clean] = true
	}
}

// downwardAPIFiles validates the files of a downwardAPI volume or
// projection; paths collects their paths across a projected volume.
func (pv *podValidator) downwardAPIFiles(p *field.Path, items []corev1.DownwardAPIVolumeFile, paths map[string]bool) {
	for i, it := range items {
		ip := p.Index(i)
		pv.add(volumeFilePath(ip.Child("path"), it.Path)...)
		if clean := path.Clean(it.Path); it.Path != "" && paths[clean] {
			pv.add(field.Invalid(ip.Child("path"), it.Path, "conflicting duplicate paths"))
		} else {
			paths[clean] = true
		}
		if it.Mode != nil {
			pv.add(fileMode(ip.Child("mode"), *it.Mode)...)
		}
		switch {
		case it.FieldRef != nil && it.ResourceFieldRef != nil:
			pv.add(field.Invalid(ip, "resource", "fieldRef and resourceFieldRef can not be specified simultaneously"))
		case it.FieldRef != nil:
			pv.fieldRef(ip.Child("fieldRef"), it.FieldRef, volumeFieldPaths)
		case it.ResourceFieldRef != nil:
			pv.resourceFieldRef(ip.Child("resourceFieldRef"), it.ResourceFieldRef, true)
		default:
			pv.add(field.Required(ip, "one of fieldRef and resourceFieldRef is required"))
		}
	}
}

// volumeFieldPaths are the fields a downwardAPI volume file may hold,
// besides metadata.labels['key'] and metadata.annotations['key'].
var volumeFieldPaths = []string{"metadata.name", "metadata.namespace", "metadata.uid", "metadata.labels", "metadata.annotations"}
