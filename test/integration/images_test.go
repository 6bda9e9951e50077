//go:build integration

package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/internal/testing/localcri"
)

func TestLocalImagesAreImported(t *testing.T) {
	ctx := testContext(t)
	out, err := inst.CtrCommand("images", "ls", "-q").CombinedOutput()
	if err != nil {
		t.Fatalf("ctr images ls: %v: %s", err, out)
	}
	for _, ref := range []string{localcri.PauseImage, localcri.BusyboxImage} {
		if !slices.Contains(strings.Fields(string(out)), ref) {
			t.Errorf("ctr images ls lacks %s:\n%s", ref, out)
		}
	}

	crictl, err := localcri.EnsureCrictl(ctx, inst.ToolsDir())
	if err != nil {
		t.Fatalf("install crictl: %v", err)
	}
	hint := inst.CrictlHint()
	if !strings.HasPrefix(hint, crictl+" ") {
		t.Errorf("CrictlHint() = %q, want it to start with %s", hint, crictl)
	}
	args := append(strings.Fields(hint)[1:], "images")
	out, err = exec.CommandContext(ctx, crictl, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s images: %v: %s", hint, err, out)
	}
	for _, repo := range []string{"registry.local/pause", "registry.local/busybox"} {
		if !strings.Contains(string(out), repo) {
			t.Errorf("crictl images lacks %s:\n%s", repo, out)
		}
	}
}

// pushFreshImage pushes to the instance's registry a new image (busybox plus
// a random layer), so that pulling it fetches blobs, and returns its
// reference.
func pushFreshImage(ctx context.Context, t *testing.T, rt enginetest.Runtime) string {
	t.Helper()
	imgs, err := localcri.LayoutImages(inst.Images().Layout)
	if err != nil {
		t.Fatal(err)
	}
	layer, err := random.Layer(4096, types.OCILayer)
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(imgs[localcri.BusyboxImage], layer)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	repoTag := "fresh-" + hex.EncodeToString(b) + ":v1"
	if err := inst.Registry().Push(ctx, repoTag, img); err != nil {
		t.Fatal(err)
	}
	ref := inst.Registry().Ref(repoTag)
	t.Cleanup(func() {
		_ = rt.RemoveImage(context.Background(), &runtimeapi.ImageSpec{Image: ref})
	})
	return ref
}

func TestPullFromLocalRegistry(t *testing.T) {
	ctx := testContext(t)
	rt := newRuntime(t)
	reg := inst.Registry()
	reg.Reset()
	ref := pushFreshImage(ctx, t, rt)
	reg.ResetCounters()

	imageRef, err := rt.PullImage(ctx, &runtimeapi.ImageSpec{Image: ref}, nil, nil)
	if err != nil {
		t.Fatalf("PullImage %s: %v", ref, err)
	}
	if n := reg.Requests(); n.Manifests == 0 || n.Blobs == 0 {
		t.Errorf("registry requests = %+v, want manifest and blob requests", n)
	}
	st, err := rt.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: ref}, false)
	if err != nil || st.GetImage() == nil {
		t.Fatalf("ImageStatus %s = %v, %v; want the image", ref, st.GetImage(), err)
	}
	if st.GetImage().GetId() != imageRef {
		t.Errorf("image id = %s, want the pulled ref %s", st.GetImage().GetId(), imageRef)
	}

	// The pulled image runs.
	h := enginetest.NewHarness(t, rt)
	pod := h.PodConfig("")
	podID := h.RunPod(pod)
	cfg := h.ContainerConfig("pulled", 0, "/bin/sh", "-c", "echo ok; exit 0")
	cfg.Image = &runtimeapi.ImageSpec{Image: ref}
	id := h.Run(podID, pod, cfg)
	if cs := h.WaitState(id, runtimeapi.ContainerState_CONTAINER_EXITED); cs.ExitCode != 0 {
		t.Errorf("container from the pulled image exited %d, want 0", cs.ExitCode)
	}

	// registry.local/… names are pulled from the same registry.
	reg.ResetCounters()
	if _, err := rt.PullImage(ctx, &runtimeapi.ImageSpec{Image: localcri.BusyboxImage}, nil, nil); err != nil {
		t.Fatalf("PullImage %s: %v", localcri.BusyboxImage, err)
	}
	if reg.Requests().Manifests == 0 {
		t.Errorf("pull of %s did not reach the local registry", localcri.BusyboxImage)
	}
}

func TestPullFailsWhenRegistryFails(t *testing.T) {
	ctx := testContext(t)
	rt := newRuntime(t)
	reg := inst.Registry()
	t.Cleanup(reg.Reset)
	for _, c := range []struct {
		name     string
		fail     func()
		wantCode codes.Code // codes.OK: any error
	}{
		{"manifest 500", func() { reg.FailManifests(http.StatusInternalServerError) }, codes.OK},
		{"manifest 404", func() { reg.FailManifests(http.StatusNotFound) }, codes.NotFound},
		{"blob 500", func() { reg.FailBlobs(http.StatusInternalServerError) }, codes.OK},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg.Reset()
			ref := pushFreshImage(ctx, t, rt)
			reg.ResetCounters()
			c.fail()
			_, err := rt.PullImage(ctx, &runtimeapi.ImageSpec{Image: ref}, nil, nil)
			if err == nil {
				t.Fatalf("PullImage %s succeeded, want a failure", ref)
			}
			t.Logf("pull error: %v", err)
			if c.wantCode != codes.OK && status.Code(err) != c.wantCode {
				t.Errorf("PullImage error code = %s, want %s", status.Code(err), c.wantCode)
			}
			if reg.Requests().Failed == 0 {
				t.Errorf("registry answered no request with the failure: %+v", reg.Requests())
			}
			if st, err := rt.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: ref}, false); err != nil || st.GetImage() != nil {
				t.Errorf("ImageStatus after a failed pull = %v, %v; want no image", st.GetImage(), err)
			}
			// Once the registry recovers, the same pull succeeds.
			reg.Reset()
			if _, err := rt.PullImage(ctx, &runtimeapi.ImageSpec{Image: ref}, nil, nil); err != nil {
				t.Errorf("PullImage after recovery: %v", err)
			}
		})
	}
}

func TestPullFromSlowRegistry(t *testing.T) {
	ctx := testContext(t)
	rt := newRuntime(t)
	reg := inst.Registry()
	t.Cleanup(reg.Reset)
	reg.Reset()
	ref := pushFreshImage(ctx, t, rt)
	reg.SetDelay(time.Minute)
	pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	_, err := rt.PullImage(pctx, &runtimeapi.ImageSpec{Image: ref}, nil, nil)
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("PullImage from a registry slower than the deadline: %v, want DeadlineExceeded", err)
	}
	reg.SetDelay(10 * time.Millisecond)
	if _, err := rt.PullImage(ctx, &runtimeapi.ImageSpec{Image: ref}, nil, nil); err != nil {
		t.Errorf("PullImage from a slightly slow registry: %v", err)
	}
}
