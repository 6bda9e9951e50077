package enginetest

import (
	"slices"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func testImages(t *testing.T, h *Harness) {
	ref, err := h.RT.PullImage(h.Ctx, &runtimeapi.ImageSpec{Image: ConformanceImage}, nil, nil)
	if err != nil {
		t.Fatalf("PullImage: %v", err)
	}
	if ref == "" {
		t.Error("PullImage returned no image ref")
	}
	st, err := h.RT.ImageStatus(h.Ctx, &runtimeapi.ImageSpec{Image: ConformanceImage}, false)
	if err != nil {
		t.Fatalf("ImageStatus: %v", err)
	}
	if st.GetImage() == nil || !slices.Contains(st.GetImage().GetRepoTags(), ConformanceImage) {
		t.Errorf("ImageStatus = %v, want the image tagged %s", st.GetImage(), ConformanceImage)
	}
	// containerd ignores ListImages' filter: list everything.
	imgs, err := h.RT.ListImages(h.Ctx, nil)
	if err != nil {
		t.Fatalf("ListImages: %v", err)
	}
	if !slices.ContainsFunc(imgs, func(img *runtimeapi.Image) bool { return slices.Contains(img.RepoTags, ConformanceImage) }) {
		t.Errorf("ListImages lacks %s", ConformanceImage)
	}
	absent, err := h.RT.ImageStatus(h.Ctx, &runtimeapi.ImageSpec{Image: "registry.local/absent:none"}, false)
	if err != nil || absent.GetImage() != nil {
		t.Errorf("ImageStatus of an absent image = %v, %v; want no image and no error", absent.GetImage(), err)
	}
}
