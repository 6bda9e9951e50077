package syncer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/plan"
)

// hookTarget is what a lifecycle handler runs against.
type hookTarget struct {
	pod         *corev1.Pod
	name        string
	containerID string
	// ports are the container's, for named httpGet ports.
	ports []corev1.ContainerPort
	// podIPs are the pod's, for httpGet without a host.
	podIPs []string
}

// runHook runs a lifecycle handler as the kubelet's handlerRunner does:
// exec through CRI ExecSync (timeout is passed to the runtime; zero means
// none), httpGet from the node to the pod, sleep on the syncer's clock. It
// returns the kubelet's message on failure. ctx bounds it.
func (s *Syncer) runHook(ctx context.Context, t hookTarget, h *corev1.LifecycleHandler, timeout time.Duration) (string, error) {
	switch {
	case h.Exec != nil:
		stdout, stderr, err := s.rt.ExecSync(ctx, t.containerID, h.Exec.Command, timeout)
		if err != nil {
			out := string(stdout) + string(stderr)
			return fmt.Sprintf("Exec lifecycle hook (%v) for Container %q in Pod %q failed - error: %v, message: %q",
				h.Exec.Command, t.name, plan.PodString(t.pod), err, out), fmt.Errorf("exec hook %v: %w", h.Exec.Command, err)
		}
		return "", nil
	case h.HTTPGet != nil:
		if err := s.runHTTPHook(ctx, t, h.HTTPGet); err != nil {
			return fmt.Sprintf("HTTP lifecycle hook (%s) for Container %q in Pod %q failed - error: %v",
				h.HTTPGet.Path, t.name, plan.PodString(t.pod), err), err
		}
		return "", nil
	case h.Sleep != nil:
		select {
		case <-s.clock.After(time.Duration(h.Sleep.Seconds) * time.Second):
			return "", nil
		case <-ctx.Done():
			return fmt.Sprintf("Sleep lifecycle hook for Container %q in Pod %q was interrupted", t.name, plan.PodString(t.pod)),
				fmt.Errorf("sleep hook: %w", context.Cause(ctx))
		}
	}
	err := fmt.Errorf("lifecycle handler of container %q has no exec, httpGet or sleep action: %w", t.name, errdefs.ErrInvalidSpec)
	return err.Error(), err
}

// runHTTPHook is the kubelet's runHTTPHandler: a GET to the pod (or the
// handler's host); only a failed request is an error, not the status code.
func (s *Syncer) runHTTPHook(ctx context.Context, t hookTarget, h *corev1.HTTPGetAction) error {
	host := h.Host
	if host == "" {
		if len(t.podIPs) == 0 {
			return errors.New("pod has no IP for the httpGet hook")
		}
		host = t.podIPs[0]
	}
	port, err := resolvePort(h.Port, t.ports)
	if err != nil {
		return err
	}
	scheme := strings.ToLower(string(h.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	path := h.Path
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	u := &url.URL{Scheme: scheme, Host: net.JoinHostPort(host, strconv.Itoa(port))}
	u, err = u.Parse(path)
	if err != nil {
		return fmt.Errorf("hook url: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	for _, hd := range h.HTTPHeaders {
		if strings.EqualFold(hd.Name, "Host") {
			req.Host = hd.Value
			continue
		}
		req.Header.Add(hd.Name, hd.Value)
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "kube-lifecycle/podsync")
	}
	resp, err := hookHTTPClient.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 10*1024))
	return resp.Body.Close()
}

// hookHTTPClient is the client of httpGet hooks; requests are bounded by
// their context. Like the kubelet's, it uses no proxy and does not verify
// the pod's certificate: the pod is addressed by IP.
var hookHTTPClient = &http.Client{
	Transport: &http.Transport{
		DisableKeepAlives: true,
		Proxy:             nil,
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
	},
}

// resolvePort is the kubelet's resolvePort: a number, or a container port
// name.
func resolvePort(p intstr.IntOrString, ports []corev1.ContainerPort) (int, error) {
	if p.Type == intstr.Int {
		return p.IntValue(), nil
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil {
		return n, nil
	}
	for _, cp := range ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("couldn't find port %q in container ports: %w", p.StrVal, errdefs.ErrInvalidSpec)
}
