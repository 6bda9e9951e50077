package provider

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"google.golang.org/protobuf/testing/protocmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// fakeIssuer mints tokens "token-1", "token-2", … that expire after the
// requested seconds on its clock.
type fakeIssuer struct {
	mu    sync.Mutex
	clock *clocktesting.FakeClock
	reqs  []*authenticationv1.TokenRequest
	sas   []string
}

func (f *fakeIssuer) CreateToken(_ context.Context, namespace, sa string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, req.DeepCopy())
	f.sas = append(f.sas, namespace+"/"+sa)
	out := req.DeepCopy()
	out.Status.Token = fmt.Sprintf("token-%d", len(f.reqs))
	out.Status.ExpirationTimestamp = metav1.NewTime(f.clock.Now().Add(time.Duration(*req.Spec.ExpirationSeconds) * time.Second))
	return out, nil
}

// kubeAPIAccessPod is a pod as the ServiceAccount admission plugin leaves
// it: the kube-api-access volume mounted in its container.
func kubeAPIAccessPod() *corev1.Pod {
	pod := testPod("1")
	pod.Spec.ServiceAccountName = "builder"
	pod.Spec.Volumes = []corev1.Volume{{Name: "kube-api-access-x7k2p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: new(int32(0o644)),
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: new(int64(3607)), Path: "token"}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
				FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		}}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "kube-api-access-x7k2p", ReadOnly: true,
		MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}}
	return pod
}

func pushedTokens(f *fakePodsync) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, req := range f.applied {
		for _, s := range req.GetSecrets() {
			out = append(out, s.GetMetadata().GetName()+"="+string(s.GetData()[TokenKey]))
		}
	}
	return out
}

func TestServiceAccountTokensAreMintedBoundAndRotated(t *testing.T) {
	f := newFake()
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC))
	issuer := &fakeIssuer{clock: clk}
	p := New("vk-1", f, zap.NewNop())
	p.UseTokens(issuer)
	p.tokens.clock = clk
	pod := kubeAPIAccessPod()
	if err := p.CreatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	secret := "podsync-token-" + uid1 + "-0-0"
	if diff := cmp.Diff([]string{secret + "=token-1"}, pushedTokens(f)); diff != "" {
		t.Fatalf("tokens pushed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(f.calls, []string{"ApplyObjects", "SyncPod"}); diff != "" {
		t.Errorf("calls (-want +got): the token must be on podsyncd before the pod\n%s", diff)
	}
	req := issuer.reqs[0].Spec
	if issuer.sas[0] != "default/builder" || *req.ExpirationSeconds != 3607 || len(req.Audiences) != 0 ||
		req.BoundObjectRef == nil || req.BoundObjectRef.Kind != "Pod" || req.BoundObjectRef.Name != "web" || req.BoundObjectRef.UID != uid1 {
		t.Errorf("token request for %s = %+v (bound %+v), want the pod's service account, 3607s, the API server's audience, bound to the pod",
			issuer.sas[0], req, req.BoundObjectRef)
	}
	// The volume keeps its three sources, the token's now the Secret's.
	vol := f.synced[0].GetPod().GetSpec().GetVolumes()
	if len(vol) != 1 {
		t.Fatalf("volumes sent = %v, want the kube-api-access volume kept", vol)
	}
	srcs := vol[0].GetProjected().GetSources()
	if len(srcs) != 3 || srcs[0].GetSecret().GetName() != secret || srcs[0].GetSecret().GetItems()[0].GetKey() != TokenKey ||
		srcs[0].GetSecret().GetItems()[0].GetPath() != "token" || srcs[1].GetConfigMap().GetName() != "kube-root-ca.crt" {
		t.Errorf("projected sources sent = %v", srcs)
	}

	// Re-applied (a label change, podsync-vk restarted): the same spec,
	// no new token.
	if err := p.UpdatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if len(issuer.reqs) != 1 {
		t.Errorf("token requests after a re-apply = %d, want 1", len(issuer.reqs))
	}
	if diff := cmp.Diff(f.synced[0].GetPod().GetSpec(), f.synced[1].GetPod().GetSpec(), protocmp.Transform()); diff != "" {
		t.Errorf("the spec sent changed on a re-apply (-first +second):\n%s", diff)
	}

	// Half its life: not due. Past 80 %: renewed and pushed.
	clk.Step(1800 * time.Second)
	p.rotateDue(context.Background())
	if len(issuer.reqs) != 1 {
		t.Errorf("token renewed at half its life")
	}
	clk.Step(1100 * time.Second) // 2900 s of 3607
	p.rotateDue(context.Background())
	if len(issuer.reqs) != 2 {
		t.Fatalf("token requests past 80 %% of its life = %d, want 2", len(issuer.reqs))
	}
	got := pushedTokens(f)
	if got[len(got)-1] != secret+"=token-2" {
		t.Errorf("last token pushed = %q, want the renewed one", got[len(got)-1])
	}

	if err := p.DeletePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"OBJECT_KIND_SECRET default/" + secret}, f.objDeleted); diff != "" {
		t.Errorf("objects deleted with the pod (-want +got):\n%s", diff)
	}
	clk.Step(24 * time.Hour)
	p.rotateDue(context.Background())
	if len(issuer.reqs) != 2 {
		t.Error("a deleted pod's token was renewed")
	}
}

func TestWithoutTokensTheKubeAPIAccessVolumeIsLeftOut(t *testing.T) {
	f := newFake()
	p := New("vk-1", f, zap.NewNop())
	if err := p.CreatePod(context.Background(), kubeAPIAccessPod()); err != nil {
		t.Fatal(err)
	}
	if vol := f.synced[0].GetPod().GetSpec().GetVolumes(); len(vol) != 0 {
		t.Errorf("volumes sent = %v, want the kube-api-access volume left out", vol)
	}
}
