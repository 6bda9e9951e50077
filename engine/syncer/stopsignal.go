package syncer

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine/errdefs"
)

// checkStopSignal makes sure the runtime honours the lifecycle.stopSignal
// the container id of c was created with (sig; none: nothing to check).
// A runtime that knows the field reports the signal in the container's
// status (containerd 2.1 and later, as the kubelet reads it); one that
// does not (containerd 1.6) reports none and would stop the container with
// the image's signal, so the start is refused with an error wrapping
// ErrInvalidSpec that says so.
func (p *pass) checkStopSignal(ctx context.Context, c *corev1.Container, id string, sig runtimeapi.Signal) error {
	if sig == runtimeapi.Signal_SIGNAL_RUNTIME_DEFAULT {
		return nil
	}
	resp, err := p.s.rt.ContainerStatus(ctx, id, false)
	if err != nil {
		return fmt.Errorf("container %q: read the stop signal the runtime gave it: %w", c.Name, err)
	}
	if got := resp.GetStatus().GetStopSignal(); got != sig {
		name := string(*c.Lifecycle.StopSignal)
		if got == runtimeapi.Signal_SIGNAL_RUNTIME_DEFAULT {
			return fmt.Errorf("container %q: the runtime ignores lifecycle.stopSignal %s and would stop the container with the image's signal: "+
				"run containerd 2.1 or later, or remove stopSignal (set STOPSIGNAL in the image instead): %w", c.Name, name, errdefs.ErrInvalidSpec)
		}
		return fmt.Errorf("container %q: the runtime set stop signal %s, not lifecycle.stopSignal %s: %w",
			c.Name, strings.TrimPrefix(got.String(), "SIGNAL_"), name, errdefs.ErrInvalidSpec)
	}
	return nil
}
