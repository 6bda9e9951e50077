//go:build integration

package daemon_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/errorinfo"
	"github.com/podsync/podsync/internal/testing/testcert"
)

// curlResult is what curl got: the HTTP status (0 if none) and the body.
type curlResult struct {
	code int
	body []byte
}

// curl runs curl -sS with args and stdin (--data-binary @- when not nil)
// and returns the status and body; err is curl's own failure (connection,
// TLS), with its stderr.
func curl(ctx context.Context, stdin []byte, args ...string) (curlResult, error) {
	all := append([]string{"-sS", "--max-time", "60", "-w", "\n%{http_code}"}, args...)
	if stdin != nil {
		all = append(all, "--data-binary", "@-")
	}
	cmd := exec.CommandContext(ctx, "curl", all...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return curlResult{}, fmt.Errorf("curl %s: %w\n%s", strings.Join(all, " "), err, stderr.String())
	}
	out := stdout.Bytes()
	i := bytes.LastIndexByte(out, '\n')
	code, err := strconv.Atoi(string(out[i+1:]))
	if err != nil {
		return curlResult{}, fmt.Errorf("curl's status %q: %w", out[i+1:], err)
	}
	return curlResult{code: code, body: out[:i]}, nil
}

// statusOf decodes a REST error body, a google.rpc.Status in JSON.
func statusOf(t *testing.T, body []byte) *status.Status {
	t.Helper()
	var st spb.Status
	if err := protojson.Unmarshal(body, &st); err != nil {
		t.Fatalf("the error is not a google.rpc.Status (%v):\n%s", err, body)
	}
	return status.FromProto(&st)
}

// connectEnvelope frames one message of a Connect stream.
func connectEnvelope(msg []byte) []byte {
	b := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	return append(b, msg...)
}

// TestHTTPWithCurl drives podsyncd with curl as an operator would: a
// SyncPod stream over the Connect protocol runs a pod, a REST GET reads
// it, a PlanPod of a bad pod gets its field violation as JSON, a REST
// DELETE removes it and a GET then says POD_NOT_FOUND; on the mTLS TCP
// listener a reader's certificate reads and a missing one is refused in
// the handshake, as a gRPC client without one is.
func TestHTTPWithCurl(t *testing.T) {
	ctx := testContext(t)
	dir := t.TempDir()
	ca := testcert.NewCA(t, "podsync itest CA")
	srvCertFile, srvKeyFile := testcert.WriteFiles(t, dir, "server",
		ca.Issue(t, testcert.Leaf{CN: "podsyncd", IPs: testcert.Localhost, Server: true}))
	readerCert, readerKey := testcert.WriteFiles(t, dir, "reader", ca.Issue(t, testcert.Leaf{CN: "itest-reader"}))
	caFile := testcert.WritePEM(t, dir, "ca.crt", "CERTIFICATE", ca.Cert.Raw)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	d := startPodsyncd(t, daemonOptions{
		ExtraListen: []string{"tcp://" + addr},
		Config: `
security:
  roles:
    read: ["cn:itest-reader"]
`,
		Args: []string{"--tls-cert-file=" + srvCertFile, "--tls-key-file=" + srvKeyFile, "--tls-client-ca-file=" + caFile},
	})
	unix := func(method, path string, extra ...string) []string {
		return append([]string{"--unix-socket", d.Socket, "-X", method, "http://podsync" + path}, extra...)
	}

	pod := newPod(t, "", sleeper("app"))
	ns, name := pod.GetMetadata().GetNamespace(), pod.GetMetadata().GetName()
	podPath := "/v1/namespaces/" + ns + "/pods/" + name

	// SyncPod, a server stream, over the Connect protocol.
	req, err := protojson.Marshal(&podsyncv1.SyncPodRequest{Pod: pod})
	if err != nil {
		t.Fatal(err)
	}
	res, err := curl(ctx, connectEnvelope(req), unix("POST", "/podsync.v1.PodSyncService/SyncPod",
		"-H", "Content-Type: application/connect+json")...)
	if err != nil || res.code != 200 {
		t.Fatalf("SyncPod over Connect: %v %d %s", err, res.code, res.body)
	}
	var result *podsyncv1.SyncPodResult
	steps := 0
	for b := res.body; len(b) >= 5; {
		n := int(binary.BigEndian.Uint32(b[1:5]))
		msg, flags := b[5:5+n], b[0]
		b = b[5+n:]
		if flags&0x02 != 0 {
			var end struct {
				Error json.RawMessage `json:"error"`
			}
			if err := json.Unmarshal(msg, &end); err != nil || end.Error != nil {
				t.Fatalf("SyncPod's end of stream: %q", msg)
			}
			continue
		}
		var m podsyncv1.SyncPodResponse
		if err := protojson.Unmarshal(msg, &m); err != nil {
			t.Fatalf("SyncPod message %s: %v", msg, err)
		}
		if m.GetStep() != nil {
			steps++
		}
		if m.GetResult() != nil {
			result = m.GetResult()
		}
	}
	if result.GetStatus().GetPhase() != "Running" || steps == 0 {
		t.Fatalf("SyncPod over Connect: %d steps, result %v", steps, result)
	}

	// GetPod, a REST route.
	res, err = curl(ctx, nil, unix("GET", podPath)...)
	if err != nil || res.code != 200 {
		t.Fatalf("GET %s: %v %d %s", podPath, err, res.code, res.body)
	}
	var got podsyncv1.GetPodResponse
	if err := protojson.Unmarshal(res.body, &got); err != nil {
		t.Fatal(err)
	}
	if got.GetPod().GetMetadata().GetUid() != pod.GetMetadata().GetUid() || got.GetPod().GetStatus().GetPhase() != "Running" {
		t.Errorf("GET %s: %s", podPath, res.body)
	}

	// A field violation, as JSON.
	bad := newPod(t, "bad", sleeper("app"))
	bad.Spec.Containers[0].Image = ""
	req, err = protojson.Marshal(&podsyncv1.PlanPodRequest{Pod: bad})
	if err != nil {
		t.Fatal(err)
	}
	res, err = curl(ctx, req, unix("POST", "/v1/pods:plan", "-H", "Content-Type: application/json")...)
	if err != nil || res.code != 400 {
		t.Fatalf("PlanPod of a pod without an image: %v %d %s", err, res.code, res.body)
	}
	st := statusOf(t, res.body)
	fields := map[string]bool{}
	for _, det := range st.Details() {
		if br, ok := det.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				fields[v.GetField()] = true
			}
		}
	}
	if st.Code() != codes.InvalidArgument || !fields["pod.spec.containers[0].image"] || errorReason(st.Err()) != errorinfo.ReasonInvalidSpec {
		t.Errorf("PlanPod of a pod without an image: %s", res.body)
	}

	// The mTLS listener: a reader reads; no certificate, no connection.
	tcp := func(cert ...string) []string {
		args := []string{"--cacert", caFile}
		if len(cert) == 2 {
			args = append(args, "--cert", cert[0], "--key", cert[1])
		}
		return append(args, "https://"+addr+podPath)
	}
	res, err = curl(ctx, nil, tcp(readerCert, readerKey)...)
	if err != nil || res.code != 200 || !bytes.Contains(res.body, []byte(name)) {
		t.Fatalf("a reader's GET over mTLS: %v %d %s", err, res.code, res.body)
	}
	if res, err := curl(ctx, nil, tcp()...); err == nil {
		t.Errorf("a GET without a client certificate was served: %d %s", res.code, res.body)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(
		&tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12})))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	_, err = podsyncv1.NewPodSyncServiceClient(conn).GetPod(ctx, &podsyncv1.GetPodRequest{Namespace: ns, Name: name})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("a gRPC GetPod without a client certificate: %v; want the handshake refused (UNAVAILABLE)", err)
	}

	// DeletePod, then GetPod is POD_NOT_FOUND.
	res, err = curl(ctx, nil, unix("DELETE", podPath+"?gracePeriodSeconds=0")...)
	if err != nil || res.code != 200 {
		t.Fatalf("DELETE %s: %v %d %s", podPath, err, res.code, res.body)
	}
	var del map[string]any
	if err := json.Unmarshal(res.body, &del); err != nil || del["found"] != true {
		t.Errorf("DELETE %s: %s", podPath, res.body)
	}
	res, err = curl(ctx, nil, unix("GET", podPath)...)
	if err != nil || res.code != 404 {
		t.Fatalf("GET %s after the delete: %v %d %s", podPath, err, res.code, res.body)
	}
	if reason := errorReason(statusOf(t, res.body).Err()); reason != errorinfo.ReasonPodNotFound {
		t.Errorf("GET %s after the delete: reason %q: %s", podPath, reason, res.body)
	}
}
