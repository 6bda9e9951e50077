package syncer

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// This file ports the kubelet's image credential keyring
// (k8s.io/kubernetes/pkg/credentialprovider: BasicDockerKeyring, the
// docker config parsers, URLsMatch) and its secrets keyring
// (credentialprovider/secrets.MakeDockerKeyring): importing
// k8s.io/kubernetes would pull the kubelet's feature gates and the API
// server's packages into the engine.

// DockerConfigEntry is one registry's credentials in a docker config,
// with "auth" (base64 of user:password) decoded, as the kubelet's.
type DockerConfigEntry struct {
	Username string
	Password string
	Email    string
}

type dockerConfigEntryWithAuth struct {
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	Email    string `json:"email,omitempty"`
	Auth     string `json:"auth,omitempty"`
}

// UnmarshalJSON decodes an entry, its "auth" field (base64, padded or
// not, of "user:password") winning over username and password.
func (e *DockerConfigEntry) UnmarshalJSON(data []byte) error {
	var tmp dockerConfigEntryWithAuth
	if err := json.Unmarshal(data, &tmp); err != nil {
		return err
	}
	e.Username, e.Password, e.Email = tmp.Username, tmp.Password, tmp.Email
	if tmp.Auth == "" {
		return nil
	}
	var err error
	e.Username, e.Password, err = decodeDockerConfigFieldAuth(tmp.Auth)
	return err
}

// decodeDockerConfigFieldAuth is the kubelet's.
func decodeDockerConfigFieldAuth(field string) (string, string, error) {
	var decoded []byte
	var err error
	if strings.HasSuffix(strings.TrimSpace(field), "=") {
		decoded, err = base64.StdEncoding.DecodeString(field)
	} else {
		decoded, err = base64.RawStdEncoding.DecodeString(field)
	}
	if err != nil {
		return "", "", fmt.Errorf("decode the auth field: %w", err)
	}
	user, pass, ok := strings.Cut(string(decoded), ":")
	if !ok {
		return "", "", errors.New("the auth field does not hold user:password")
	}
	return user, strings.Trim(pass, "\x00"), nil
}

// DockerConfig maps a registry (a host, optionally with a scheme, port,
// path and * globs in host parts) to its credentials.
type DockerConfig map[string]DockerConfigEntry

// ParseDockerConfigJSON parses a docker config.json ({"auths": {...}}),
// the content of a kubernetes.io/dockerconfigjson Secret and of
// podsyncd's --image-credentials file.
func ParseDockerConfigJSON(data []byte) (DockerConfig, error) {
	var cfg struct {
		Auths DockerConfig `json:"auths"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("parse docker config.json: %w", err)
	}
	return cfg.Auths, nil
}

// ParseDockerConfig parses a legacy .dockercfg (the registries at the top
// level), the content of a kubernetes.io/dockercfg Secret.
func ParseDockerConfig(data []byte) (DockerConfig, error) {
	var cfg DockerConfig
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("parse .dockercfg: %w", err)
	}
	return cfg, nil
}

// Credential is one set of credentials the keyring found for an image.
type Credential struct {
	Username string
	Password string
}

// Keyring is the kubelet's BasicDockerKeyring: credentials indexed by
// registry key, looked up most specific key first. The zero value holds
// none. A Keyring is not changed once built, so it is safe for concurrent
// lookups.
type Keyring struct {
	index []string
	creds map[string][]Credential
}

// Add indexes cfg's entries: "https://" is assumed when no scheme is
// given, a /v1/ or /v2/ path prefix is dropped, and the key is the host
// with the rest of the path.
func (k *Keyring) Add(cfg DockerConfig) {
	if k.creds == nil {
		k.creds = map[string][]Credential{}
	}
	// Sorted for a deterministic order of one key's credentials.
	for _, repository := range slices.Sorted(maps.Keys(cfg)) {
		e := cfg[repository]
		r := repository
		if !strings.HasPrefix(r, "https://") && !strings.HasPrefix(r, "http://") {
			r = "https://" + r
		}
		parsed, err := url.Parse(r)
		if err != nil {
			continue
		}
		path := parsed.Path
		if strings.HasPrefix(path, "/v2/") || strings.HasPrefix(path, "/v1/") {
			path = path[3:]
		}
		key := parsed.Host
		if path != "" && path != "/" {
			key = parsed.Host + path
		}
		k.creds[key] = append(k.creds[key], Credential{Username: e.Username, Password: e.Password})
		if !slices.Contains(k.index, key) {
			k.index = append(k.index, key)
		}
	}
	slices.Sort(k.index)
	slices.Reverse(k.index)
}

const defaultRegistryHost = "index.docker.io"

// Lookup returns the credentials for image (a repository without tag or
// digest, "registry.local:5000/app" or "docker.io/library/busybox"), every
// matching key's, most specific first; Docker Hub images fall back to the
// index.docker.io key.
func (k *Keyring) Lookup(image string) []Credential {
	if k == nil {
		return nil
	}
	var out []Credential
	for _, key := range k.index {
		if ok, _ := urlsMatchStr(key, image); ok {
			out = append(out, k.creds[key]...)
		}
	}
	if len(out) > 0 {
		return out
	}
	if isDefaultRegistryMatch(image) {
		return k.creds[defaultRegistryHost]
	}
	return nil
}

// isDefaultRegistryMatch is the kubelet's: an image of Docker Hub.
func isDefaultRegistryMatch(image string) bool {
	parts := strings.SplitN(image, "/", 2)
	if parts[0] == "" {
		return false
	}
	if len(parts) == 1 {
		return true
	}
	if parts[0] == "docker.io" || parts[0] == "index.docker.io" {
		return true
	}
	return !strings.ContainsAny(parts[0], ".:")
}

func parseSchemelessURL(s string) (*url.URL, error) {
	u, err := url.Parse("https://" + s)
	if err != nil {
		return nil, err
	}
	u.Scheme = ""
	return u, nil
}

func splitURL(u *url.URL) ([]string, string) {
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		host, port = u.Host, ""
	}
	return strings.Split(host, "."), port
}

// urlsMatchStr is the kubelet's URLsMatchStr: the same port, as many host
// parts, each matching its glob, and the target's path below the glob's.
func urlsMatchStr(glob, target string) (bool, error) {
	g, err := parseSchemelessURL(glob)
	if err != nil {
		return false, err
	}
	t, err := parseSchemelessURL(target)
	if err != nil {
		return false, err
	}
	gParts, gPort := splitURL(g)
	tParts, tPort := splitURL(t)
	if gPort != tPort || len(gParts) != len(tParts) || !strings.HasPrefix(t.Path, g.Path) {
		return false, nil
	}
	for i, gp := range gParts {
		ok, err := filepath.Match(gp, tParts[i])
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// secretsKeyring is the kubelet's MakeDockerKeyring over the pod's
// imagePullSecrets: the Secrets of types kubernetes.io/dockercfg and
// kubernetes.io/dockerconfigjson (or, untyped, with their key) the pod
// names, in its order; a missing or unparsable one is skipped, as the
// kubelet skips it.
func secretsKeyring(pod *corev1.Pod, secrets []*corev1.Secret) *Keyring {
	k := &Keyring{}
	for _, ref := range pod.Spec.ImagePullSecrets {
		i := slices.IndexFunc(secrets, func(s *corev1.Secret) bool {
			return s != nil && s.Name == ref.Name && (s.Namespace == "" || s.Namespace == pod.Namespace)
		})
		if i < 0 {
			continue
		}
		s := secrets[i]
		if data, ok := secretData(s, corev1.DockerConfigJsonKey); ok && (s.Type == corev1.SecretTypeDockerConfigJson || s.Type == "") {
			if cfg, err := ParseDockerConfigJSON(data); err == nil {
				k.Add(cfg)
			}
			continue
		}
		if data, ok := secretData(s, corev1.DockerConfigKey); ok && (s.Type == corev1.SecretTypeDockercfg || s.Type == "") {
			if cfg, err := ParseDockerConfig(data); err == nil {
				k.Add(cfg)
			}
		}
	}
	return k
}

func secretData(s *corev1.Secret, key string) ([]byte, bool) {
	if v, ok := s.StringData[key]; ok {
		return []byte(v), true
	}
	v, ok := s.Data[key]
	return v, ok
}

// imageRepository returns image's repository as the kubelet's keyring
// looks it up (parsers.ParseImageName): the registry host, docker.io by
// default, and the path, library/ for an official Docker Hub image,
// without tag or digest.
func imageRepository(image string) string {
	name := image
	if i := strings.IndexByte(name, '@'); i >= 0 {
		name = name[:i]
	}
	host := "docker.io"
	first, rest, ok := strings.Cut(name, "/")
	if ok && (strings.ContainsAny(first, ".:") || first == "localhost") {
		host, name = first, rest
	} else if !ok {
		name = "library/" + name
	}
	if i := strings.LastIndexByte(name, ':'); i >= 0 {
		name = name[:i]
	}
	return host + "/" + name
}
