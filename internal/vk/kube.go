package vk

import (
	"context"
	"encoding/json"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/podsync/podsync/internal/vk/provider"
)

// kubePods finishes the node's deleted pods on the API server
// (provider.Kube), as the kubelet's status manager does once a deleted
// pod's containers have stopped: the last status, then the object's
// deletion with grace period 0 and the pod's UID as precondition, so that
// a pod re-created under the same name is not touched.
type kubePods struct{ kc kubernetes.Interface }

var (
	_ provider.Kube        = kubePods{}
	_ provider.TokenIssuer = kubePods{}
)

// CreateToken mints a token with the TokenRequest API, as the kubelet's
// token manager: podsync-vk's identity needs create on
// serviceaccounts/token.
func (k kubePods) CreateToken(ctx context.Context, namespace, serviceAccount string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	return k.kc.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, serviceAccount, req, metav1.CreateOptions{})
}

func (k kubePods) FinishDeleted(ctx context.Context, pod *corev1.Pod, status *corev1.PodStatus) error {
	pods := k.kc.CoreV1().Pods(pod.Namespace)
	// A merge patch of the status subresource, with the UID as a
	// precondition of the patch itself.
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pod.UID},
		"status":   status,
	})
	if err != nil {
		return fmt.Errorf("status patch: %w", err)
	}
	if _, err := pods.Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("report the last status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	err = pods.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64), Preconditions: metav1.NewUIDPreconditions(string(pod.UID))})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}
