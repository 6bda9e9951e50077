package vk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

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

// kubeClient is the API server client of cfg: its kubeconfig (then
// $KUBECONFIG, then in-cluster, as the node library's ClientsetFromEnv),
// with cfg's rate limit per node times the nodes served.
func kubeClient(cfg Config) (*kubernetes.Clientset, error) {
	rc, err := restConfig(cfg.Kubeconfig)
	if err != nil {
		return nil, err
	}
	rc.QPS, rc.Burst = clientLimits(cfg)
	setContentType(rc, cfg.KubeAPIContentType)
	return kubernetes.NewForConfig(rc)
}

// setContentType sets rc's request content type, as the kubelet's
// setContentTypeForClient: with protobuf, responses are accepted in
// protobuf, then JSON (for the kinds that have no protobuf encoding);
// with any other type, client-go's defaults.
func setContentType(rc *rest.Config, contentType string) {
	if contentType == "" {
		contentType = DefaultKubeAPIContentType
	}
	rc.ContentType = contentType
	if contentType == runtime.ContentTypeProtobuf {
		rc.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	}
}

// clientLimits is the QPS and burst of the client shared by cfg's nodes.
func clientLimits(cfg Config) (float32, int) {
	qps, burst := cfg.KubeAPIQPS, cfg.KubeAPIBurst
	if qps <= 0 {
		qps = DefaultKubeAPIQPS
	}
	if burst <= 0 {
		burst = DefaultKubeAPIBurst
	}
	n := max(len(cfg.Nodes), 1)
	return qps * float32(n), burst * n
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		kubeconfig = os.Getenv("KUBECONFIG")
	}
	if kubeconfig == "" {
		return rest.InClusterConfig()
	}
	if _, err := os.Stat(kubeconfig); errors.Is(err, fs.ErrNotExist) {
		return rest.InClusterConfig()
	} else if err != nil {
		return nil, err
	}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig}, &clientcmd.ConfigOverrides{}).ClientConfig()
}
