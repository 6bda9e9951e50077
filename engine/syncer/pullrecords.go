package syncer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// Image pull credential verification policies, the kubelet's
// imagePullCredentialsVerificationPolicy (KubeletEnsureSecretPulledImages,
// on by default since v1.35): whether a pod may run an image the node
// holds already without proving it can pull it.
const (
	// NeverVerify runs any image the node holds, whoever pulled it.
	NeverVerify = "NeverVerify"
	// NeverVerifyPreloadedImages (the default) verifies the images the
	// node pulled itself, and runs those it did not (preloaded, imported)
	// without a check.
	NeverVerifyPreloadedImages = "NeverVerifyPreloadedImages"
	// NeverVerifyAllowlistedImages verifies every image but those of the
	// allowlist (ImagePullVerification.Allowlist).
	NeverVerifyAllowlistedImages = "NeverVerifyAllowlistedImages"
	// AlwaysVerify verifies every image.
	AlwaysVerify = "AlwaysVerify"
)

// ImagePullVerification is how a Syncer verifies a pod's access to an
// image the node holds (SyncerOptions.ImagePullVerification).
type ImagePullVerification struct {
	// Policy is one of the policies above; empty means
	// NeverVerifyPreloadedImages.
	Policy string
	// Allowlist are the images NeverVerifyAllowlistedImages never
	// verifies, the kubelet's preloadedImagesVerificationAllowlist: a
	// repository without tag or digest ("registry.example/app"), or a
	// prefix ending in "/*" ("registry.example/team/*").
	Allowlist []string
}

// Validate checks the policy and the allowlist, as the kubelet's
// configuration validation does.
func (v ImagePullVerification) Validate() error {
	switch v.Policy {
	case "", NeverVerify, NeverVerifyPreloadedImages, AlwaysVerify:
		if len(v.Allowlist) > 0 {
			return fmt.Errorf("an allowlist of preloaded images needs the policy %s, not %q", NeverVerifyAllowlistedImages, v.Policy)
		}
	case NeverVerifyAllowlistedImages:
	default:
		return fmt.Errorf("image pull credential verification policy %q: want %s, %s, %s or %s", v.Policy,
			NeverVerify, NeverVerifyPreloadedImages, NeverVerifyAllowlistedImages, AlwaysVerify)
	}
	for _, p := range v.Allowlist {
		name := strings.TrimSuffix(p, "/*")
		if name == "" || strings.ContainsAny(name, "@*") || (strings.Contains(name[strings.LastIndex(name, "/")+1:], ":") && !strings.HasSuffix(p, "/*")) {
			return fmt.Errorf("preloaded image allowlist entry %q: want a repository without tag or digest, or a prefix ending in /*", p)
		}
	}
	return nil
}

// requireVerification is the kubelet's RequireCredentialVerificationForImage:
// whether a pod must prove it can pull image (repository repo), which the
// node holds, pulled by the node itself (pulledByNode) or not.
func (v ImagePullVerification) requireVerification(repo string, pulledByNode bool) bool {
	switch v.Policy {
	case NeverVerify:
		return false
	case AlwaysVerify:
		return true
	case NeverVerifyAllowlistedImages:
		return !slices.ContainsFunc(v.Allowlist, func(p string) bool { return allowlisted(p, repo) })
	}
	return pulledByNode
}

// allowlisted reports whether the allowlist entry p names the repository
// repo (as imageRepository spells both): the repository itself, or one
// below a prefix ending in "/*".
func allowlisted(p, repo string) bool {
	prefix, wildcard := strings.CutSuffix(p, "/*")
	if !wildcard {
		return imageRepository(p) == repo
	}
	return strings.HasPrefix(repo, strings.TrimSuffix(imageRepository(prefix+"/x"), "x"))
}

// pulledRecord is what the node knows of the pulls of one image (by its
// ID): by repository (without tag or digest, as imageRepository names
// it), the credentials that pulled it. The kubelet's ImagePulledRecord.
type pulledRecord struct {
	ImageRef    string                      `json:"imageRef"`
	Credentials map[string]*pullCredentials `json:"credentials"`
}

// pullCredentials are the credentials that pulled an image of a
// repository.
type pullCredentials struct {
	// NodePodsAccessible: an anonymous pull or the node's own credentials
	// (--image-credentials) pulled it, so every pod of the node may run
	// it.
	NodePodsAccessible bool `json:"nodePodsAccessible,omitempty"`
	// Hashes are credentialHash of the pods' image pull Secrets'
	// credentials that pulled it.
	Hashes []string `json:"hashes,omitempty"`
}

// pullRecords keep, under a directory of the node's root, which
// credentials pulled each image (pulled/<sha256 of the image ID>.json) and
// the pulls in flight (intents/<sha256 of the image>): the kubelet's
// image pull manager records, so that a pod may run an image the node
// holds only if it could pull it itself. The records outlive podsyncd.
type pullRecords struct {
	dir string
	mu  sync.Mutex
}

// credentialHash identifies the credentials of a pull without holding
// them.
func credentialHash(c Credential) string {
	h := sha256.Sum256([]byte(c.Username + "\x00" + c.Password))
	return hex.EncodeToString(h[:])
}

func fileKey(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func (r *pullRecords) pulledPath(imageRef string) string {
	return filepath.Join(r.dir, "pulled", fileKey(imageRef)+".json")
}

func (r *pullRecords) intentPath(image string) string {
	return filepath.Join(r.dir, "intents", fileKey(image))
}

// readPulled reads the record of imageRef; nil if there is none.
func (r *pullRecords) readPulled(imageRef string) (*pulledRecord, error) {
	b, err := os.ReadFile(r.pulledPath(imageRef))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the pull record of %s: %w", imageRef, err)
	}
	var rec pulledRecord
	if err := json.Unmarshal(b, &rec); err != nil || rec.ImageRef != imageRef {
		return nil, fmt.Errorf("read the pull record of %s: not a record of it", imageRef)
	}
	return &rec, nil
}

// writeFile writes data to path through a temporary file and a rename.
func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// intend records that image is being pulled, before the pull: a pull cut
// short (podsyncd killed) leaves the image pulled by the node, never
// taken for a preloaded one.
func (r *pullRecords) intend(image string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := writeFile(r.intentPath(image), []byte(image)); err != nil {
		return fmt.Errorf("record the pull of %s: %w", image, err)
	}
	return nil
}

// pulled records that image (ID imageRef) was pulled with cred (nil: by
// anyone on the node, anonymously or with the node's credentials), and
// ends its intent.
func (r *pullRecords) pulled(image, imageRef string, cred *Credential) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, err := r.readPulled(imageRef)
	if err != nil || rec == nil {
		rec = &pulledRecord{ImageRef: imageRef}
	}
	if rec.Credentials == nil {
		rec.Credentials = map[string]*pullCredentials{}
	}
	repo := imageRepository(image)
	pc := rec.Credentials[repo]
	if pc == nil {
		pc = &pullCredentials{}
		rec.Credentials[repo] = pc
	}
	if cred == nil {
		pc.NodePodsAccessible = true
	} else if h := credentialHash(*cred); !slices.Contains(pc.Hashes, h) {
		pc.Hashes = append(pc.Hashes, h)
	}
	b, _ := json.Marshal(rec)
	if err := writeFile(r.pulledPath(imageRef), b); err != nil {
		return fmt.Errorf("record the pull of %s: %w", image, err)
	}
	return r.endIntentLocked(image)
}

// failed ends the intent of a pull of image that failed: what the node
// held of it stays as it was.
func (r *pullRecords) failed(image string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.endIntentLocked(image)
}

func (r *pullRecords) endIntentLocked(image string) error {
	if err := os.Remove(r.intentPath(image)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("record the pull of %s: %w", image, err)
	}
	return nil
}

// mustPull is the kubelet's MustAttemptImagePull: whether a pod holding
// creds for image's repository must pull image (ID imageRef), which the
// node holds, before it may run it. An image the node did not pull (no
// record, no pull in flight) is verified as policy says; one it pulled is
// run without a pull only if an anonymous pull or the node's credentials
// pulled it, or one of creds did. A record that cannot be read asks for
// a pull.
func (r *pullRecords) mustPull(v ImagePullVerification, image, imageRef string, creds []Credential) bool {
	r.mu.Lock()
	rec, err := r.readPulled(imageRef)
	_, intentErr := os.Stat(r.intentPath(image))
	r.mu.Unlock()
	if err != nil {
		return true
	}
	repo := imageRepository(image)
	if !v.requireVerification(repo, rec != nil || intentErr == nil) {
		return false
	}
	if rec == nil {
		return true
	}
	pc := rec.Credentials[repo]
	if pc == nil {
		return true
	}
	if pc.NodePodsAccessible {
		return false
	}
	for _, c := range creds {
		if slices.Contains(pc.Hashes, credentialHash(c)) {
			return false
		}
	}
	return true
}
