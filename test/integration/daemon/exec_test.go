//go:build integration

package daemon_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"k8s.io/utils/ptr"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/errorinfo"
	"github.com/podsync/podsync/internal/testing/localcri"
	"github.com/podsync/podsync/internal/testing/testcert"
)

// TestGrpcurlExecSyncAndGetPodStats: ExecSync and GetPodStats are usable
// from grpcurl with -d, as the README shows them: output, stderr and the
// exit code; the pod's and its container's CPU and memory.
func TestGrpcurlExecSyncAndGetPodStats(t *testing.T) {
	ctx := testContext(t)
	d := startPodsyncd(t, daemonOptions{})
	pod := newPod(t, "", sleeper("app"))
	if _, err := d.grpcurl(ctx, requestJSON(t, &podsyncv1.SyncPodRequest{Pod: pod}), nil, "podsync.v1.PodSyncService/SyncPod"); err != nil {
		t.Fatal(err)
	}
	req := fmt.Sprintf(`{"namespace": %q, "name": %q, "command": ["sh", "-c", "echo hi; echo oops >&2; exit 3"]}`,
		pod.GetMetadata().GetNamespace(), pod.GetMetadata().GetName())
	out, err := d.grpcurl(ctx, req, nil, "podsync.v1.PodSyncService/ExecSync")
	if err != nil {
		t.Fatal(err)
	}
	var resp podsyncv1.ExecSyncResponse
	if err := protojson.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if string(resp.GetStdout()) != "hi\n" || string(resp.GetStderr()) != "oops\n" || resp.GetExitCode() != 3 {
		t.Errorf("ExecSync = %v; want stdout hi, stderr oops, exit code 3", &resp)
	}

	req = fmt.Sprintf(`{"namespace": %q, "name": %q}`, pod.GetMetadata().GetNamespace(), pod.GetMetadata().GetName())
	out, err = d.grpcurl(ctx, req, nil, "podsync.v1.PodSyncService/GetPodStats")
	if err != nil {
		t.Fatal(err)
	}
	var stats podsyncv1.GetPodStatsResponse
	if err := protojson.Unmarshal([]byte(out), &stats); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	st := stats.GetStats()
	if st.GetUid() != pod.GetMetadata().GetUid() || st.GetCpu().GetUsageCoreNanoSeconds() == 0 || st.GetMemory().GetWorkingSetBytes() == 0 ||
		len(st.GetContainers()) != 1 || st.GetContainers()[0].GetName() != "app" || st.GetContainers()[0].GetCpu().UsageNanoCores == nil ||
		st.GetSource() == "" {
		t.Errorf("GetPodStats:\n%s", out)
	}

	// ListPodStats has the node's own usage beside the pods': the
	// machine's, at least the pod's.
	out, err = d.grpcurl(ctx, "{}", nil, "podsync.v1.PodSyncService/ListPodStats")
	if err != nil {
		t.Fatal(err)
	}
	var list podsyncv1.ListPodStatsResponse
	if err := protojson.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	n := list.GetNode()
	if n.GetCpu().GetUsageCoreNanoSeconds() <= st.GetCpu().GetUsageCoreNanoSeconds() || n.GetCpu().UsageNanoCores == nil ||
		n.GetMemory().GetWorkingSetBytes() <= st.GetMemory().GetWorkingSetBytes() || n.GetMemory().GetAvailableBytes() == 0 ||
		n.GetCpu().GetTime() == nil || len(list.GetPods()) != 1 {
		t.Errorf("ListPodStats: want the machine's usage, above the pod's:\n%s", out)
	}
}

// TestGetNodeSystemInfo: GetNode says what a kubelet's NodeSystemInfo
// says of the machine, its kernel and the runtime.
func TestGetNodeSystemInfo(t *testing.T) {
	ctx := testContext(t)
	d := startPodsyncd(t, daemonOptions{})
	out, err := d.grpcurl(ctx, "{}", nil, "podsync.v1.PodSyncService/GetNode")
	if err != nil {
		t.Fatal(err)
	}
	var resp podsyncv1.GetNodeResponse
	if err := protojson.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	var uname unix.Utsname
	if err := unix.Uname(&uname); err != nil {
		t.Fatal(err)
	}
	machineID, err := os.ReadFile("/etc/machine-id")
	if err != nil {
		machineID, _ = os.ReadFile("/var/lib/dbus/machine-id")
	}
	bootID, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Fatal(err)
	}
	si := resp.GetNode().GetSystemInfo()
	if si.GetKernelVersion() != unix.ByteSliceToString(uname.Release[:]) || si.GetBootId() != strings.TrimSpace(string(bootID)) ||
		si.GetMachineId() != strings.TrimSpace(string(machineID)) || si.GetOsImage() == "" ||
		!strings.HasPrefix(si.GetContainerRuntimeVersion(), "containerd://") || si.GetOperatingSystem() != runtime.GOOS ||
		si.GetArchitecture() != runtime.GOARCH {
		t.Errorf("GetNode's system info, want the machine's, its kernel's and containerd's:\n%s", out)
	}
}

// TestSessionRoles: exec, attach and port-forward need the exec role: a
// read identity is refused all four session RPCs, an exec identity may
// exec but not change pods — nor add a debug container, which needs the
// debug role and is held to the node's Pod Security level — and the
// session is logged with its identity and command.
func TestSessionRoles(t *testing.T) {
	ctx := testContext(t)
	dir := t.TempDir()
	ca := testcert.NewCA(t, "podsync itest CA")
	srvCertFile, srvKeyFile := testcert.WriteFiles(t, dir, "server",
		ca.Issue(t, testcert.Leaf{CN: "podsyncd", IPs: testcert.Localhost, Server: true}))
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	d := startPodsyncd(t, daemonOptions{
		ExtraListen: []string{"tcp://" + addr},
		Config: `
security:
  roles:
    admin: ["cn:itest-admin"]
    exec: ["cn:itest-exec"]
    debug: ["cn:itest-debug"]
    read: ["cn:itest-reader"]
`,
		Args: []string{
			"--tls-cert-file=" + srvCertFile,
			"--tls-key-file=" + srvKeyFile,
			"--tls-client-ca-file=" + testcert.WritePEM(t, dir, "client-ca.crt", "CERTIFICATE", ca.Cert.Raw),
		},
	})
	dial := func(cn string) podsyncv1.PodSyncServiceClient {
		cert := ca.Issue(t, testcert.Leaf{CN: cn})
		creds := credentials.NewTLS(&tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}})
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return podsyncv1.NewPodSyncServiceClient(conn)
	}
	admin, execer, debugger, reader := dial("itest-admin"), dial("itest-exec"), dial("itest-debug"), dial("itest-reader")

	pod := newPod(t, "", sleeper("app"))
	ns, name := pod.GetMetadata().GetNamespace(), pod.GetMetadata().GetName()
	stream, err := admin.SyncPod(ctx, &podsyncv1.SyncPodRequest{Pod: pod})
	if err != nil {
		t.Fatal(err)
	}
	if res := lastSyncResult(t, stream); res.GetStatus().GetPhase() != "Running" {
		t.Fatalf("SyncPod: phase %q", res.GetStatus().GetPhase())
	}
	t.Cleanup(func() {
		_, _ = admin.DeletePod(context.WithoutCancel(ctx), &podsyncv1.DeletePodRequest{Namespace: ns, Name: name, GracePeriodSeconds: ptr.To[int64](0)})
		_ = removePodCgroups(pod.GetMetadata().GetUid())
	})

	denied := func(what string, err error) {
		t.Helper()
		if status.Code(err) != codes.PermissionDenied || errorReason(err) != errorinfo.ReasonPermissionDenied {
			t.Errorf("%s as a read identity: %v; want PERMISSION_DENIED", what, err)
		}
	}
	_, err = reader.ExecSync(ctx, &podsyncv1.ExecSyncRequest{Namespace: ns, Name: name, Command: []string{"true"}})
	denied("ExecSync", err)
	ex, err := reader.Exec(ctx)
	if err == nil {
		_ = ex.Send(&podsyncv1.ExecRequest{Msg: &podsyncv1.ExecRequest_Start{Start: &podsyncv1.ExecStart{Namespace: ns, Name: name, Command: []string{"true"}}}})
		_, err = ex.Recv()
	}
	denied("Exec", err)
	at, err := reader.Attach(ctx)
	if err == nil {
		_ = at.Send(&podsyncv1.AttachRequest{Msg: &podsyncv1.AttachRequest_Start{Start: &podsyncv1.AttachStart{Namespace: ns, Name: name}}})
		_, err = at.Recv()
	}
	denied("Attach", err)
	pf, err := reader.PortForward(ctx)
	if err == nil {
		_ = pf.Send(&podsyncv1.PortForwardRequest{Msg: &podsyncv1.PortForwardRequest_Start{Start: &podsyncv1.PortForwardStart{Namespace: ns, Name: name, Port: 80}}})
		_, err = pf.Recv()
	}
	denied("PortForward", err)

	resp, err := execer.ExecSync(ctx, &podsyncv1.ExecSyncRequest{Namespace: ns, Name: name, Command: []string{"echo", "from the exec role"}})
	if err != nil || string(resp.GetStdout()) != "from the exec role\n" {
		t.Errorf("ExecSync as an exec identity: %v, %v", resp, err)
	}
	if _, err := execer.DeletePod(ctx, &podsyncv1.DeletePodRequest{Namespace: ns, Name: name}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("DeletePod as an exec identity: %v; want PERMISSION_DENIED", err)
	}
	debug := func(c podsyncv1.PodSyncServiceClient, name string, sc *podsyncv1.SecurityContext) error {
		_, err := c.AddEphemeralContainer(ctx, &podsyncv1.AddEphemeralContainerRequest{Namespace: ns, Name: pod.GetMetadata().GetName(),
			EphemeralContainer: &podsyncv1.EphemeralContainer{Name: name, Image: localcri.BusyboxImage, Command: []string{"sleep", "1"},
				SecurityContext: sc}})
		return err
	}
	if err := debug(execer, "dbg-exec", nil); status.Code(err) != codes.PermissionDenied || !strings.Contains(status.Convert(err).Message(), "needs debug") {
		t.Errorf("AddEphemeralContainer as an exec identity: %v; want PERMISSION_DENIED naming the debug role", err)
	}
	if err := debug(debugger, "dbg-root", &podsyncv1.SecurityContext{Privileged: ptr.To(true)}); status.Code(err) != codes.FailedPrecondition ||
		errorReason(err) != "PodSecurity" {
		t.Errorf("a privileged debug container as a debug identity: %v; want FAILED_PRECONDITION PodSecurity", err)
	}
	if err := debug(debugger, "dbg", nil); err != nil {
		t.Errorf("AddEphemeralContainer as a debug identity: %v", err)
	}
	if !d.logHas(`"session ended"`, `"identity":"cn:itest-exec"`, `"role":"exec"`, `"command":["echo","from the exec role"]`, `"pod_name":"`+name+`"`) {
		t.Errorf("podsyncd did not log the session with its identity and command")
	}
	if !d.logHas(`"finished call"`, `"identity":"cn:itest-reader"`, `"rpc_method":"/podsync.v1.PodSyncService/Exec"`, `"grpc_code":"PermissionDenied"`) {
		t.Errorf("podsyncd did not log the refused Exec with the identity")
	}
}
