package server_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/google/uuid"
	"go.uber.org/zap/zapcore"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/errorinfo"
	"github.com/podsync/podsync/internal/testing/testcert"
	"github.com/podsync/podsync/server"
)

// leakScanner looks for a secret value in everything podsync hands out.
type leakScanner struct {
	t     *testing.T
	forms [][]byte // the value as is and as JSON encodes bytes
}

func newLeakScanner(t *testing.T, secret string) *leakScanner {
	return &leakScanner{t: t, forms: [][]byte{
		[]byte(secret),
		[]byte(base64.StdEncoding.EncodeToString([]byte(secret))),
		[]byte(base64.RawStdEncoding.EncodeToString([]byte(secret))),
	}}
}

func (s *leakScanner) check(where string, b []byte) {
	s.t.Helper()
	for _, f := range s.forms {
		if bytes.Contains(b, f) {
			s.t.Errorf("the secret appears in %s:\n%.2000s", where, b)
			return
		}
	}
}

func (s *leakScanner) message(where string, m proto.Message) {
	s.t.Helper()
	b, err := protojson.Marshal(m)
	if err != nil {
		s.t.Fatal(err)
	}
	s.check(where, b)
}

// status checks an error's message and every detail.
func (s *leakScanner) status(where string, err error) {
	s.t.Helper()
	if err == nil {
		s.t.Errorf("%s: no error", where)
		return
	}
	s.message(where, status.Convert(err).Proto())
}

// secretPod uses the Secret "creds" in its env, envFrom and a volume.
func secretPod(t *testing.T) *podsyncv1.Pod {
	p := testPod(t, "default", "web", nil)
	c := p.GetSpec().GetContainers()[0]
	c.Env = []*podsyncv1.EnvVar{{Name: "PASSWORD", ValueFrom: &podsyncv1.EnvVarSource{
		SecretKeyRef: &podsyncv1.SecretKeySelector{Name: "creds", Key: "password"}}}}
	c.EnvFrom = []*podsyncv1.EnvFromSource{{Prefix: "CREDS_", SecretRef: &podsyncv1.SecretEnvSource{Name: "creds"}}}
	c.VolumeMounts = []*podsyncv1.VolumeMount{{Name: "creds", MountPath: "/creds"}}
	p.Spec.Volumes = []*podsyncv1.Volume{{Name: "creds", Secret: &podsyncv1.SecretVolumeSource{SecretName: "creds"}}}
	return p
}

func credsSecret(data map[string][]byte) *podsyncv1.Secret {
	return &podsyncv1.Secret{ApiVersion: "v1", Kind: "Secret", Type: "Opaque",
		Metadata: &podsyncv1.ObjectMeta{Name: "creds", Namespace: "default"}, Data: data}
}

// TestSecretDataNeverLeaves: a unique value in a Secret's data is
// absent from everything podsync produces during a whole life cycle —
// SyncPod, GetPod, ListPods, WatchPods, PlanPod and DeletePod responses,
// every log line of the server, the service and the engine (debug level
// included), the errors of requests refused because of that Secret, and
// the revision log the store keeps — and the store file that does hold it
// (it needs it to restart containers) is readable by its owner only.
func TestSecretDataNeverLeaves(t *testing.T) {
	secret := "s3cr3t-" + uuid.NewString()
	scan := newLeakScanner(t, secret)
	h := newFullHarness(t)
	creds := credsSecret(map[string][]byte{"password": []byte(secret)})

	watch, err := h.c.WatchPods(h.ctx, &podsyncv1.WatchPodsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := callSync(h.ctx, h.c, &podsyncv1.SyncPodRequest{Pod: secretPod(t), Secrets: []*podsyncv1.Secret{creds}})
	if err != nil {
		t.Fatal(err)
	}
	running := false
	for _, m := range msgs {
		scan.message("a SyncPod response", m)
		running = running || m.GetResult().GetStatus().GetPhase() == "Running"
	}
	if !running {
		t.Fatalf("the pod does not run: %v", msgs)
	}
	get, err := h.c.GetPod(h.ctx, &podsyncv1.GetPodRequest{Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	scan.message("GetPod", get)
	list, err := h.c.ListPods(h.ctx, &podsyncv1.ListPodsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	scan.message("ListPods", list)
	plan, err := h.c.PlanPod(h.ctx, &podsyncv1.PlanPodRequest{Pod: secretPod(t), Secrets: []*podsyncv1.Secret{creds}})
	if err != nil {
		t.Fatal(err)
	}
	scan.message("PlanPod", plan)
	grace := int64(0)
	del, err := h.c.DeletePod(h.ctx, &podsyncv1.DeletePodRequest{Name: "web", GracePeriodSeconds: &grace})
	if err != nil || !del.GetFound() {
		t.Fatalf("DeletePod: %v %v", del, err)
	}
	scan.message("DeletePod", del)
	for {
		m, err := watch.Recv()
		if err != nil {
			t.Fatalf("WatchPods: %v", err)
		}
		scan.message("a WatchPods change", m)
		if m.GetDeleted() != nil {
			break
		}
	}

	// Requests refused because of the Secret do not quote its data.
	for name, req := range map[string]*podsyncv1.SyncPodRequest{
		"invalid key": {Pod: secretPod(t), Secrets: []*podsyncv1.Secret{credsSecret(map[string][]byte{
			"password": []byte(secret), "bad key!": []byte(secret)})}},
		"too large": {Pod: secretPod(t), Secrets: []*podsyncv1.Secret{credsSecret(map[string][]byte{
			"password": []byte(secret), "pad": bytes.Repeat([]byte(secret), (1<<20)/len(secret)+1)})}},
		"missing key": {Pod: secretPod(t), Secrets: []*podsyncv1.Secret{credsSecret(map[string][]byte{"other": []byte(secret)})}},
		"invalid name": {Pod: secretPod(t), Secrets: []*podsyncv1.Secret{{ApiVersion: "v1", Kind: "Secret",
			Metadata: &podsyncv1.ObjectMeta{Name: "Creds!", Namespace: "default"}, Data: map[string][]byte{"password": []byte(secret)}}}},
		"invalid type": {Pod: secretPod(t), Secrets: []*podsyncv1.Secret{func() *podsyncv1.Secret {
			s := credsSecret(map[string][]byte{"password": []byte(secret)})
			s.Type = "not a type"
			return s
		}()}},
		"annotations too large": {Pod: secretPod(t), Secrets: []*podsyncv1.Secret{func() *podsyncv1.Secret {
			s := credsSecret(map[string][]byte{"password": []byte(secret)})
			s.Metadata.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat(secret, (256<<10)/len(secret)+1)}
			return s
		}()}},
	} {
		_, err := callSync(h.ctx, h.c, req)
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want INVALID_ARGUMENT", name, err)
		}
		scan.status("the error of a request with an "+name, err)
	}

	// Every log line, as it would be written.
	enc := zapcore.NewJSONEncoder(zapcore.EncoderConfig{MessageKey: "msg", LevelKey: "level", NameKey: "logger",
		StacktraceKey: "stack", EncodeLevel: zapcore.LowercaseLevelEncoder, EncodeDuration: zapcore.StringDurationEncoder})
	lines := h.logs.All()
	if len(lines) < 10 {
		t.Fatalf("only %d log lines: the logs were not captured", len(lines))
	}
	for _, e := range lines {
		buf, err := enc.EncodeEntry(e.Entry, e.Context)
		if err != nil {
			t.Fatal(err)
		}
		scan.check("the log", buf.Bytes())
		buf.Free()
	}

	// The revision log (what WatchPods replays) holds no secret data.
	entries, err := h.st.Since(0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(entries)
	if err != nil {
		t.Fatal(err)
	}
	scan.check("the revision log", b)
	fi, err := os.Stat(h.storePath)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("store file mode %v, want 0600", perm)
	}
}

// TestEveryMethodNeedsItsRole: the read role may call exactly the
// methods without side effects; the mutating ones are PERMISSION_DENIED
// without reaching the service. The admin role may call every method.
func TestEveryMethodNeedsItsRole(t *testing.T) {
	calls := map[string]func(context.Context, podsyncv1.PodSyncServiceClient) error{
		"GetPod": func(ctx context.Context, c podsyncv1.PodSyncServiceClient) error {
			_, err := c.GetPod(ctx, &podsyncv1.GetPodRequest{Name: "web"})
			return err
		},
		"ListPods": func(ctx context.Context, c podsyncv1.PodSyncServiceClient) error {
			_, err := c.ListPods(ctx, &podsyncv1.ListPodsRequest{})
			return err
		},
		"PlanPod": func(ctx context.Context, c podsyncv1.PodSyncServiceClient) error {
			_, err := c.PlanPod(ctx, &podsyncv1.PlanPodRequest{})
			return err
		},
		"GetContainerLogs": func(ctx context.Context, c podsyncv1.PodSyncServiceClient) error {
			return firstRecv(c.GetContainerLogs(ctx, &podsyncv1.GetContainerLogsRequest{Name: "web"}))
		},
		"SyncPod": func(ctx context.Context, c podsyncv1.PodSyncServiceClient) error {
			return firstRecv(c.SyncPod(ctx, &podsyncv1.SyncPodRequest{}))
		},
		"RunPods": func(ctx context.Context, c podsyncv1.PodSyncServiceClient) error {
			return firstRecv(c.RunPods(ctx, &podsyncv1.RunPodsRequest{}))
		},
		"DeletePod": func(ctx context.Context, c podsyncv1.PodSyncServiceClient) error {
			_, err := c.DeletePod(ctx, &podsyncv1.DeletePodRequest{Name: "web"})
			return err
		},
	}
	mutating := map[string]bool{"SyncPod": true, "RunPods": true, "DeletePod": true}
	for _, role := range []string{"read", "admin"} {
		t.Run(role, func(t *testing.T) {
			roles := server.Roles{Admin: []string{"uid:0"}}
			if role == "read" {
				roles = server.Roles{Read: []string{"uid:0"}}
			}
			h, c, _ := serveUnix(t, server.Options{Roles: roles})
			for name, call := range calls {
				before := h.svc.calls.Load()
				err := call(testContext(t), c)
				denied := status.Code(err) == codes.PermissionDenied
				if want := role == "read" && mutating[name]; denied != want {
					t.Errorf("%s as %s: %v, want denied=%v", name, role, err, want)
				}
				if denied && h.svc.calls.Load() != before {
					t.Errorf("%s as %s: denied, but the service was called", name, role)
				}
			}
		})
	}
	// WatchPods (read) is covered by the read role's stream tests: the test
	// service's WatchPods waits for its context.
}

// firstRecv returns the first error of a server stream (nil at its end).
func firstRecv[T any](stream grpc.ServerStreamingClient[T], err error) error {
	if err != nil {
		return err
	}
	for {
		if _, err := stream.Recv(); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
	}
}

// TestRateLimitIsPerIdentity: an identity that used up its burst of
// mutating calls is RATE_LIMITED while another identity's calls, and its
// own reads, go through.
func TestRateLimitIsPerIdentity(t *testing.T) {
	ca := testcert.NewCA(t, "podsync test CA")
	serverCert := ca.Issue(t, testcert.Leaf{CN: "podsyncd", IPs: testcert.Localhost, Server: true})
	l := tcpListener(t)
	start(t, server.Options{
		TLS: &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{serverCert},
			ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool()},
		Roles:     server.Roles{Admin: []string{"cn:alice", "cn:bob"}},
		RateLimit: server.RateLimit{PerSecond: 0.001, Burst: 2},
	}, l)
	client := func(cn string) podsyncv1.PodSyncServiceClient {
		creds := credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12, RootCAs: ca.Pool(),
			Certificates: []tls.Certificate{ca.Issue(t, testcert.Leaf{CN: cn})}})
		return podsyncv1.NewPodSyncServiceClient(dial(t, l.Addr().String(), creds))
	}
	ctx := testContext(t)
	alice, bob := client("alice"), client("bob")
	for range 2 {
		if err := callSyncPod(ctx, alice); err != nil {
			t.Fatal(err)
		}
	}
	wantError(t, callSyncPod(ctx, alice), codes.ResourceExhausted, errorinfo.ReasonRateLimited)
	wantError(t, firstRecv(alice.RunPods(ctx, &podsyncv1.RunPodsRequest{})), codes.ResourceExhausted, errorinfo.ReasonRateLimited)
	if err := callGetPod(ctx, alice, "web"); err != nil {
		t.Errorf("alice's read: %v", err)
	}
	for range 2 {
		if err := callSyncPod(ctx, bob); err != nil {
			t.Errorf("bob, limited by alice's calls: %v", err)
		}
	}
}

// TestReadRateLimitIsPerIdentity: read calls and stream openings draw
// from a bucket of their own, PlanPod taking PlanPodCost tokens; an
// identity that emptied it is RATE_LIMITED, with its identity and a
// retry delay, while another identity's reads, and everyone's health
// checks and reflection, go through.
func TestReadRateLimitIsPerIdentity(t *testing.T) {
	ca := testcert.NewCA(t, "podsync test CA")
	serverCert := ca.Issue(t, testcert.Leaf{CN: "podsyncd", IPs: testcert.Localhost, Server: true})
	l := tcpListener(t)
	h := start(t, server.Options{
		TLS: &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{serverCert},
			ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool()},
		Roles:     server.Roles{Read: []string{"cn:alice", "cn:bob"}},
		RateLimit: server.RateLimit{Read: server.ReadRateLimit{PerSecond: 0.001, Burst: 13, PlanPodCost: 10}},
	}, l)
	conn := func(cn string) *grpc.ClientConn {
		creds := credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12, RootCAs: ca.Pool(),
			Certificates: []tls.Certificate{ca.Issue(t, testcert.Leaf{CN: cn})}})
		return dial(t, l.Addr().String(), creds)
	}
	ctx := testContext(t)
	aliceConn := conn("alice")
	alice, bob := podsyncv1.NewPodSyncServiceClient(aliceConn), podsyncv1.NewPodSyncServiceClient(conn("bob"))
	planPod := func(c podsyncv1.PodSyncServiceClient) error {
		_, err := c.PlanPod(ctx, &podsyncv1.PlanPodRequest{})
		return err
	}
	listPods := func(c podsyncv1.PodSyncServiceClient) error {
		_, err := c.ListPods(ctx, &podsyncv1.ListPodsRequest{})
		return err
	}
	logs := func(c podsyncv1.PodSyncServiceClient) error {
		return firstRecv(c.GetContainerLogs(ctx, &podsyncv1.GetContainerLogsRequest{}))
	}
	// The test service implements neither PlanPod, ListPods nor
	// GetContainerLogs: UNIMPLEMENTED means the call got past the limit.
	wantError(t, planPod(alice), codes.Unimplemented, "") // 10 tokens
	wantError(t, listPods(alice), codes.Unimplemented, "")
	wctx, cancel := context.WithCancel(ctx)
	w, err := alice.WatchPods(wctx, &podsyncv1.WatchPodsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	waitStarted(t, h.svc, "WatchPods")
	cancel()
	_, _ = w.Recv()
	wantError(t, logs(alice), codes.Unimplemented, "") // the 13th token

	err = callGetPod(ctx, alice, "web")
	wantError(t, err, codes.ResourceExhausted, errorinfo.ReasonRateLimited)
	md := errorMetadata(t, err)
	if md[errorinfo.MetadataIdentity] != "cn:alice" || md[errorinfo.MetadataRetryAfterMillis] == "" {
		t.Errorf("RATE_LIMITED metadata %v, want the identity and a retry delay", md)
	}
	if !strings.Contains(status.Convert(err).Message(), "read calls") {
		t.Errorf("message %q does not say the read limit was hit", status.Convert(err).Message())
	}
	wantError(t, planPod(alice), codes.ResourceExhausted, errorinfo.ReasonRateLimited)
	wantError(t, listPods(alice), codes.ResourceExhausted, errorinfo.ReasonRateLimited)
	wantError(t, logs(alice), codes.ResourceExhausted, errorinfo.ReasonRateLimited)
	wantError(t, firstRecv(alice.WatchPods(ctx, &podsyncv1.WatchPodsRequest{})), codes.ResourceExhausted, errorinfo.ReasonRateLimited)

	for i := range 50 {
		if _, err := healthpb.NewHealthClient(aliceConn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatalf("alice's health check %d: %v", i, err)
		}
	}
	for i := range 20 {
		if err := listServices(ctx, aliceConn); err != nil {
			t.Fatalf("alice's reflection call %d: %v", i, err)
		}
	}

	wantError(t, planPod(bob), codes.Unimplemented, "")
	if err := callGetPod(ctx, bob, "web"); err != nil {
		t.Errorf("bob, limited by alice's calls: %v", err)
	}
}

// TestPlanPodLoopIsLimitedByDefault: with the default read limit, a tight
// loop of PlanPod from one identity is refused within the burst, while
// a control plane's once-a-second reads from another identity are not.
func TestPlanPodLoopIsLimitedByDefault(t *testing.T) {
	ctx := testContext(t)
	ca := testcert.NewCA(t, "podsync test CA")
	serverCert := ca.Issue(t, testcert.Leaf{CN: "podsyncd", IPs: testcert.Localhost, Server: true})
	l := tcpListener(t)
	start(t, server.Options{
		TLS: &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{serverCert},
			ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool()},
		Roles: server.Roles{Read: []string{"cn:loop", "cn:control-plane"}},
	}, l)
	client := func(cn string) podsyncv1.PodSyncServiceClient {
		creds := credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12, RootCAs: ca.Pool(),
			Certificates: []tls.Certificate{ca.Issue(t, testcert.Leaf{CN: cn})}})
		return podsyncv1.NewPodSyncServiceClient(dial(t, l.Addr().String(), creds))
	}
	loop, cp := client("loop"), client("control-plane")
	limitedAt := 0
	for i := 1; i <= 200 && limitedAt == 0; i++ {
		_, err := loop.PlanPod(ctx, &podsyncv1.PlanPodRequest{})
		if status.Code(err) == codes.ResourceExhausted {
			wantError(t, err, codes.ResourceExhausted, errorinfo.ReasonRateLimited)
			limitedAt = i
		}
	}
	// The burst holds 20 PlanPods; the loop refills a token or so.
	if maxCalls := server.DefaultReadRateLimitBurst/server.DefaultPlanPodCost + 2; limitedAt == 0 || limitedAt > maxCalls {
		t.Errorf("PlanPod loop limited at call %d, want within %d calls", limitedAt, maxCalls)
	}
	// A control plane listing its pods and getting each of a full node's
	// (110) once: well within the burst.
	for i := range 111 {
		if err := callGetPod(ctx, cp, "web"); err != nil {
			t.Fatalf("control plane's read %d: %v", i, err)
		}
	}
}

// errorMetadata returns the metadata of err's ErrorInfo.
func errorMetadata(t *testing.T, err error) map[string]string {
	t.Helper()
	for _, d := range status.Convert(err).Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			return ei.GetMetadata()
		}
	}
	t.Fatalf("%v has no ErrorInfo", err)
	return nil
}

// listServices makes one reflection call.
func listServices(ctx context.Context, conn *grpc.ClientConn) error {
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		return err
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{},
	}); err != nil {
		return err
	}
	if _, err := stream.Recv(); err != nil {
		return err
	}
	return stream.CloseSend()
}
