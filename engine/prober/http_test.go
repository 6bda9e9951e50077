package prober

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// testServer is an httptest server on 127.0.0.1 whose paths answer:
//
//	/status/<code>   with that status and body "body-<code>"
//	/to/<path>       302 to /<path> on the same server
//	/elsewhere       302 to a host that must not be contacted
//	/loop            302 to itself
//	/big             200 with 20 KiB of body
//	/hang            nothing until the client gives up
type testServer struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []*http.Request
}

func newTestServer(t *testing.T, tls bool) *testServer {
	t.Helper()
	s := &testServer{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.reqs = append(s.reqs, r.Clone(r.Context()))
		s.mu.Unlock()
		switch p := r.URL.Path; {
		case strings.HasPrefix(p, "/status/"):
			code, err := strconv.Atoi(strings.TrimPrefix(p, "/status/"))
			if err != nil {
				code = http.StatusBadRequest
			}
			w.WriteHeader(code)
			_, _ = fmt.Fprintf(w, "body-%d", code)
		case strings.HasPrefix(p, "/to/"):
			http.Redirect(w, r, strings.TrimPrefix(p, "/to"), http.StatusFound)
		case p == "/elsewhere":
			http.Redirect(w, r, "http://probe-target.invalid/healthz", http.StatusFound)
		case p == "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		case p == "/big":
			_, _ = w.Write([]byte(strings.Repeat("x", 20<<10)))
		case p == "/hang":
			<-r.Context().Done()
		default:
			http.NotFound(w, r)
		}
	})
	if tls {
		s.Server = httptest.NewTLSServer(h)
	} else {
		s.Server = httptest.NewServer(h)
	}
	t.Cleanup(s.Close)
	return s
}

func (s *testServer) port(t *testing.T) int {
	t.Helper()
	return portOf(t, s.URL)
}

// portOf returns the port of a test server's URL, which must be on
// 127.0.0.1.
func portOf(t *testing.T, rawURL string) int {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	if u.Hostname() != "127.0.0.1" {
		t.Fatalf("test server on %s, not 127.0.0.1", u.Host)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	return port
}

func (s *testServer) requests() []*http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*http.Request(nil), s.reqs...)
}

func TestHTTPProbeStatus(t *testing.T) {
	srv := newTestServer(t, false)
	other := newTestServer(t, false)
	// hop redirects to other: same host name, another port.
	hop := httptest.NewServer(http.RedirectHandler(other.URL+"/status/200", http.StatusFound))
	t.Cleanup(hop.Close)
	dialer := &loopbackOnly{}
	p := newTestProber(t, Options{DialContext: dialer.DialContext})
	c := &corev1.Container{Name: "c"}
	tests := []struct {
		path       string
		port       int // srv's when zero
		want       outcome
		wantOutput string
	}{
		{path: "/status/200", want: outcomeSuccess, wantOutput: "body-200"},
		{path: "/status/204", want: outcomeSuccess},
		{path: "/status/299", want: outcomeSuccess, wantOutput: "body-299"},
		{path: "/status/399", want: outcomeWarning, wantOutput: "Probe terminated redirects, Response body: body-399"},
		{path: "/status/400", want: outcomeFailure, wantOutput: "HTTP probe failed with statuscode: 400"},
		{path: "/status/404", want: outcomeFailure, wantOutput: "HTTP probe failed with statuscode: 404"},
		{path: "/status/500", want: outcomeFailure, wantOutput: "HTTP probe failed with statuscode: 500"},
		{path: "/status/503", want: outcomeFailure, wantOutput: "HTTP probe failed with statuscode: 503"},
		// Same-host redirects are followed; the last answer decides.
		{path: "/to/status/200", want: outcomeSuccess, wantOutput: "body-200"},
		{path: "/to/status/500", want: outcomeFailure, wantOutput: "HTTP probe failed with statuscode: 500"},
		// The same host name on another port is the same host.
		{path: "/hop", port: portOf(t, hop.URL), want: outcomeSuccess, wantOutput: "body-200"},
		// Elsewhere is not followed, and counts as success with a warning.
		{path: "/elsewhere", want: outcomeWarning},
		{path: "/loop", want: outcomeFailure},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			port := tt.port
			if port == 0 {
				port = srv.port(t)
			}
			action := &corev1.HTTPGetAction{Path: tt.path, Port: portInt(port)}
			o, out, err := p.httpProbe(t.Context(), action, target{container: c, host: "127.0.0.1"}, 5*time.Second)
			if err != nil || o != tt.want {
				t.Fatalf("httpProbe = (%d, %q, %v), want outcome %d", o, out, err, tt.want)
			}
			if tt.wantOutput != "" && out != tt.wantOutput {
				t.Fatalf("output = %q, want %q", out, tt.wantOutput)
			}
		})
	}
	for _, a := range dialer.addresses() {
		if !strings.HasPrefix(a, "127.0.0.1:") {
			t.Fatalf("dialled %s", a)
		}
	}
	for _, r := range srv.requests() {
		if r.URL.Path == "/healthz" {
			t.Fatal("the redirect to another host was followed")
		}
	}
}

func TestHTTPProbeRequest(t *testing.T) {
	srv := newTestServer(t, false)
	p := newTestProber(t, Options{})
	c := &corev1.Container{Name: "c", Ports: []corev1.ContainerPort{{Name: "web", ContainerPort: int32(srv.port(t))}}}

	action := &corev1.HTTPGetAction{
		Path:   "/status/200?verbose=1",
		Port:   intstr.FromString("web"),
		Scheme: "HTTP",
		HTTPHeaders: []corev1.HTTPHeader{
			{Name: "x-probe", Value: "a"},
			{Name: "X-Probe", Value: "b"},
			{Name: "Host", Value: "app.example"},
		},
	}
	if o, out, err := p.httpProbe(t.Context(), action, target{container: c, host: "127.0.0.1"}, 5*time.Second); o != outcomeSuccess || err != nil {
		t.Fatalf("httpProbe = (%d, %q, %v), want success", o, out, err)
	}
	reqs := srv.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Method != http.MethodGet || r.URL.Path != "/status/200" || r.URL.RawQuery != "verbose=1" {
		t.Errorf("request = %s %s?%s, want GET /status/200?verbose=1", r.Method, r.URL.Path, r.URL.RawQuery)
	}
	if r.Host != "app.example" {
		t.Errorf("Host = %q, want app.example", r.Host)
	}
	if got := r.Header.Values("X-Probe"); strings.Join(got, ",") != "a,b" {
		t.Errorf("X-Probe = %q, want [a b]", got)
	}
	if got := r.Header.Get("User-Agent"); got != "kube-probe/1.37" {
		t.Errorf("User-Agent = %q, want kube-probe/1.37", got)
	}
	if got := r.Header.Get("Accept"); got != "*/*" {
		t.Errorf("Accept = %q, want */*", got)
	}
	if got := r.Header.Get("Accept-Encoding"); got != "" {
		t.Errorf("Accept-Encoding = %q, want none", got)
	}

	// A probe's own User-Agent is kept, and an empty Accept removes it.
	action.HTTPHeaders = []corev1.HTTPHeader{{Name: "User-Agent", Value: "mine"}, {Name: "Accept", Value: ""}}
	if o, _, err := p.httpProbe(t.Context(), action, target{container: c, host: "127.0.0.1"}, 5*time.Second); o != outcomeSuccess || err != nil {
		t.Fatalf("httpProbe = (%d, %v), want success", o, err)
	}
	r = srv.requests()[1]
	if got := r.Header.Get("User-Agent"); got != "mine" {
		t.Errorf("User-Agent = %q, want mine", got)
	}
	if _, ok := r.Header["Accept"]; ok {
		t.Errorf("Accept = %q, want none", r.Header.Get("Accept"))
	}
	if r.Host != "127.0.0.1:"+strconv.Itoa(srv.port(t)) {
		t.Errorf("Host = %q, want the address", r.Host)
	}
}

func TestHTTPSProbe(t *testing.T) {
	srv := newTestServer(t, true)
	p := newTestProber(t, Options{})
	action := &corev1.HTTPGetAction{Path: "/status/200", Port: portInt(srv.port(t)), Scheme: corev1.URISchemeHTTPS}
	// The server's certificate is not verified, as in the kubelet.
	if o, out, err := p.httpProbe(t.Context(), action, target{container: &corev1.Container{}, host: "127.0.0.1"}, 5*time.Second); o != outcomeSuccess || err != nil {
		t.Fatalf("httpProbe = (%d, %q, %v), want success", o, out, err)
	}
}

func TestHTTPProbeTimeout(t *testing.T) {
	srv := newTestServer(t, false)
	p := newTestProber(t, Options{})
	action := &corev1.HTTPGetAction{Path: "/hang", Port: portInt(srv.port(t))}
	start := time.Now()
	o, out, err := p.httpProbe(t.Context(), action, target{container: &corev1.Container{}, host: "127.0.0.1"}, 100*time.Millisecond)
	if o != outcomeFailure || err != nil {
		t.Fatalf("httpProbe = (%d, %q, %v), want a failure", o, out, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("probe took %s with a 100ms timeout", d)
	}
}

func TestHTTPProbeBody(t *testing.T) {
	srv := newTestServer(t, false)
	p := newTestProber(t, Options{})
	action := &corev1.HTTPGetAction{Path: "/big", Port: portInt(srv.port(t))}
	o, out, err := p.httpProbe(t.Context(), action, target{container: &corev1.Container{}, host: "127.0.0.1"}, 5*time.Second)
	if o != outcomeSuccess || err != nil || len(out) != maxOutputBytes {
		t.Fatalf("httpProbe = (%d, %d bytes, %v), want success with %d bytes", o, len(out), err, maxOutputBytes)
	}
}

func TestHTTPProbeErrors(t *testing.T) {
	p := newTestProber(t, Options{})
	c := &corev1.Container{Name: "c"}
	if _, _, err := p.httpProbe(t.Context(), &corev1.HTTPGetAction{Port: intstr.FromString("web")}, target{container: c, host: "127.0.0.1"}, time.Second); err == nil {
		t.Error("unknown port name: no error")
	}
	if _, _, err := p.httpProbe(t.Context(), &corev1.HTTPGetAction{Port: portInt(80)}, target{container: c}, time.Second); err == nil {
		t.Error("no host: no error")
	}
	// A refused connection is a failure, not an error.
	o, _, err := p.httpProbe(t.Context(), &corev1.HTTPGetAction{Port: portInt(closedPort(t))}, target{container: c, host: "127.0.0.1"}, time.Second)
	if o != outcomeFailure || err != nil {
		t.Errorf("closed port: (%d, %v), want a failure", o, err)
	}
}
