package server_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/errorinfo"
	"github.com/podsync/podsync/internal/testing/testcert"
	"github.com/podsync/podsync/internal/testing/testdaemon"
	"github.com/podsync/podsync/server"
)

// unixHTTP is an HTTP client of the daemon's unix socket; its URLs are
// http://podsync/….
func unixHTTP(t *testing.T, socket string) *http.Client {
	t.Helper()
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// httpCall sends method url with body (JSON unless contentType says
// otherwise) and returns the response with its body read.
func httpCall(ctx context.Context, t *testing.T, c *http.Client, method, url, contentType string, body []byte) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType == "" {
		contentType = "application/json"
	}
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	if strings.Contains(url, "/podsync.v1.PodSyncService/") && strings.HasPrefix(contentType, "application/json") {
		// A Connect unary call says so; without it, the path is REST's.
		req.Header.Set("Connect-Protocol-Version", "1")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read the body: %v", method, url, err)
	}
	return resp, b
}

// restStatus decodes a REST error body, a google.rpc.Status in JSON.
func restStatus(t *testing.T, body []byte) error {
	t.Helper()
	var st spb.Status
	if err := protojson.Unmarshal(body, &st); err != nil {
		t.Fatalf("the error body is not a google.rpc.Status: %v\n%s", err, body)
	}
	return status.FromProto(&st).Err()
}

// connectStatus decodes a Connect error, {"code":"not_found",
// "message":…, "details":[{"type":…,"value":…}]}.
func connectStatus(t *testing.T, body []byte) error {
	t.Helper()
	var e struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Details []struct {
			Type  string `json:"type"`
			Value string `json:"value"`
		} `json:"details"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Code == "" {
		t.Fatalf("not a Connect error (%v):\n%s", err, body)
	}
	st := &spb.Status{Message: e.Message, Code: int32(codes.Unknown)}
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		if strings.ToLower(c.String()) == strings.ReplaceAll(e.Code, "_", "") {
			st.Code = int32(c)
		}
	}
	for _, d := range e.Details {
		v, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(d.Value, "="))
		if err != nil {
			t.Fatalf("detail %s: %v", d.Type, err)
		}
		st.Details = append(st.Details, &anypb.Any{TypeUrl: "type.googleapis.com/" + d.Type, Value: v})
	}
	return status.FromProto(st).Err()
}

// envelope frames a Connect streaming message.
func envelope(flags byte, msg []byte) []byte {
	b := make([]byte, 5, 5+len(msg))
	b[0] = flags
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	return append(b, msg...)
}

// envelopes splits a Connect streaming body into its messages and its
// end-of-stream message.
func envelopes(t *testing.T, body []byte) (msgs [][]byte, end []byte) {
	t.Helper()
	for len(body) > 0 {
		if len(body) < 5 {
			t.Fatalf("a truncated envelope: %q", body)
		}
		n := int(binary.BigEndian.Uint32(body[1:5]))
		if len(body) < 5+n {
			t.Fatalf("a truncated message: %q", body)
		}
		if body[0]&0x02 != 0 {
			end = body[5 : 5+n]
		} else {
			msgs = append(msgs, body[5:5+n])
		}
		body = body[5+n:]
	}
	if end == nil {
		t.Fatal("the stream has no end-of-stream message")
	}
	return msgs, end
}

// streamError is the error of a Connect end-of-stream message, or nil.
func streamError(t *testing.T, end []byte) error {
	t.Helper()
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(end, &e); err != nil {
		t.Fatalf("end of stream %q: %v", end, err)
	}
	if e.Error == nil {
		return nil
	}
	return connectStatus(t, e.Error)
}

// syncToEnd runs pod to its end over gRPC.
func syncToEnd(ctx context.Context, t *testing.T, c podsyncv1.PodSyncServiceClient, pod *podsyncv1.Pod) {
	t.Helper()
	s, err := c.SyncPod(ctx, &podsyncv1.SyncPodRequest{Pod: pod})
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := s.Recv(); errors.Is(err, io.EOF) {
			return
		} else if err != nil {
			t.Fatalf("SyncPod: %v", err)
		}
	}
}

// TestHTTPServesTheAPI: on the unix socket gRPC listens on, the API also
// answers JSON over HTTP/1.1 — REST routes of the google.api.http rules,
// the Connect protocol (unary and server streams) and gRPC-Web — with
// errors as google.rpc.Status carrying the gRPC call's ErrorInfo and field
// violations, and the request id header every call gets.
func TestHTTPServesTheAPI(t *testing.T) {
	d := testdaemon.New(t, testdaemon.Options{})
	ctx := testContext(t)
	syncToEnd(ctx, t, d.Client, testPod(t, "default", "web", nil))
	c := unixHTTP(t, d.Socket)

	t.Run("REST GET", func(t *testing.T) {
		resp, body := httpCall(ctx, t, c, http.MethodGet, "http://podsync/v1/namespaces/default/pods/web", "", nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %s: %s", resp.Status, body)
		}
		var got podsyncv1.GetPodResponse
		if err := protojson.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		if got.GetPod().GetMetadata().GetName() != "web" || got.GetPod().GetStatus().GetPhase() == "" {
			t.Errorf("pod %v", got.GetPod())
		}
		if _, err := uuid.Parse(resp.Header.Get(server.RequestIDHeader)); err != nil {
			t.Errorf("header %s: %q: %v", server.RequestIDHeader, resp.Header.Get(server.RequestIDHeader), err)
		}
	})
	t.Run("REST list with a query", func(t *testing.T) {
		resp, body := httpCall(ctx, t, c, http.MethodGet, "http://podsync/v1/pods?namespace=other", "", nil)
		if resp.StatusCode != http.StatusOK || strings.Contains(string(body), `"web"`) {
			t.Fatalf("status %s: %s", resp.Status, body)
		}
		resp, body = httpCall(ctx, t, c, http.MethodGet, "http://podsync/v1/namespaces/default/pods", "", nil)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"web"`) {
			t.Fatalf("status %s: %s", resp.Status, body)
		}
	})
	t.Run("REST not found", func(t *testing.T) {
		resp, body := httpCall(ctx, t, c, http.MethodGet, "http://podsync/v1/namespaces/default/pods/nope", "", nil)
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("status %s: %s", resp.Status, body)
		}
		wantError(t, restStatus(t, body), codes.NotFound, errorinfo.ReasonPodNotFound)
	})
	t.Run("REST field violation", func(t *testing.T) {
		pod := testPod(t, "default", "bad", nil)
		pod.Spec.Containers[0].Image = ""
		req, err := protojson.Marshal(&podsyncv1.PlanPodRequest{Pod: pod})
		if err != nil {
			t.Fatal(err)
		}
		resp, body := httpCall(ctx, t, c, http.MethodPost, "http://podsync/v1/pods:plan", "", req)
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("status %s: %s", resp.Status, body)
		}
		err = restStatus(t, body)
		wantError(t, err, codes.InvalidArgument, errorinfo.ReasonInvalidSpec)
		if fields := violations(err); fields["pod.spec.containers[0].image"] == "" {
			t.Errorf("field violations %q, want pod.spec.containers[0].image", fields)
		}
	})
	t.Run("Connect unary", func(t *testing.T) {
		resp, body := httpCall(ctx, t, c, http.MethodPost, "http://podsync/podsync.v1.PodSyncService/GetPod", "",
			[]byte(`{"namespace":"default","name":"web"}`))
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"name":"web"`) {
			t.Fatalf("status %s: %s", resp.Status, body)
		}
		resp, body = httpCall(ctx, t, c, http.MethodPost, "http://podsync/podsync.v1.PodSyncService/GetPod", "",
			[]byte(`{"namespace":"default","name":"nope"}`))
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("status %s: %s", resp.Status, body)
		}
		wantError(t, connectStatus(t, body), codes.NotFound, errorinfo.ReasonPodNotFound)
	})
	t.Run("Connect server stream", func(t *testing.T) {
		pod, err := protojson.Marshal(&podsyncv1.SyncPodRequest{Pod: testPod(t, "default", "web", map[string]string{"v": "2"})})
		if err != nil {
			t.Fatal(err)
		}
		resp, body := httpCall(ctx, t, c, http.MethodPost, "http://podsync/podsync.v1.PodSyncService/SyncPod",
			"application/connect+json", envelope(0, pod))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %s: %s", resp.Status, body)
		}
		msgs, end := envelopes(t, body)
		if err := streamError(t, end); err != nil {
			t.Fatalf("SyncPod over Connect: %v", err)
		}
		var last podsyncv1.SyncPodResponse
		if len(msgs) == 0 {
			t.Fatal("no message")
		}
		if err := protojson.Unmarshal(msgs[len(msgs)-1], &last); err != nil {
			t.Fatal(err)
		}
		if last.GetResult() == nil {
			t.Errorf("the last message is not the result: %s", msgs[len(msgs)-1])
		}
	})
	t.Run("gRPC-Web", func(t *testing.T) {
		req, err := proto.Marshal(&podsyncv1.GetPodRequest{Namespace: "default", Name: "web"})
		if err != nil {
			t.Fatal(err)
		}
		resp, body := httpCall(ctx, t, c, http.MethodPost, "http://podsync/podsync.v1.PodSyncService/GetPod",
			"application/grpc-web+proto", envelope(0, req))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %s: %s", resp.Status, body)
		}
		msgs, trailers := grpcWebFrames(t, body)
		var got podsyncv1.GetPodResponse
		if len(msgs) != 1 || proto.Unmarshal(msgs[0], &got) != nil || got.GetPod().GetMetadata().GetName() != "web" {
			t.Errorf("messages %q", msgs)
		}
		if !strings.Contains(strings.ToLower(string(trailers)), "grpc-status: 0") {
			t.Errorf("trailers %q", trailers)
		}
	})
	t.Run("unknown path", func(t *testing.T) {
		resp, body := httpCall(ctx, t, c, http.MethodGet, "http://podsync/v2/nothing", "", nil)
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("status %s: %s", resp.Status, body)
		}
	})
}

// grpcWebFrames splits a gRPC-Web body into messages and its trailers.
func grpcWebFrames(t *testing.T, body []byte) (msgs [][]byte, trailers []byte) {
	t.Helper()
	for len(body) >= 5 {
		n := int(binary.BigEndian.Uint32(body[1:5]))
		if len(body) < 5+n {
			t.Fatalf("a truncated frame: %q", body)
		}
		if body[0]&0x80 != 0 {
			trailers = body[5 : 5+n]
		} else {
			msgs = append(msgs, body[5:5+n])
		}
		body = body[5+n:]
	}
	return msgs, trailers
}

// TestHTTPCallsFollowTheSameRules: a call over HTTP is authorized by the
// caller's role, draws from the caller's rate-limit buckets and counts
// against its stream budget, the ones its gRPC calls use.
func TestHTTPCallsFollowTheSameRules(t *testing.T) {
	t.Run("roles", func(t *testing.T) {
		d := testdaemon.New(t, testdaemon.Options{Server: server.Options{Roles: server.Roles{Read: []string{testdaemon.Self()}}}})
		ctx := testContext(t)
		c := unixHTTP(t, d.Socket)
		resp, body := httpCall(ctx, t, c, http.MethodGet, "http://podsync/v1/pods", "", nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("a reader's list: %s: %s", resp.Status, body)
		}
		resp, body = httpCall(ctx, t, c, http.MethodDelete, "http://podsync/v1/namespaces/default/pods/web", "", nil)
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("a reader's delete: %s: %s", resp.Status, body)
		}
		wantError(t, restStatus(t, body), codes.PermissionDenied, errorinfo.ReasonPermissionDenied)
	})
	t.Run("rate limit", func(t *testing.T) {
		d := testdaemon.New(t, testdaemon.Options{Server: server.Options{
			RateLimit: server.RateLimit{Read: server.ReadRateLimit{PerSecond: 0.001, Burst: 3}}}})
		ctx := testContext(t)
		c := unixHTTP(t, d.Socket)
		for range 2 {
			if _, err := d.Client.ListPods(ctx, &podsyncv1.ListPodsRequest{}); err != nil {
				t.Fatal(err)
			}
		}
		resp, body := httpCall(ctx, t, c, http.MethodGet, "http://podsync/v1/pods", "", nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("the third read, over HTTP: %s: %s", resp.Status, body)
		}
		resp, body = httpCall(ctx, t, c, http.MethodGet, "http://podsync/v1/pods", "", nil)
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("the fourth read, over HTTP: %s: %s", resp.Status, body)
		}
		wantError(t, restStatus(t, body), codes.ResourceExhausted, errorinfo.ReasonRateLimited)
		_, err := d.Client.ListPods(ctx, &podsyncv1.ListPodsRequest{})
		wantError(t, err, codes.ResourceExhausted, errorinfo.ReasonRateLimited)
	})
	t.Run("stream budget", func(t *testing.T) {
		d := testdaemon.New(t, testdaemon.Options{Server: server.Options{MaxStreamsPerIdentity: 1}})
		ctx := testContext(t)
		c := unixHTTP(t, d.Socket)
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		w, err := d.Client.WatchPods(wctx, &podsyncv1.WatchPodsRequest{})
		if err == nil {
			_, err = w.Recv()
		}
		if err != nil {
			t.Fatal(err)
		}
		resp, body := httpCall(ctx, t, c, http.MethodPost, "http://podsync/podsync.v1.PodSyncService/WatchPods",
			"application/connect+json", envelope(0, []byte(`{}`)))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %s: %s", resp.Status, body)
		}
		msgs, end := envelopes(t, body)
		if len(msgs) != 0 {
			t.Errorf("messages beyond the budget: %q", msgs)
		}
		wantError(t, streamError(t, end), codes.ResourceExhausted, errorinfo.ReasonTooManyStreams)
	})
}

// TestHTTPOverTCP: on a TCP listener with mTLS, an HTTP client that offers
// both HTTP/2 and HTTP/1.1 (as curl does) is served JSON over HTTP/1.1 as
// the identity of its certificate while gRPC clients get HTTP/2; one
// without a certificate is refused in the handshake, as a gRPC client is;
// a plaintext loopback caller is UNAUTHENTICATED for a read, as over gRPC.
func TestHTTPOverTCP(t *testing.T) {
	ca := testcert.NewCA(t, "podsync test CA")
	serverCert := ca.Issue(t, testcert.Leaf{CN: "podsyncd", IPs: testcert.Localhost, Server: true})
	d := testdaemon.New(t, testdaemon.Options{Transport: testdaemon.TCP, Server: server.Options{
		TLS: &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{serverCert},
			ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool()},
		Roles: server.Roles{Read: []string{"cn:reader"}},
	}})
	ctx := testContext(t)
	client := func(certs ...tls.Certificate) *http.Client {
		tr := &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{
			MinVersion: tls.VersionTLS12, RootCAs: ca.Pool(), Certificates: certs}}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr}
	}
	url := "https://" + d.Addr + "/v1/pods"

	resp, body := httpCall(ctx, t, client(ca.Issue(t, testcert.Leaf{CN: "reader"})), http.MethodGet, url, "", nil)
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 1 {
		t.Fatalf("a reader's list: %s %s: %s", resp.Proto, resp.Status, body)
	}
	resp, body = httpCall(ctx, t, client(ca.Issue(t, testcert.Leaf{CN: "stranger"})), http.MethodGet, url, "", nil)
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a stranger's list: %s: %s", resp.Status, body)
	}
	wantError(t, restStatus(t, body), codes.PermissionDenied, errorinfo.ReasonPermissionDenied)

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := client().Do(req); err == nil {
		_ = resp.Body.Close()
		t.Fatalf("a client without a certificate was served: %s", resp.Status)
	}

	// gRPC on the same listener still gets HTTP/2.
	conn := dial(t, d.Addr, credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12, RootCAs: ca.Pool(),
		Certificates: []tls.Certificate{ca.Issue(t, testcert.Leaf{CN: "reader"})}}))
	if _, err := podsyncv1.NewPodSyncServiceClient(conn).ListPods(ctx, &podsyncv1.ListPodsRequest{}); err != nil {
		t.Fatalf("gRPC beside HTTP: %v", err)
	}

	plain := testdaemon.New(t, testdaemon.Options{Transport: testdaemon.TCP})
	resp, body = httpCall(ctx, t, &http.Client{}, http.MethodGet, "http://"+plain.Addr+"/v1/pods", "", nil)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("an anonymous list: %s: %s", resp.Status, body)
	}
	wantError(t, restStatus(t, body), codes.Unauthenticated, errorinfo.ReasonUnauthenticated)
	_, err = plain.Client.ListPods(ctx, &podsyncv1.ListPodsRequest{})
	wantError(t, err, codes.Unauthenticated, errorinfo.ReasonUnauthenticated)
}

// TestHTTPPlaintextLoopbackNeedsALoopbackHost: on a plaintext loopback
// listener whose anonymous callers have a role, a request whose Host is a
// name other than localhost — a page of a rebound domain in a browser —
// is refused before it reaches the service; one for 127.0.0.1 or
// localhost is served.
func TestHTTPPlaintextLoopbackNeedsALoopbackHost(t *testing.T) {
	d := testdaemon.New(t, testdaemon.Options{Transport: testdaemon.TCP,
		Server: server.Options{Roles: server.Roles{Admin: []string{server.Anonymous}}}})
	ctx := testContext(t)
	_, port, err := net.SplitHostPort(d.Addr)
	if err != nil {
		t.Fatal(err)
	}
	get := func(host string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.Addr+"/v1/pods", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, b
	}
	for _, host := range []string{d.Addr, "localhost:" + port, "localhost"} {
		if resp, body := get(host); resp.StatusCode != http.StatusOK {
			t.Errorf("Host %s: %s: %s", host, resp.Status, body)
		}
	}
	for _, host := range []string{"attacker.example:" + port, "attacker.example", "192.0.2.1:" + port} {
		resp, body := get(host)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("Host %s: %s: %s", host, resp.Status, body)
			continue
		}
		wantError(t, restStatus(t, body), codes.PermissionDenied, errorinfo.ReasonPermissionDenied)
	}
}

// TestHTTPShutdown: Shutdown treats calls over HTTP as gRPC ones: a
// Connect WatchPods ends at once with SHUTTING_DOWN, an in-flight SyncPod
// over HTTP is let finish, and Shutdown returns once it has.
func TestHTTPShutdown(t *testing.T) {
	ctx := testContext(t)
	svc := newTestService()
	svc.block = true
	l, path := unixListener(t)
	h := start(t, server.Options{Service: svc}, l)
	c := unixHTTP(t, path)
	type answer struct {
		resp *http.Response
		body []byte
	}
	call := func(method string) <-chan answer {
		done := make(chan answer, 1)
		go func() {
			resp, body := httpCall(ctx, t, c, http.MethodPost, "http://podsync/podsync.v1.PodSyncService/"+method,
				"application/connect+json", envelope(0, []byte(`{}`)))
			done <- answer{resp, body}
		}()
		return done
	}
	syncDone := call("SyncPod")
	waitStarted(t, svc, "SyncPod")
	watchDone := call("WatchPods")
	waitStarted(t, svc, "WatchPods")

	shutCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- h.srv.Shutdown(shutCtx) }()

	w := <-watchDone
	_, end := envelopes(t, w.body)
	wantError(t, streamError(t, end), codes.Unavailable, errorinfo.ReasonShuttingDown)
	select {
	case a := <-syncDone:
		t.Fatalf("SyncPod over HTTP ended before it was let finish: %s", a.body)
	case err := <-shut:
		t.Fatalf("Shutdown returned with SyncPod in flight: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(svc.release)
	s := <-syncDone
	msgs, end := envelopes(t, s.body)
	if err := streamError(t, end); err != nil || len(msgs) != 1 {
		t.Fatalf("SyncPod over HTTP during shutdown: %v, %d messages", err, len(msgs))
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}
