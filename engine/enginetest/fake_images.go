package enginetest

import (
	"context"
	"slices"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// imageRef returns the id of a held image, by name or id.
func (r *FakeRuntime) imageRef(name string) (string, bool) {
	r.Images.Lock()
	defer r.Images.Unlock()
	if img, ok := r.Images.Images[name]; ok {
		return img.Id, true
	}
	for _, img := range r.Images.Images {
		if img.Id == name || slices.Contains(img.RepoTags, name) {
			return img.Id, true
		}
	}
	return "", false
}

// ListImages lists the held images.
func (r *FakeRuntime) ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	return r.Images.ListImages(ctx, filter)
}

// ImageStatus returns a held image, or a nil image when it is not held.
func (r *FakeRuntime) ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec, verbose bool) (*runtimeapi.ImageStatusResponse, error) {
	return r.Images.ImageStatus(ctx, image, verbose)
}

// PullImage adds the image; inject an error to make a pull fail.
func (r *FakeRuntime) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, podSandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	return r.Images.PullImage(ctx, image, auth, podSandboxConfig)
}

// RemoveImage removes an image.
func (r *FakeRuntime) RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error {
	return r.Images.RemoveImage(ctx, image)
}

// ImageFsInfo returns the fake filesystem usage.
func (r *FakeRuntime) ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	return r.Images.ImageFsInfo(ctx)
}
