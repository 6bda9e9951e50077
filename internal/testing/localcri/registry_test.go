package localcri

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

func TestRegistry(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	reg, err := StartRegistry(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := reg.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	imgs, err := buildImages(testInputs)
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Push(ctx, "busybox:local", imgs[1].img); err != nil {
		t.Fatalf("Push: %v", err)
	}
	want, _ := imgs[1].img.Digest()

	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	fetch := func(ctx context.Context, repoTag string) error {
		ref, err := name.ParseReference(reg.Ref(repoTag), name.Insecure)
		if err != nil {
			return err
		}
		// No retries: the failures are injected on purpose.
		img, err := remote.Image(ref, remote.WithContext(ctx), remote.WithTransport(tr), remote.WithRetryStatusCodes())
		if err != nil {
			return err
		}
		got, err := img.Digest()
		if err != nil {
			return err
		}
		if got != want {
			t.Errorf("digest = %s, want %s", got, want)
		}
		layers, err := img.Layers()
		if err != nil {
			return err
		}
		rc, err := layers[0].Compressed()
		if err != nil {
			return err
		}
		return rc.Close()
	}
	statusOf := func(err error) int {
		var te *transport.Error
		if errors.As(err, &te) {
			return te.StatusCode
		}
		return 0
	}

	reg.ResetCounters()
	if err := fetch(ctx, "busybox:local"); err != nil {
		t.Fatalf("fetch: %v", err)
	}
	if n := reg.Requests(); n.Manifests == 0 || n.Failed != 0 {
		t.Errorf("requests after a fetch = %+v", n)
	}

	reg.FailManifests(http.StatusInternalServerError)
	if err := fetch(ctx, "busybox:local"); statusOf(err) != http.StatusInternalServerError {
		t.Errorf("fetch with failing manifests: %v, want status 500", err)
	}
	reg.FailManifests(http.StatusNotFound)
	if err := fetch(ctx, "busybox:local"); statusOf(err) != http.StatusNotFound {
		t.Errorf("fetch with missing manifests: %v, want status 404", err)
	}
	if reg.Requests().Failed < 2 {
		t.Errorf("failed requests = %d, want at least 2", reg.Requests().Failed)
	}
	reg.Reset()
	reg.FailBlobs(http.StatusInternalServerError)
	if err := fetch(ctx, "busybox:local"); err == nil {
		t.Error("fetch with failing blobs succeeded")
	}
	reg.Reset()

	reg.SetDelay(time.Minute)
	sctx, scancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err = fetch(sctx, "busybox:local")
	scancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("fetch from a slow registry: %v, want a deadline error", err)
	}
	reg.Reset()
	if err := fetch(ctx, "busybox:local"); err != nil {
		t.Errorf("fetch after Reset: %v", err)
	}
	if err := fetch(ctx, "absent:none"); statusOf(err) != http.StatusNotFound {
		t.Errorf("fetch of an absent image: %v, want status 404", err)
	}
}

func TestRequestKind(t *testing.T) {
	for path, want := range map[string]string{
		"/v2/":                                   "",
		"/v2/busybox/manifests/local":            "manifests",
		"/v2/library/busybox/manifests/sha256:x": "manifests",
		"/v2/busybox/blobs/sha256:abc":           "blobs",
		"/v2/busybox/blobs/uploads/":             "",
		"/other":                                 "",
	} {
		if got := requestKind(path); got != want {
			t.Errorf("requestKind(%q) = %q, want %q", path, got, want)
		}
	}
}

// TestRegistryBasicAuth: a protected repository answers 401 with a Basic
// challenge without credentials or with wrong ones, serves with the right
// ones, and leaves the other repositories open; Push authenticates.
func TestRegistryBasicAuth(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	reg, err := StartRegistry(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close(context.Background()) })
	imgs, err := buildImages(testInputs)
	if err != nil {
		t.Fatal(err)
	}
	reg.RequireBasicAuth("private/", "puller", "s3cret")
	for _, tag := range []string{"private/busybox:v1", "public/busybox:v1"} {
		if err := reg.Push(ctx, tag, imgs[1].img); err != nil {
			t.Fatalf("Push %s: %v", tag, err)
		}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	get := func(repoTag string, auth authn.Authenticator) error {
		ref, err := name.ParseReference(reg.Ref(repoTag), name.Insecure)
		if err != nil {
			return err
		}
		_, err = remote.Image(ref, remote.WithContext(ctx), remote.WithTransport(tr), remote.WithAuth(auth), remote.WithRetryStatusCodes())
		return err
	}
	var te *transport.Error
	if err := get("private/busybox:v1", authn.Anonymous); !errors.As(err, &te) || te.StatusCode != http.StatusUnauthorized {
		t.Errorf("anonymous fetch of the private image: %v, want 401", err)
	}
	if err := get("private/busybox:v1", &authn.Basic{Username: "puller", Password: "wrong"}); !errors.As(err, &te) || te.StatusCode != http.StatusUnauthorized {
		t.Errorf("fetch with a wrong password: %v, want 401", err)
	}
	if err := get("private/busybox:v1", &authn.Basic{Username: "puller", Password: "s3cret"}); err != nil {
		t.Errorf("fetch with the credentials: %v", err)
	}
	if err := get("public/busybox:v1", authn.Anonymous); err != nil {
		t.Errorf("anonymous fetch of the public image: %v", err)
	}
}
