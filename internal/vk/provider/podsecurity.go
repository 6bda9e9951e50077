package provider

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	psapi "k8s.io/pod-security-admission/api"

	"github.com/podsync/podsync/client"
	"github.com/podsync/podsync/validation"
)

// UseNamespaceLevels makes the provider ask podsyncd to enforce each
// pod's namespace's Pod Security level (the pod-security.kubernetes.io/
// enforce label fn returns, "" for none), as the API server enforces it:
// podsyncd then checks the pod at the stricter of that level and its own,
// which stays the operator's ceiling. A pod keeps the level it was first
// applied with, as a running pod keeps the admission it had when its
// namespace's label changes. Call it before the first pod.
func (p *Provider) UseNamespaceLevels(fn func(namespace string) string) { p.nsLevel = fn }

// podLevel returns the Pod Security level pod is applied with: the one
// podsyncd already holds for this incarnation (a re-apply, also after a
// restart of podsync-vk), else its namespace's now. "" is none.
func (p *Provider) podLevel(ctx context.Context, pod *corev1.Pod) (string, error) {
	if p.nsLevel == nil {
		return "", nil
	}
	p.mu.Lock()
	level, ok := p.levels[pod.UID]
	p.mu.Unlock()
	if ok {
		return level, nil
	}
	got, err := p.ps.GetPod(ctx, pod.Namespace, pod.Name)
	switch {
	case err == nil && types.UID(got.GetPod().GetMetadata().GetUid()) == pod.UID:
		level = got.GetPod().GetMetadata().GetAnnotations()[validation.AnnotationPodSecurity]
	case err == nil || errors.Is(err, client.ErrNotFound):
		level = namespaceLevel(p.nsLevel(pod.Namespace))
	default:
		return "", fmt.Errorf("read pod %s on podsync: %w", key(pod.Namespace, pod.Name), err)
	}
	p.mu.Lock()
	p.levels[pod.UID] = level
	p.mu.Unlock()
	return level, nil
}

// namespaceLevel is the level of a namespace's enforce label: a valid
// level, else none (the API server's default, privileged, which is no
// narrowing of the node's).
func namespaceLevel(label string) string {
	l, err := psapi.ParseLevel(label)
	if err != nil || l == psapi.LevelPrivileged {
		return ""
	}
	return string(l)
}
