package provider

import (
	"context"
	"errors"
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
// requested seconds on its clock, or maxSeconds if fewer, as the API
// server's --service-account-max-token-expiration shortens them; err, if
// set, fails the requests (they are counted all the same).
type fakeIssuer struct {
	mu         sync.Mutex
	clock      *clocktesting.FakeClock
	reqs       []*authenticationv1.TokenRequest
	sas        []string
	maxSeconds int64
	err        error
}

func (f *fakeIssuer) CreateToken(_ context.Context, namespace, sa string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, req.DeepCopy())
	f.sas = append(f.sas, namespace+"/"+sa)
	if f.err != nil {
		return nil, f.err
	}
	out := req.DeepCopy()
	if f.maxSeconds > 0 && *out.Spec.ExpirationSeconds > f.maxSeconds {
		out.Spec.ExpirationSeconds = &f.maxSeconds
	}
	out.Status.Token = fmt.Sprintf("token-%d", len(f.reqs))
	out.Status.ExpirationTimestamp = metav1.NewTime(f.clock.Now().Add(time.Duration(*out.Spec.ExpirationSeconds) * time.Second))
	return out, nil
}

// tokenProvider is a provider on f serving tokens from an issuer on a
// fake clock, with maxAge (0: the kubelet's).
func tokenProvider(f *fakePodsync, maxAge time.Duration) (*Provider, *fakeIssuer, *clocktesting.FakeClock) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC))
	issuer := &fakeIssuer{clock: clk}
	p := New("vk-1", f, zap.NewNop())
	p.UseTokens(issuer, maxAge)
	p.tokens.clock = clk
	return p, issuer, clk
}

// requests is how many tokens were asked of f.
func (f *fakeIssuer) requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.reqs)
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
	p, issuer, clk := tokenProvider(f, 0)
	pod := kubeAPIAccessPod()
	if err := p.CreatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	secret := "podsync-token-" + uid1 + "-0-0"
	if diff := cmp.Diff([]string{secret + "=token-1"}, pushedTokens(f)); diff != "" {
		t.Fatalf("tokens pushed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(f.calls, []string{"SyncPod"}); diff != "" {
		t.Errorf("calls (-want +got): the token must be stored with the pod\n%s", diff)
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

// TestTokenRefreshPoint is the kubelet's requiresRefresh: a token is
// renewed once 80 % of the lifetime granted has passed, or once it is
// older than the maximum age (24 h), each less a jitter of up to 10 s
// (a quarter of the maximum age when that is shorter), and not before.
func TestTokenRefreshPoint(t *testing.T) {
	const jitter = 10 * time.Second
	tests := []struct {
		name    string
		seconds int64         // asked for
		granted int64         // the API server's maximum, 0: none
		maxAge  time.Duration // 0: the kubelet's
		notYet  time.Duration // an age at which it is not due, whatever the jitter
		due     time.Duration // an age at which it is due, whatever the jitter
	}{
		{name: "80 % of an hour", seconds: 3600, notYet: 2880*time.Second - jitter - time.Millisecond, due: 2880*time.Second + time.Millisecond},
		{name: "80 % of the API server's shortest, 10 minutes", seconds: 600, notYet: 480*time.Second - jitter - time.Millisecond, due: 480*time.Second + time.Millisecond},
		{name: "a day for a token of two days", seconds: 2 * 86400, notYet: 24*time.Hour - jitter - time.Millisecond, due: 24*time.Hour + time.Millisecond},
		{name: "80 % of the lifetime granted, not asked for", seconds: 3600, granted: 600, notYet: 480*time.Second - jitter - time.Millisecond, due: 480*time.Second + time.Millisecond},
		{name: "a shorter maximum age, for tests", seconds: 3600, maxAge: 20 * time.Second, notYet: 15*time.Second - time.Millisecond, due: 20*time.Second + time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			p, issuer, clk := tokenProvider(f, tt.maxAge)
			issuer.maxSeconds = tt.granted
			pod := kubeAPIAccessPod()
			pod.Spec.Volumes[0].Projected.Sources[0].ServiceAccountToken.ExpirationSeconds = &tt.seconds
			if err := p.CreatePod(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			// Many checks at the age not yet due: the jitter never makes it so.
			clk.Step(tt.notYet)
			for range 50 {
				p.rotateDue(context.Background())
			}
			if n := issuer.requests(); n != 1 {
				t.Fatalf("%d token requests at age %s, want only the first", n, tt.notYet)
			}
			clk.Step(tt.due - tt.notYet)
			p.rotateDue(context.Background())
			if n := issuer.requests(); n != 2 {
				t.Fatalf("%d token requests at age %s, want a renewal", n, tt.due)
			}
			if got := pushedTokens(f); got[len(got)-1] != "podsync-token-"+uid1+"-0-0=token-2" {
				t.Errorf("tokens pushed %v, want the renewed one last", got)
			}
			// The renewed token starts its own life.
			p.rotateDue(context.Background())
			if n := issuer.requests(); n != 2 {
				t.Errorf("%d token requests just after the renewal, want 2", n)
			}
		})
	}
}

// TestTokenRenewalFailureKeepsTheToken: a renewal the API server refuses
// leaves the current token where it is (still valid until it expires) and
// is tried again at the next check; a renewed token podsyncd did not take
// is renewed and pushed again at the next check.
func TestTokenRenewalFailureKeepsTheToken(t *testing.T) {
	f := newFake()
	p, issuer, clk := tokenProvider(f, 0)
	if err := p.CreatePod(context.Background(), kubeAPIAccessPod()); err != nil {
		t.Fatal(err)
	}
	secret := "podsync-token-" + uid1 + "-0-0"
	clk.Step(3000 * time.Second) // past 80 % of 3607 s

	issuer.err = errors.New("etcdserver: request timed out")
	p.rotateDue(context.Background())
	if n := issuer.requests(); n != 2 {
		t.Fatalf("%d token requests, want the renewal tried", n)
	}
	if diff := cmp.Diff([]string{secret + "=token-1"}, pushedTokens(f)); diff != "" {
		t.Errorf("tokens pushed after a failed renewal (-want +got):\n%s", diff)
	}
	if h := p.tokens.held[secret]; h.token != "token-1" {
		t.Errorf("held token %q after a failed renewal, want token-1 kept", h.token)
	}

	issuer.err = nil
	clk.Step(tokenCheckPeriod)
	p.rotateDue(context.Background())
	if diff := cmp.Diff([]string{secret + "=token-1", secret + "=token-3"}, pushedTokens(f)); diff != "" {
		t.Errorf("tokens pushed after the retry (-want +got):\n%s", diff)
	}

	// podsyncd refuses the next one: renewed and pushed again.
	clk.Step(3000 * time.Second)
	f.mu.Lock()
	f.applyErr = errors.New("podsync: unavailable")
	f.mu.Unlock()
	p.rotateDue(context.Background())
	f.mu.Lock()
	f.applyErr = nil
	f.mu.Unlock()
	clk.Step(tokenCheckPeriod)
	p.rotateDue(context.Background())
	if diff := cmp.Diff([]string{secret + "=token-1", secret + "=token-3", secret + "=token-5"}, pushedTokens(f)); diff != "" {
		t.Errorf("tokens pushed after podsyncd refused one (-want +got):\n%s", diff)
	}
	if n := issuer.requests(); n != 5 {
		t.Errorf("%d token requests, want 5", n)
	}
}
