package provider

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"go.uber.org/zap"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/convert"
)

// TokenIssuer mints service-account tokens: the TokenRequest API
// (client-go's ServiceAccounts(namespace).CreateToken).
type TokenIssuer interface {
	CreateToken(ctx context.Context, namespace, serviceAccount string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)
}

// UseTokens makes the provider serve the serviceAccountToken sources of
// the pods' projected volumes (the kube-api-access-* volume every pod
// gets, and any other): tokens minted by issuer for the pod's service
// account, bound to the pod, written with the volume's other sources,
// and rotated before they expire, as the kubelet's token manager does.
// maxAge is the age at which a token is renewed whatever its lifetime; 0
// means the kubelet's DefaultTokenMaxAge. Call it before the first pod;
// Run rotates.
func (p *Provider) UseTokens(issuer TokenIssuer, maxAge time.Duration) {
	if maxAge <= 0 {
		maxAge = DefaultTokenMaxAge
	}
	p.tokens = &tokens{issuer: issuer, clock: clock.RealClock{}, maxAge: maxAge, held: map[string]*heldToken{}}
}

// TokenKey is the key of the token in the Secret a serviceAccountToken
// source becomes on podsyncd.
const TokenKey = "token"

// DefaultTokenMaxAge is the age at which the kubelet refreshes a token at
// the latest, however long it lives (pkg/kubelet/token: maxTTL).
const DefaultTokenMaxAge = 24 * time.Hour

// tokenMaxJitter spreads the refreshes (pkg/kubelet/token: maxJitter);
// never more than a quarter of the maximum age.
const tokenMaxJitter = 10 * time.Second

// tokenCheckPeriod is how often Run looks for tokens due for a refresh;
// a quarter of the maximum age when that is shorter.
const tokenCheckPeriod = 10 * time.Second

// tokens are the service-account tokens the provider holds for its pods.
type tokens struct {
	issuer TokenIssuer
	clock  clock.WithTicker
	// maxAge is the age at which a token is renewed whatever its
	// lifetime (DefaultTokenMaxAge but in tests).
	maxAge time.Duration

	mu sync.Mutex
	// held are the tokens by the name of the Secret they are on podsyncd.
	held map[string]*heldToken
}

// heldToken is one serviceAccountToken source of one pod and its current
// token.
type heldToken struct {
	namespace, pod, serviceAccount string
	uid                            types.UID
	audience                       string
	expirationSeconds              int64
	// expires is when the current token expires, ttl its lifetime as the
	// API server granted it (it may shorten the one asked for); zero
	// before the first.
	expires time.Time
	ttl     time.Duration
	token   string
	// unpushed is set when the current token could not be pushed to
	// podsyncd: the next check renews it again.
	unpushed bool
}

// tokenSecretName is the Secret a pod's serviceAccountToken source
// (volume v, source s) becomes on podsyncd: fixed for the pod's life, so
// that its spec on podsyncd never changes with a rotation.
func tokenSecretName(uid types.UID, v, s int) string {
	return fmt.Sprintf("podsync-token-%s-%d-%d", uid, v, s)
}

// rewriteTokens turns each serviceAccountToken source of pod's projected
// volumes into the source of the Secret its token is pushed in, at the
// source's path: podsyncd writes it with the other sources, in the
// volume's mode, and rewrites it on each rotation.
func rewriteTokens(pod *corev1.Pod) {
	for v := range pod.Spec.Volumes {
		pv := pod.Spec.Volumes[v].Projected
		if pv == nil {
			continue
		}
		for s := range pv.Sources {
			src := pv.Sources[s].ServiceAccountToken
			if src == nil {
				continue
			}
			pv.Sources[s] = corev1.VolumeProjection{Secret: &corev1.SecretProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: tokenSecretName(pod.UID, v, s)},
				Items:                []corev1.KeyToPath{{Key: TokenKey, Path: src.Path}},
			}}
		}
	}
}

// serviceAccountOf is the pod's service account, "default" when unset (as
// the ServiceAccount admission plugin defaults it).
func serviceAccountOf(pod *corev1.Pod) string {
	switch {
	case pod.Spec.ServiceAccountName != "":
		return pod.Spec.ServiceAccountName
	case pod.Spec.DeprecatedServiceAccount != "":
		return pod.Spec.DeprecatedServiceAccount
	}
	return "default"
}

// ensure mints the tokens of pod it does not hold yet and returns the
// Secrets of all of them, for podsyncd.
func (t *tokens) ensure(ctx context.Context, pod *corev1.Pod) ([]*heldToken, error) {
	var out []*heldToken
	for v, vol := range pod.Spec.Volumes {
		if vol.Projected == nil {
			continue
		}
		for s, src := range vol.Projected.Sources {
			if src.ServiceAccountToken == nil {
				continue
			}
			name := tokenSecretName(pod.UID, v, s)
			t.mu.Lock()
			h := t.held[name]
			if h == nil {
				exp := int64(3600) // the API server's default
				if src.ServiceAccountToken.ExpirationSeconds != nil {
					exp = *src.ServiceAccountToken.ExpirationSeconds
				}
				h = &heldToken{namespace: pod.Namespace, pod: pod.Name, uid: pod.UID, serviceAccount: serviceAccountOf(pod),
					audience: src.ServiceAccountToken.Audience, expirationSeconds: exp}
				t.held[name] = h
			}
			have := h.token != ""
			t.mu.Unlock()
			if !have {
				if err := t.mint(ctx, h); err != nil {
					return nil, err
				}
			}
			out = append(out, h)
		}
	}
	return out, nil
}

// mint requests a new token for h, bound to its pod, as the kubelet's
// token manager requests one.
func (t *tokens) mint(ctx context.Context, h *heldToken) error {
	t.mu.Lock()
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &h.expirationSeconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: h.pod, UID: h.uid},
	}}
	if h.audience != "" {
		req.Spec.Audiences = []string{h.audience}
	}
	ns, sa, pod := h.namespace, h.serviceAccount, h.pod
	t.mu.Unlock()
	got, err := t.issuer.CreateToken(ctx, ns, sa, req)
	if err != nil {
		return fmt.Errorf("token of service account %s/%s for pod %s: %w", ns, sa, pod, err)
	}
	ttl := time.Duration(h.expirationSeconds) * time.Second
	if got.Spec.ExpirationSeconds != nil {
		// The kubelet's requiresRefresh reads the lifetime granted.
		ttl = time.Duration(*got.Spec.ExpirationSeconds) * time.Second
	}
	t.mu.Lock()
	h.token, h.expires, h.ttl = got.Status.Token, got.Status.ExpirationTimestamp.Time, ttl
	t.mu.Unlock()
	return nil
}

// due says whether h needs a new token now: as the kubelet's
// requiresRefresh, when 80 % of its lifetime has passed or it is older
// than maxAge (a day), less a jitter. The caller holds t.mu.
func (t *tokens) due(h *heldToken, now time.Time) bool {
	if h.token == "" || h.unpushed {
		return true
	}
	issued := h.expires.Add(-h.ttl)
	jitter := time.Duration(rand.Float64() * float64(min(tokenMaxJitter, t.maxAge/4)))
	return now.After(issued.Add(t.maxAge-jitter)) || now.After(h.expires.Add(-h.ttl/5-jitter))
}

// forget drops the tokens of the pod uid and returns the names of their
// Secrets.
func (t *tokens) forget(uid types.UID) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var names []string
	for name, h := range t.held {
		if h.uid == uid {
			names = append(names, name)
			delete(t.held, name)
		}
	}
	return names
}

// tokenSecret is the Secret of h's token as podsyncd stores it. The
// caller holds t.mu.
func (p *Provider) tokenSecret(name string, h *heldToken) (*podsyncv1.Secret, error) {
	s := &corev1.Secret{ObjectMeta: p.objectMeta(metav1.ObjectMeta{Namespace: h.namespace, Name: name}),
		Type: corev1.SecretTypeOpaque, Data: map[string][]byte{TokenKey: []byte(h.token)}}
	convert.DefaultSecret(s)
	return convert.SecretToProto(s)
}

// tokenSecrets mints the tokens pod needs and returns their Secrets, as
// podsyncd stores them; they go to podsyncd with the pod (its volume
// waits for them otherwise).
func (p *Provider) tokenSecrets(ctx context.Context, pod *corev1.Pod) ([]*podsyncv1.Secret, error) {
	if p.tokens == nil {
		return nil, nil
	}
	held, err := p.tokens.ensure(ctx, pod)
	if err != nil || len(held) == 0 {
		return nil, err
	}
	var out []*podsyncv1.Secret
	p.tokens.mu.Lock()
	defer p.tokens.mu.Unlock()
	for v, vol := range pod.Spec.Volumes {
		if vol.Projected == nil {
			continue
		}
		for s, src := range vol.Projected.Sources {
			if src.ServiceAccountToken == nil {
				continue
			}
			name := tokenSecretName(pod.UID, v, s)
			h := p.tokens.held[name]
			if h == nil {
				continue
			}
			sec, err := p.tokenSecret(name, h)
			if err != nil {
				return nil, err
			}
			out = append(out, sec)
		}
	}
	return out, nil
}

// dropTokens forgets the tokens of the deleted pod uid and deletes their
// Secrets on podsyncd.
func (p *Provider) dropTokens(ctx context.Context, namespace string, uid types.UID) {
	if p.tokens == nil {
		return
	}
	for _, name := range p.tokens.forget(uid) {
		_, err := p.ps.DeleteObject(ctx, &podsyncv1.DeleteObjectRequest{Kind: podsyncv1.ObjectKind_OBJECT_KIND_SECRET, Namespace: namespace, Name: name})
		if err != nil {
			p.log.Warn("could not delete a deleted pod's token on podsync", zap.String("secret", key(namespace, name)), zap.Error(err))
		}
	}
}

// rotateTokens renews the tokens due for it and pushes them to podsyncd,
// which rewrites them in the pods' volumes, until ctx ends.
func (p *Provider) rotateTokens(ctx context.Context) {
	if p.tokens == nil {
		return
	}
	tick := p.tokens.clock.NewTicker(min(tokenCheckPeriod, p.tokens.maxAge/4))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
			p.rotateDue(ctx)
		}
	}
}

// rotateDue renews and pushes the tokens due now.
func (p *Provider) rotateDue(ctx context.Context) {
	t := p.tokens
	now := t.clock.Now()
	t.mu.Lock()
	var due []string
	for name, h := range t.held {
		if t.due(h, now) {
			due = append(due, name)
		}
	}
	t.mu.Unlock()
	for _, name := range due {
		t.mu.Lock()
		h := t.held[name]
		t.mu.Unlock()
		if h == nil {
			continue // its pod was deleted meanwhile
		}
		if err := t.mint(ctx, h); err != nil {
			// The current token stays valid until it expires; the next
			// check tries again.
			p.log.Warn("could not renew a service-account token", zap.String("pod", key(h.namespace, h.pod)), zap.Error(err))
			continue
		}
		t.mu.Lock()
		sec, err := p.tokenSecret(name, h)
		t.mu.Unlock()
		if err == nil {
			_, err = p.ps.ApplyObjects(ctx, &podsyncv1.ApplyObjectsRequest{Secrets: []*podsyncv1.Secret{sec}})
		}
		t.mu.Lock()
		h.unpushed = err != nil
		t.mu.Unlock()
		if err != nil {
			p.log.Warn("could not push a renewed service-account token to podsync", zap.String("pod", key(h.namespace, h.pod)), zap.Error(err))
			continue
		}
		p.log.Info("service-account token renewed", zap.String("pod", key(h.namespace, h.pod)), zap.Time("expires", h.expires))
	}
}
