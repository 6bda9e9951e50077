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
	"github.com/podsync/podsync/engine/model"
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
				h.Exec.Command, t.name, model.PodString(t.pod), err, out), fmt.Errorf("exec hook %v: %w", h.Exec.Command, err)
		}
		return "", nil
	case h.HTTPGet != nil:
		if err := s.runHTTPHook(ctx, t, h.HTTPGet); err != nil {
			return fmt.Sprintf("HTTP lifecycle hook (%s) for Container %q in Pod %q failed - error: %v",
				h.HTTPGet.Path, t.name, model.PodString(t.pod), err), err
		}
		return "", nil
	case h.Sleep != nil:
		// The kubelet's runSleepHandler; a preStop's ctx ends with the
		// grace period.
		select {
		case <-s.clock.After(time.Duration(h.Sleep.Seconds) * time.Second):
			return "", nil
		case <-ctx.Done():
			err := errors.New("container terminated before sleep hook finished")
			return fmt.Sprintf("Sleep lifecycle hook (%d) for Container %q in Pod %q failed - error: %v",
				h.Sleep.Seconds, t.name, model.PodString(t.pod), err), fmt.Errorf("sleep hook: %w", err)
		}
	}
	err := fmt.Errorf("lifecycle handler of container %q has no exec, httpGet or sleep action: %w", t.name, errdefs.ErrInvalidSpec)
	return "Cannot run handler: " + err.Error(), err
}

// runHTTPHook is the kubelet's runHTTPHandler: a GET to the pod (or the
// handler's host); only a failed request is an error, not the status code.
// An HTTPS request answered in plain HTTP is sent again over HTTP, without
// an Authorization header, as the kubelet's fallback does.
func (s *Syncer) runHTTPHook(ctx context.Context, t hookTarget, h *corev1.HTTPGetAction) error {
	req, err := hookRequest(ctx, t, h)
	if err != nil {
		return err
	}
	err = doHookRequest(req)
	if err != nil && req.URL.Scheme == "https" && isHTTPResponseError(err) {
		plain := req.Clone(ctx)
		plain.URL.Scheme = "http"
		plain.Header.Del("Authorization")
		if perr := doHookRequest(plain); perr == nil {
			return nil
		}
	}
	return err
}

// isHTTPResponseError reports whether err is the error of an HTTPS request
// that got a plain HTTP answer (the kubelet's isHTTPResponseError).
func isHTTPResponseError(err error) bool {
	var uerr *url.Error
	if !errors.As(err, &uerr) {
		return false
	}
	return strings.Contains(uerr.Err.Error(), "server gave HTTP response to HTTPS client")
}

// doHookRequest sends req and drains the start of the answer.
func doHookRequest(req *http.Request) error {
	resp, err := hookHTTPClient.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 10*1024))
	return resp.Body.Close()
}

// hookRequest is the kubelet's NewRequestForHTTPGetAction for a hook: the
// host defaults to the pod's first IP, the port may be a container port's
// name, the handler's headers are sent (a Host header sets the request's
// host), with User-Agent kube-lifecycle and Accept */* unless they set
// them.
func hookRequest(ctx context.Context, t hookTarget, h *corev1.HTTPGetAction) (*http.Request, error) {
	host := h.Host
	if host == "" {
		if len(t.podIPs) == 0 {
			return nil, errors.New("pod has no IP for the httpGet hook")
		}
		host = t.podIPs[0]
	}
	port, err := resolvePort(h.Port, t.ports)
	if err != nil {
		return nil, err
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
		return nil, fmt.Errorf("hook url: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	for _, hd := range h.HTTPHeaders {
		if strings.EqualFold(hd.Name, "Host") {
			req.Host = hd.Value
			continue
		}
		req.Header.Add(hd.Name, hd.Value)
	}
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header.Set("User-Agent", "kube-lifecycle/podsync")
	}
	if _, ok := req.Header["Accept"]; !ok {
		req.Header.Set("Accept", "*/*")
	} else if req.Header.Get("Accept") == "" {
		req.Header.Del("Accept")
	}
	return req, nil
}

// hookHTTPClient is the client of httpGet hooks; requests are bounded by
// their context. Like the kubelet's, it uses no proxy, does not verify
// the pod's certificate (the pod is addressed by IP) and follows
// redirects to the same host only (httpprobe.RedirectChecker(false)).
var hookHTTPClient = &http.Client{
	Transport: &http.Transport{
		DisableKeepAlives: true,
		Proxy:             nil,
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
	},
	CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if req.URL.Hostname() != via[0].URL.Hostname() {
			return http.ErrUseLastResponse
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
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
