package syncer

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	crierrors "k8s.io/cri-api/pkg/errors"

	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/failpoint"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/plan"
	"github.com/podsync/podsync/engine/podstatus"
	"github.com/podsync/podsync/logx"
)

// referencePattern is the grammar of an image reference
// (github.com/distribution/reference): [domain/]path[:tag][@digest].
var referencePattern = regexp.MustCompile(`^` +
	`((?:(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*(?::[0-9]+)?/)?` +
	`[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*)` +
	`(?::([\w][\w.-]{0,127}))?` +
	`(?:@([A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}))?$`)

// imageReference is a parsed image reference.
type imageReference struct {
	name, tag, digest string
}

func parseImageReference(image string) (imageReference, error) {
	m := referencePattern.FindStringSubmatch(image)
	if m == nil {
		return imageReference{}, fmt.Errorf("invalid image reference %q: %w", image, errdefs.ErrInvalidSpec)
	}
	// Only a registry host may have capitals: a first component that is
	// not one (no '.' or ':', not localhost) is part of the repository.
	if first, _, ok := strings.Cut(m[1], "/"); ok && !strings.ContainsAny(first, ".:") && first != "localhost" && first != strings.ToLower(first) {
		return imageReference{}, fmt.Errorf("invalid image reference %q: repository name must be lowercase: %w", image, errdefs.ErrInvalidSpec)
	}
	return imageReference{name: m[1], tag: m[2], digest: m[3]}, nil
}

// applyDefaultImageTag is the kubelet's: a reference with neither tag nor
// digest gets ":latest".
func applyDefaultImageTag(image string) (string, error) {
	ref, err := parseImageReference(image)
	if err != nil {
		return "", err
	}
	if ref.tag == "" && ref.digest == "" {
		return image + ":latest", nil
	}
	return image, nil
}

// pullPolicy returns the container's pull policy, defaulted as the API
// server does when empty: Always for ":latest" or no tag, else
// IfNotPresent.
func pullPolicy(c *corev1.Container) corev1.PullPolicy {
	if c.ImagePullPolicy != "" {
		return c.ImagePullPolicy
	}
	ref, err := parseImageReference(c.Image)
	if err == nil && ref.digest == "" && (ref.tag == "" || ref.tag == "latest") {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

// shouldPullImage is the kubelet's.
func shouldPullImage(policy corev1.PullPolicy, present bool) bool {
	switch policy {
	case corev1.PullNever:
		return false
	case corev1.PullAlways:
		return true
	}
	return !present
}

// imageFailure is a failed ensureImage. A start held back by the
// image-pull back-off has reason ImagePullBackOff, no error, and until.
type imageFailure struct {
	reason, message string
	err             error
	until           time.Time
}

// ensureImage is the kubelet's EnsureImageExists: it inspects the image,
// pulls it as the pull policy says (emitting a PullImage step) unless the
// image's pull back-off holds (the planner applied it before the pass; a
// pull of the same image failing earlier in the pass for another
// container starts it anew), records failed pulls for the back-off, and
// returns the image reference (ID) to create the container from, and
// whether the image was present and not pulled. An image the node holds
// is run without a pull only if the pod could pull it itself
// (KubeletEnsureSecretPulledImages, pullRecords.mustPull): else it is
// pulled with the pod's credentials, as if it were not there, and with
// pull policy Never refused as not present.
func (p *pass) ensureImage(ctx context.Context, c *corev1.Container, sbConfig *runtimeapi.PodSandboxConfig) (string, *runtimeapi.Image, bool, *imageFailure) {
	image, err := applyDefaultImageTag(c.Image)
	if err != nil {
		return "", nil, false, &imageFailure{reason: ReasonInvalidImageName,
			message: fmt.Sprintf("Failed to apply default image tag %q: %v", c.Image, err), err: err}
	}
	spec := &runtimeapi.ImageSpec{
		Image:              image,
		RuntimeHandler:     runtimeHandler(p.pod),
		UserSpecifiedImage: c.Image,
	}
	if len(p.pod.Annotations) > 0 {
		spec.Annotations = model.PodAnnotations(p.pod)
	}
	resp, err := p.s.images.ImageStatus(ctx, spec, false)
	if err != nil {
		return "", nil, false, &imageFailure{reason: ReasonImageInspectError,
			message: fmt.Sprintf("Failed to inspect image %q: %v", c.Image, err), err: fmt.Errorf("inspect image %q: %w", c.Image, err)}
	}
	ref := resp.GetImage().GetId()
	present := resp.GetImage() != nil
	if !shouldPullImage(pullPolicy(c), present) {
		if present && !p.s.pulls.mustPull(p.s.verify, image, ref, p.podCredentials(image)) {
			return ref, resp.GetImage(), true, nil
		}
		if pullPolicy(c) == corev1.PullNever {
			// Present, perhaps, but not the pod's to run.
			msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", c.Image)
			return "", nil, false, &imageFailure{reason: ReasonErrImageNeverPull, message: msg,
				err: fmt.Errorf("image %q: not present with pull policy Never: %w", c.Image, errdefs.ErrNotFound)}
		}
	}
	f := p.pullFailure(c.Image)
	if b := plan.ImagePullBackoffOf(p.pod, c.Image, f, p.s.backoff); b.Active(p.s.clock.Now()) {
		return "", nil, false, &imageFailure{reason: plan.ReasonImagePullBackOff, message: model.PullBackOffMessage(c.Image, f), until: b.Until}
	}

	failpoint.Inject(failpoint.BeforeImagePull)
	start := p.s.clock.Now()
	ref, err = p.pullImage(ctx, spec, sbConfig)
	step := StepResult{Action: ActionPullImage, Target: c.Image, Start: start, Duration: p.s.clock.Since(start)}
	if err != nil {
		reason, msg := evalPullError(c, err)
		p.recordPullFailure(c.Image, reason, msg, p.s.clock.Now())
		step.Err = fmt.Errorf("pull image %q: %w", c.Image, err)
		step.Reason, step.Message = reason, msg
		p.rec.add(step)
		return "", nil, false, &imageFailure{reason: reason, message: msg, err: step.Err}
	}
	p.clearPullFailure(c.Image)
	step.Message = fmt.Sprintf("Successfully pulled image %q in %s", c.Image, step.Duration.Truncate(time.Millisecond))
	p.rec.add(step)
	return ref, nil, false, nil
}

// verifyRunAsNonRoot refuses c, as the kubelet does before it creates a
// container, if it would run as root although runAsNonRoot says it must
// not (criconfig.VerifyRunAsNonRoot). img is the image's status when
// ensureImage had it; a pulled image's is read only if its user matters.
func (p *pass) verifyRunAsNonRoot(ctx context.Context, c *corev1.Container, imageRef string, img *runtimeapi.Image) error {
	var uid *int64
	var username string
	if criconfig.NeedsImageUser(p.pod, c) {
		if img == nil {
			resp, err := p.s.images.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: imageRef}, false)
			if err != nil {
				return fmt.Errorf("inspect image %q for its user: %w", c.Image, err)
			}
			img = resp.GetImage()
		}
		uid, username = criconfig.ImageUser(img)
	}
	return criconfig.VerifyRunAsNonRoot(p.pod, c, uid, username)
}

// podCredentials are the credentials of the pod's image pull Secrets for
// image's repository.
func (p *pass) podCredentials(image string) []Credential {
	return secretsKeyring(p.pod, p.in.Secrets).Lookup(imageRepository(image))
}

// pullImage pulls with each credential for the image's repository in
// turn, as the kubelet's puller does — those of the pod's image pull
// Secrets, then the node's (--image-credentials), each most specific
// first (the kubelet's UnionDockerKeyring) — and anonymously when none
// matches. It records, before the pull, that the node pulls the image,
// and after it which credentials pulled it (pullRecords): a pod's, or
// none of a pod's (anonymous, the node's), which every pod may run.
func (p *pass) pullImage(ctx context.Context, spec *runtimeapi.ImageSpec, sbConfig *runtimeapi.PodSandboxConfig) (string, error) {
	if err := p.s.pulls.intend(spec.Image); err != nil {
		return "", err
	}
	podCreds := p.podCredentials(spec.Image)
	ref, cred, err := p.pullWith(ctx, spec, sbConfig, podCreds, p.s.credentials.Lookup(imageRepository(spec.Image)))
	if err != nil {
		if ferr := p.s.pulls.failed(spec.Image); ferr != nil {
			p.log.Warn("image pull not recorded", zap.String(logx.Image, spec.Image), zap.Error(ferr))
		}
		return "", err
	}
	if err := p.s.pulls.pulled(spec.Image, ref, cred); err != nil {
		// The image is there; a pod may have to pull it again.
		p.log.Warn("image pull not recorded", zap.String(logx.Image, spec.Image), zap.Error(err))
	}
	return ref, nil
}

// pullWith pulls spec with each of the pod's credentials, then each of
// the node's, and anonymously when there are none; it returns the pod's
// credential that pulled it (nil for the node's or none).
func (p *pass) pullWith(ctx context.Context, spec *runtimeapi.ImageSpec, sbConfig *runtimeapi.PodSandboxConfig, podCreds, nodeCreds []Credential) (string, *Credential, error) {
	if len(podCreds)+len(nodeCreds) == 0 {
		ref, err := p.s.images.PullImage(ctx, spec, nil, sbConfig)
		return ref, nil, err
	}
	var errs []error
	for i, c := range append(slices.Clone(podCreds), nodeCreds...) {
		ref, err := p.s.images.PullImage(ctx, spec, &runtimeapi.AuthConfig{Username: c.Username, Password: c.Password}, sbConfig)
		if err == nil {
			if i < len(podCreds) {
				return ref, &c, nil
			}
			return ref, nil, nil
		}
		errs = append(errs, err)
	}
	return "", nil, errors.Join(errs...)
}

// evalPullError is the kubelet's evalCRIPullErr. Like the kubelet it
// recognises the CRI's well-known pull errors by their message prefix,
// since they cross gRPC as text.
func evalPullError(c *corev1.Container, err error) (reason, msg string) {
	s := err.Error()
	if rest, ok := strings.CutPrefix(s, crierrors.ErrRegistryUnavailable.Error()); ok {
		return ReasonRegistryUnavailable, fmt.Sprintf("image pull failed for %s because the registry is unavailable%s", c.Image, rest)
	}
	if rest, ok := strings.CutPrefix(s, crierrors.ErrSignatureValidationFailed.Error()); ok {
		return ReasonSignatureValidation, fmt.Sprintf("image pull failed for %s because the signature validation failed%s", c.Image, rest)
	}
	return podstatus.ReasonErrImagePull, s
}

// pullFailure returns the pass's record of failed pulls of image, or nil.
func (p *pass) pullFailure(image string) *model.PullFailure {
	if i := slices.IndexFunc(p.pulls, func(f model.PullFailure) bool { return f.Image == image }); i >= 0 {
		return &p.pulls[i]
	}
	return nil
}

// recordPullFailure counts a failed pull of image.
func (p *pass) recordPullFailure(image, reason, msg string, at time.Time) {
	f := p.pullFailure(image)
	if f == nil {
		p.pulls = append(p.pulls, model.PullFailure{Image: image})
		f = &p.pulls[len(p.pulls)-1]
	}
	f.Failures++
	f.At, f.Reason, f.Message = at, reason, msg
}

// clearPullFailure forgets the failed pulls of image.
func (p *pass) clearPullFailure(image string) {
	p.pulls = slices.DeleteFunc(p.pulls, func(f model.PullFailure) bool { return f.Image == image })
}

// runtimeHandler is the CRI runtime handler for the pod: podsync has no
// RuntimeClass objects, so runtimeClassName names the handler directly.
func runtimeHandler(pod *corev1.Pod) string {
	if pod.Spec.RuntimeClassName != nil {
		return *pod.Spec.RuntimeClassName
	}
	return ""
}

// ensureImageVolumes pulls, by their pull policies, the images of the
// image volumes c mounts, as the kubelet's getImageVolumes does before it
// creates the containers, and returns their references (IDs) by volume
// name. A runtime that cannot mount image volumes (criconfig.
// ImageVolumesSupport, from its CRI Version) is refused with reason
// CreateContainerConfigError and a message saying so; a failed pull is the
// container's image failure (ErrImagePull, ImagePullBackOff).
func (p *pass) ensureImageVolumes(ctx context.Context, c *corev1.Container, sbConfig *runtimeapi.PodSandboxConfig) (map[string]string, *imageFailure) {
	var out map[string]string
	for _, m := range c.VolumeMounts {
		i := slices.IndexFunc(p.pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
		if i < 0 || p.pod.Spec.Volumes[i].Image == nil {
			continue
		}
		v := &p.pod.Spec.Volumes[i]
		if _, done := out[v.Name]; done {
			continue
		}
		if ok, why := p.s.imageVolumesSupported(ctx); !ok {
			return nil, &imageFailure{reason: ReasonCreateContainerConfigErr, message: fmt.Sprintf("image volume %q: %s", v.Name, why),
				err: fmt.Errorf("image volume %q: %s: %w", v.Name, why, errdefs.ErrInvalidSpec)}
		}
		ref, _, _, f := p.ensureImage(ctx, &corev1.Container{Name: c.Name, Image: v.Image.Reference, ImagePullPolicy: v.Image.PullPolicy}, sbConfig)
		if f != nil {
			return nil, f
		}
		if out == nil {
			out = map[string]string{}
		}
		out[v.Name] = ref
	}
	return out, nil
}

// imageVolumesSupported asks the runtime's version whether it mounts
// image volumes (criconfig.ImageVolumesSupport); an answer is kept, a
// failed call is asked again next time.
func (s *Syncer) imageVolumesSupported(ctx context.Context) (bool, string) {
	s.imageVolumes.mu.Lock()
	defer s.imageVolumes.mu.Unlock()
	if s.imageVolumes.known {
		return s.imageVolumes.ok, s.imageVolumes.why
	}
	v, ok := s.rt.(Versioner)
	if !ok {
		return false, "the container runtime does not say its version, so podsync cannot tell whether it supports image volumes"
	}
	resp, err := v.Version(ctx, "v1")
	if errors.Is(err, ErrNoVersion) {
		return false, "the container runtime does not say its version, so podsync cannot tell whether it supports image volumes"
	}
	if err != nil {
		return false, fmt.Sprintf("the container runtime's version could not be read (%v), so podsync cannot tell whether it supports image volumes", err)
	}
	s.imageVolumes.known = true
	s.imageVolumes.ok, s.imageVolumes.why = criconfig.ImageVolumesSupport(resp.GetRuntimeName(), resp.GetRuntimeVersion())
	return s.imageVolumes.ok, s.imageVolumes.why
}
