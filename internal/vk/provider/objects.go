package provider

import (
	"context"
	"fmt"
	"slices"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/convert"
)

// Objects reads the ConfigMaps and Secrets of the API server, as
// client-go's listers do; a missing one is a NotFound error.
type Objects interface {
	ConfigMap(namespace, name string) (*corev1.ConfigMap, error)
	Secret(namespace, name string) (*corev1.Secret, error)
}

// UseObjects makes the provider push the ConfigMaps and Secrets each pod
// references to podsyncd before the pod; call it before the first pod.
// If o is also an ObjectUser, the provider tells it which objects each
// pod references, before it reads them.
func (p *Provider) UseObjects(o Objects) { p.objects = o }

// ObjectUser is an optional capability of Objects: it reads only the
// objects the node's pods reference, and is told which those are, as the
// kubelet's secret and configmap managers register each pod's.
type ObjectUser interface {
	// Use sets the ConfigMaps and Secrets (of namespace) the pod (its
	// namespace/name) references, replacing what it used before.
	Use(pod, namespace string, configMaps, secrets []string)
	// Release forgets the pod's references.
	Release(pod string)
}

// useObjects registers the objects pod references with an ObjectUser.
func (p *Provider) useObjects(pod *corev1.Pod) {
	if u, ok := p.objects.(ObjectUser); ok {
		cms, secrets := references(pod)
		u.Use(key(pod.Namespace, pod.Name), pod.Namespace, cms, secrets)
	}
}

// releaseObjects forgets what the pod (namespace/name) referenced.
func (p *Provider) releaseObjects(pod string) {
	if u, ok := p.objects.(ObjectUser); ok {
		u.Release(pod)
	}
}

// references are the names of the ConfigMaps and Secrets a pod uses:
// volumes (also projected), env, envFrom and imagePullSecrets, as the
// kubelet's podutil.VisitPodConfigmapNames and VisitPodSecretNames find
// them.
func references(pod *corev1.Pod) (configMaps, secrets []string) {
	add := func(to *[]string, name string) {
		if name != "" && !slices.Contains(*to, name) {
			*to = append(*to, name)
		}
	}
	for _, ref := range pod.Spec.ImagePullSecrets {
		add(&secrets, ref.Name)
	}
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			add(&configMaps, v.ConfigMap.Name)
		case v.Secret != nil:
			add(&secrets, v.Secret.SecretName)
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil {
					add(&configMaps, s.ConfigMap.Name)
				}
				if s.Secret != nil {
					add(&secrets, s.Secret.Name)
				}
			}
		}
	}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			for _, e := range c.EnvFrom {
				if e.ConfigMapRef != nil {
					add(&configMaps, e.ConfigMapRef.Name)
				}
				if e.SecretRef != nil {
					add(&secrets, e.SecretRef.Name)
				}
			}
			for _, e := range c.Env {
				if e.ValueFrom == nil {
					continue
				}
				if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
					add(&configMaps, r.Name)
				}
				if r := e.ValueFrom.SecretKeyRef; r != nil {
					add(&secrets, r.Name)
				}
			}
		}
	}
	return configMaps, secrets
}

// objectMeta is the metadata podsyncd stores for an API server object:
// no resourceVersion (podsyncd's is its own, and the API server's would
// be a precondition), uid or managed fields, and the owner label.
func (p *Provider) objectMeta(in metav1.ObjectMeta) metav1.ObjectMeta {
	labels := map[string]string{}
	for k, v := range in.Labels {
		labels[k] = v
	}
	labels[OwnerLabel] = p.node
	return metav1.ObjectMeta{Namespace: in.Namespace, Name: in.Name, Labels: labels}
}

// objectsRequest is the ApplyObjects of the named objects of namespace
// the API server has; those it has not yet are left out (the pod waits
// for them on podsyncd, and they are pushed once they appear).
func (p *Provider) objectsRequest(namespace string, configMaps, secrets []string) (*podsyncv1.ApplyObjectsRequest, error) {
	req := &podsyncv1.ApplyObjectsRequest{}
	for _, name := range configMaps {
		cm, err := p.objects.ConfigMap(namespace, name)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("configmap %s/%s: %w", namespace, name, err)
		}
		out := &corev1.ConfigMap{ObjectMeta: p.objectMeta(cm.ObjectMeta), Data: cm.Data, BinaryData: cm.BinaryData, Immutable: cm.Immutable}
		convert.DefaultConfigMap(out)
		pc, err := convert.ConfigMapToProto(out)
		if err != nil {
			return nil, fmt.Errorf("configmap %s/%s: %w", namespace, name, err)
		}
		req.ConfigMaps = append(req.ConfigMaps, pc)
	}
	for _, name := range secrets {
		s, err := p.objects.Secret(namespace, name)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("secret %s/%s: %w", namespace, name, err)
		}
		out := &corev1.Secret{ObjectMeta: p.objectMeta(s.ObjectMeta), Data: s.Data, Type: s.Type, Immutable: s.Immutable}
		convert.DefaultSecret(out)
		ps, err := convert.SecretToProto(out)
		if err != nil {
			return nil, fmt.Errorf("secret %s/%s: %w", namespace, name, err)
		}
		req.Secrets = append(req.Secrets, ps)
	}
	return req, nil
}

// referencedObjects are the objects pod references that the API server
// has, as podsyncd stores them; empty without Objects.
func (p *Provider) referencedObjects(pod *corev1.Pod) (*podsyncv1.ApplyObjectsRequest, error) {
	if p.objects == nil {
		return &podsyncv1.ApplyObjectsRequest{}, nil
	}
	p.useObjects(pod)
	cms, secrets := references(pod)
	if len(cms)+len(secrets) == 0 {
		return &podsyncv1.ApplyObjectsRequest{}, nil
	}
	req, err := p.objectsRequest(pod.Namespace, cms, secrets)
	if err != nil {
		return nil, fmt.Errorf("the objects of pod %s: %w", key(pod.Namespace, pod.Name), err)
	}
	return req, nil
}

// usedLocked says whether a pod of this node uses the ConfigMap (secret
// false) or Secret namespace/name. The caller holds p.mu.
func (p *Provider) usedLocked(secret bool, namespace, name string) bool {
	for _, pod := range p.pods {
		if pod.Namespace != namespace {
			continue
		}
		cms, secrets := references(pod)
		if (!secret && slices.Contains(cms, name)) || (secret && slices.Contains(secrets, name)) {
			return true
		}
	}
	return false
}

// ObjectDeleted deletes on podsyncd a ConfigMap (secret false) or Secret
// the API server deleted, when a pod of this node uses it: as the
// kubelet's volumes, an optional one's files then leave the pod's
// volumes, and a required one stops the pod's new containers
// (CreateContainerConfigError) until it is back. It is the informers'
// delete handler.
func (p *Provider) ObjectDeleted(ctx context.Context, secret bool, namespace, name string) {
	if p.objects == nil {
		return
	}
	p.mu.Lock()
	used := p.usedLocked(secret, namespace, name)
	p.mu.Unlock()
	if !used {
		return
	}
	kind, k := podsyncv1.ObjectKind_OBJECT_KIND_CONFIG_MAP, "configmap"
	if secret {
		kind, k = podsyncv1.ObjectKind_OBJECT_KIND_SECRET, "secret"
	}
	if _, err := p.ps.DeleteObject(ctx, &podsyncv1.DeleteObjectRequest{Kind: kind, Namespace: namespace, Name: name}); err != nil {
		p.log.Warn("could not delete an object on podsync", zap.String("kind", k), zap.String("object", key(namespace, name)), zap.Error(err))
	}
}

// ObjectChanged pushes a ConfigMap (secret false) or Secret the API
// server added or changed to podsyncd when a pod of this node uses it,
// so that podsyncd rewrites the pod's files as a kubelet does. It is the
// informers' add and update handler.
func (p *Provider) ObjectChanged(ctx context.Context, secret bool, namespace, name string) {
	if p.objects == nil {
		return
	}
	p.mu.Lock()
	used := p.usedLocked(secret, namespace, name)
	p.mu.Unlock()
	if !used {
		return
	}
	var cms, secrets []string
	kind := "configmap"
	if secret {
		secrets, kind = []string{name}, "secret"
	} else {
		cms = []string{name}
	}
	req, err := p.objectsRequest(namespace, cms, secrets)
	if err == nil && len(req.GetConfigMaps())+len(req.GetSecrets()) > 0 {
		_, err = p.ps.ApplyObjects(ctx, req)
	}
	if err != nil {
		p.log.Warn("could not push a changed object to podsync", zap.String("kind", kind), zap.String("object", key(namespace, name)), zap.Error(err))
	}
}
