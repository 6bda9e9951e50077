package prober

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	utilio "k8s.io/utils/io"
)

// userAgent is the User-Agent of HTTP probes unless the probe sets one: the
// kubelet's, for the Kubernetes minor version whose semantics podsync
// follows.
const userAgent = "kube-probe/1.37"

// maxRedirects is how many same-host redirects an HTTP probe follows.
const maxRedirects = 10

// newTransport returns the transport of HTTP probes, as the kubelet's: no
// proxy, no keep-alive (each probe is a new connection, as a client's
// would be), no compression, and no verification of the server's
// certificate (a probe checks that the container answers, not who it is).
func newTransport(dial func(ctx context.Context, network, address string) (net.Conn, error)) *http.Transport {
	return &http.Transport{
		Proxy:               nil,
		DialContext:         dial,
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true},
		TLSHandshakeTimeout: 10 * time.Second,
		DisableKeepAlives:   true,
		DisableCompression:  true,
		ForceAttemptHTTP2:   true,
	}
}

// httpProbe sends GET scheme://host:port/path with the probe's headers: a
// status in [200, 400) is success, any other status or error (refused,
// timed out) failure. Redirects are followed to the same host only; a
// redirect elsewhere ends the probe with a warning, which counts as
// success (the kubelet's DoHTTPProbe with followNonLocalRedirects off).
func (p *prober) httpProbe(ctx context.Context, action *corev1.HTTPGetAction, t target, timeout time.Duration) (outcome, string, error) {
	req, err := newHTTPRequest(ctx, action, t)
	if err != nil {
		return outcomeUnknown, "", err
	}
	client := &http.Client{
		Transport:     p.transport,
		CheckRedirect: checkRedirect,
		Timeout:       timeout,
	}
	return doHTTP(client, req)
}

// newHTTPRequest builds the probe's request (the kubelet's
// NewRequestForHTTPGetAction). A Host header sets the request's Host.
func newHTTPRequest(ctx context.Context, action *corev1.HTTPGetAction, t target) (*http.Request, error) {
	scheme := strings.ToLower(string(action.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	host := action.Host
	if host == "" {
		host = t.host
	}
	port, err := resolvePort(action.Port, t.container)
	if err != nil {
		return nil, err
	}
	addr, err := hostPort(host, port)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(action.Path)
	if err != nil {
		// A path that does not parse is sent as it is, as the kubelet
		// does: too late to reject it.
		u = &url.URL{Path: action.Path}
	}
	u.Scheme = scheme
	u.Host = addr
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("http probe request: %w", err)
	}
	headers := make(http.Header, len(action.HTTPHeaders)+2)
	for _, h := range action.HTTPHeaders {
		headers.Add(h.Name, h.Value)
	}
	if _, ok := headers["User-Agent"]; !ok {
		headers.Set("User-Agent", userAgent)
	}
	if _, ok := headers["Accept"]; !ok {
		headers.Set("Accept", "*/*")
	} else if headers.Get("Accept") == "" {
		// An Accept header set to nothing removes it.
		headers.Del("Accept")
	}
	req.Header = headers
	req.Host = headers.Get("Host")
	return req, nil
}

// doHTTP sends req and judges the response. At most maxOutputBytes of the
// body are read; a longer body is not an error.
func doHTTP(client *http.Client, req *http.Request) (outcome, string, error) {
	res, err := client.Do(req)
	if err != nil {
		// A transport error (a timeout too) is a failure, not an error.
		return outcomeFailure, err.Error(), nil
	}
	defer func() { _ = res.Body.Close() }()
	b, err := utilio.ReadAtMost(res.Body, maxOutputBytes)
	if err != nil && !errors.Is(err, utilio.ErrLimitReached) {
		return outcomeFailure, "", fmt.Errorf("read http probe response: %w", err)
	}
	body := string(b)
	switch {
	case res.StatusCode >= http.StatusMultipleChoices && res.StatusCode < http.StatusBadRequest:
		// Only a redirect checkRedirect did not follow ends here.
		return outcomeWarning, "Probe terminated redirects, Response body: " + body, nil
	case res.StatusCode >= http.StatusOK && res.StatusCode < http.StatusMultipleChoices:
		return outcomeSuccess, body, nil
	default:
		// The body stays out of the output, as in the kubelet
		// (kubernetes#99425): it may hold anything.
		return outcomeFailure, fmt.Sprintf("HTTP probe failed with statuscode: %d", res.StatusCode), nil
	}
}

// checkRedirect follows redirects to the first request's host name only,
// up to maxRedirects (the kubelet's RedirectChecker).
func checkRedirect(req *http.Request, via []*http.Request) error {
	if req.URL.Hostname() != via[0].URL.Hostname() {
		return http.ErrUseLastResponse
	}
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	return nil
}
