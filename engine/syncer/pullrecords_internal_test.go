package syncer

import (
	"os"
	"testing"
)

// TestImagePullVerificationValidate accepts the kubelet's four policies,
// an allowlist only with NeverVerifyAllowlistedImages, and allowlist
// entries without tag or digest.
func TestImagePullVerificationValidate(t *testing.T) {
	for _, tc := range []struct {
		v  ImagePullVerification
		ok bool
	}{
		{ImagePullVerification{}, true},
		{ImagePullVerification{Policy: AlwaysVerify}, true},
		{ImagePullVerification{Policy: NeverVerifyAllowlistedImages, Allowlist: []string{"registry.example/app", "registry.example:5000/team/*"}}, true},
		{ImagePullVerification{Policy: "Sometimes"}, false},
		{ImagePullVerification{Policy: NeverVerify, Allowlist: []string{"registry.example/app"}}, false},
		{ImagePullVerification{Policy: NeverVerifyAllowlistedImages, Allowlist: []string{"registry.example/app:v1"}}, false},
		{ImagePullVerification{Policy: NeverVerifyAllowlistedImages, Allowlist: []string{"registry.example/app@sha256:0"}}, false},
	} {
		if err := tc.v.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: %v, want ok %v", tc.v, err, tc.ok)
		}
	}
}

// TestPullRecords: the node's own pulls are recorded with their
// credentials, a pull in flight (intent) counts as the node's, and a
// record survives a new pullRecords on the same directory (a restart).
func TestPullRecords(t *testing.T) {
	dir := t.TempDir()
	r := &pullRecords{dir: dir}
	const image, ref = "registry.example/private/app:v1", "sha256:abc"
	pod := Credential{Username: "u", Password: "p"}
	v := ImagePullVerification{}
	if r.mustPull(v, image, ref, nil) {
		t.Error("a preloaded image must be pulled under NeverVerifyPreloadedImages")
	}
	if err := r.intend(image); err != nil {
		t.Fatal(err)
	}
	if !r.mustPull(v, image, ref, []Credential{pod}) {
		t.Error("an image the node is pulling is taken for preloaded")
	}
	if err := r.pulled(image, ref, &pod); err != nil {
		t.Fatal(err)
	}
	r = &pullRecords{dir: dir}
	if r.mustPull(v, image, ref, []Credential{pod}) || !r.mustPull(v, image, ref, []Credential{{Username: "u", Password: "x"}}) || !r.mustPull(v, image, ref, nil) {
		t.Error("after a pull with the pod's credentials: only those credentials run it without a pull")
	}
	if entries, _ := os.ReadDir(dir + "/intents"); len(entries) != 0 {
		t.Errorf("intents left: %v", entries)
	}
	if err := r.pulled(image, ref, nil); err != nil {
		t.Fatal(err)
	}
	if r.mustPull(v, image, ref, nil) {
		t.Error("after an anonymous pull: every pod may run it")
	}
}
