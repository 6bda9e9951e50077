package syncer

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// TestURLsMatch is the kubelet's credentialprovider TestURLsMatch table.
func TestURLsMatch(t *testing.T) {
	for _, tc := range []struct {
		glob, target string
		want         bool
	}{
		{"*.kubernetes.io", "prefix.kubernetes.io", true},
		{"prefix.*.io", "prefix.kubernetes.io", true},
		{"prefix.kubernetes.*", "prefix.kubernetes.io", true},
		{"*-good.kubernetes.io", "prefix-good.kubernetes.io", true},
		{"*.kubernetes.io/blah", "prefix.kubernetes.io/blah", true},
		{"prefix.*.io/foo", "prefix.kubernetes.io/foo/bar", true},
		{"*.kubernetes.io:1111/blah", "prefix.kubernetes.io:1111/blah", true},
		{"prefix.*.io:1111/foo", "prefix.kubernetes.io:1111/foo/bar", true},
		{"*.kubernetes.io", "kubernetes.io", false},
		{"*.*.kubernetes.io", "prefix.kubernetes.io", false},
		{"*.*.kubernetes.io", "kubernetes.io", false},
		{"*kubernetes.io", "a.kubernetes.io", false},
		{"*kubernetes.io", "kubernetes.io", true},
		{"*.*.*.kubernetes.io", "a.b.c.kubernetes.io", true},
		{"kubernetes.io", "kubernetes.com", false},
		{"k*.io", "quay.io", false},
		{"*.kubernetes.io:1234/blah", "prefix.kubernetes.io:1111/blah", false},
		{"prefix.*.io/foo", "prefix.kubernetes.io:1111/foo/bar", false},
	} {
		if got, _ := urlsMatchStr(tc.glob, tc.target); got != tc.want {
			t.Errorf("urlsMatchStr(%q, %q) = %v, want %v", tc.glob, tc.target, got, tc.want)
		}
	}
}

// TestKeyringLookup is the kubelet's TestDockerKeyringLookup, with the
// keys podsync's earlier matcher was tested on and Docker Hub's forms.
func TestKeyringLookup(t *testing.T) {
	ada := Credential{Username: "ada", Password: "smash"}
	grace := Credential{Username: "grace", Password: "squash"}
	k := &Keyring{}
	k.Add(DockerConfig{
		"bar.example.com/pong": {Username: grace.Username, Password: grace.Password},
		"bar.example.com":      {Username: ada.Username, Password: ada.Password},
	})
	for _, tc := range []struct {
		image string
		want  []Credential
	}{
		{"bar.example.com", []Credential{ada}},
		{"bar.example.com/pong", []Credential{grace, ada}},
		{"bar.example.com/ping", []Credential{ada}},
		{"bar.example.com/pongz", []Credential{grace, ada}},
		{"bar.example.com/pong/pang", []Credential{grace, ada}},
		{"example.com", nil},
		{"foo.example.com", nil},
	} {
		if diff := cmp.Diff(tc.want, k.Lookup(tc.image)); diff != "" {
			t.Errorf("Lookup(%q) (-want +got):\n%s", tc.image, diff)
		}
	}

	for _, tc := range []struct {
		key, image string
		want       bool
	}{
		{"registry.example:5000", "registry.example:5000/team/app:1", true},
		{"https://registry.example:5000/v1/", "registry.example:5000/team/app:1", true},
		{"http://registry.example:5000", "registry.example:5000/team/app:1", true},
		{"registry.example:5000/team", "registry.example:5000/team/app:1", true},
		{"registry.example:5000/other", "registry.example:5000/team/app:1", false},
		{"registry.example", "registry.example:5000/team/app:1", false},
		{"*.example:5000", "registry.example:5000/team/app", true},
		{"https://index.docker.io/v1/", "busybox", true},
		{"index.docker.io", "someone/app:1", true},
		{"docker.io/library", "busybox:1", true},
		{"docker.io/someone", "busybox:1", false},
		{"https://index.docker.io/v1/", "quay.io/app", false},
	} {
		k := &Keyring{}
		k.Add(DockerConfig{tc.key: {Username: "u", Password: "p"}})
		if got := len(k.Lookup(imageRepository(tc.image))) > 0; got != tc.want {
			t.Errorf("key %q for %q (as %q): matched %v, want %v", tc.key, tc.image, imageRepository(tc.image), got, tc.want)
		}
	}
}

// TestDockerConfigParsing: config.json and .dockercfg entries, "auth"
// decoded with or without padding and winning over username/password.
func TestDockerConfigParsing(t *testing.T) {
	cfg, err := ParseDockerConfigJSON([]byte(`{"auths":{"a.io":{"auth":"dXNlcjpwYXNz"},"b.io":{"username":"x","password":"y","auth":"dXNlcjpwYXNzd29yZA=="}}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := DockerConfig{"a.io": {Username: "user", Password: "pass"}, "b.io": {Username: "user", Password: "password"}}
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("config.json (-want +got):\n%s", diff)
	}
	legacy, err := ParseDockerConfig([]byte(`{"c.io":{"username":"u","password":"p","email":"e@x"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(DockerConfig{"c.io": {Username: "u", Password: "p", Email: "e@x"}}, legacy); diff != "" {
		t.Errorf(".dockercfg (-want +got):\n%s", diff)
	}
	if _, err := ParseDockerConfigJSON([]byte(`{"auths":{"a.io":{"auth":"!!"}}}`)); err == nil {
		t.Error("a bad auth field parsed")
	}
}

// TestSecretsKeyring: the pod's pull Secrets of both types, in its order,
// then nothing of a Secret it does not name or of another type.
func TestSecretsKeyring(t *testing.T) {
	pod := &corev1.Pod{}
	pod.Namespace = "ns"
	pod.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "missing"}, {Name: "json"}, {Name: "legacy"}, {Name: "opaque"}}
	secrets := []*corev1.Secret{
		{Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"reg.io":{"username":"a","password":"1"}}}`)}},
		{Type: corev1.SecretTypeDockercfg, Data: map[string][]byte{corev1.DockerConfigKey: []byte(`{"reg.io/team":{"username":"b","password":"2"}}`)}},
		{Type: corev1.SecretTypeOpaque, Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"reg.io":{"username":"c","password":"3"}}}`)}},
		{Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"reg.io":{"username":"d","password":"4"}}}`)}},
	}
	secrets[0].Name, secrets[1].Name, secrets[2].Name, secrets[3].Name = "json", "legacy", "opaque", "unnamed"
	got := secretsKeyring(pod, secrets).Lookup(imageRepository("reg.io/team/app:1"))
	if diff := cmp.Diff([]Credential{{Username: "b", Password: "2"}, {Username: "a", Password: "1"}}, got); diff != "" {
		t.Errorf("credentials (-want +got):\n%s", diff)
	}
}
