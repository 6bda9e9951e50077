package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/errorinfo"
	"github.com/podsync/podsync/internal/testing/testdaemon"
	"github.com/podsync/podsync/server"
)

// callSync runs a SyncPod call to its end and returns its messages.
func callSync(ctx context.Context, c podsyncv1.PodSyncServiceClient, req *podsyncv1.SyncPodRequest) ([]*podsyncv1.SyncPodResponse, error) {
	stream, err := c.SyncPod(ctx, req)
	if err != nil {
		return nil, err
	}
	var out []*podsyncv1.SyncPodResponse
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, m)
	}
}

// callRunPods runs a RunPods call to its end.
func callRunPods(ctx context.Context, c podsyncv1.PodSyncServiceClient, req *podsyncv1.RunPodsRequest) ([]*podsyncv1.RunPodsResponse, error) {
	stream, err := c.RunPods(ctx, req)
	if err != nil {
		return nil, err
	}
	var out []*podsyncv1.RunPodsResponse
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, m)
	}
}

// recvErr receives from a server stream until it ends, returning the
// status error (nil at a clean end) and the number of messages.
func recvErr[T any](stream grpc.ServerStreamingClient[T]) (int, error) {
	n := 0
	for {
		if _, err := stream.Recv(); errors.Is(err, io.EOF) {
			return n, nil
		} else if err != nil {
			return n, err
		}
		n++
	}
}

// violations returns the BadRequest field violations of err, field ->
// description.
func violations(err error) map[string]string {
	out := map[string]string{}
	for _, d := range status.Convert(err).Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				out[v.GetField()] = v.GetDescription()
			}
		}
	}
	return out
}

func bigString(n int) string { return strings.Repeat("x", n) }

// configMaps returns n ConfigMaps in namespace default holding size bytes
// each.
func configMaps(n, size int) []*podsyncv1.ConfigMap {
	out := make([]*podsyncv1.ConfigMap, n)
	for i := range out {
		out[i] = &podsyncv1.ConfigMap{ApiVersion: "v1", Kind: "ConfigMap",
			Metadata: &podsyncv1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i), Namespace: "default"},
			Data:     map[string]string{"k": bigString(size)}}
	}
	return out
}

// TestSizeLimits: every input that can be made arbitrarily large is
// refused at a documented limit with INVALID_ARGUMENT and a field
// violation naming the limit — or, for a message beyond gRPC's receive
// limit, RESOURCE_EXHAUSTED naming that one — before anything runs.
func TestSizeLimits(t *testing.T) {
	h := newFullHarness(t)
	pod := func(mutate func(*podsyncv1.Pod)) *podsyncv1.Pod {
		p := testPod(t, "default", "web", nil)
		mutate(p)
		return p
	}
	sync := func(req *podsyncv1.SyncPodRequest) func(context.Context) error {
		return func(ctx context.Context) error { _, err := callSync(ctx, h.c, req); return err }
	}
	logs := func(req *podsyncv1.GetContainerLogsRequest) func(context.Context) error {
		return func(ctx context.Context) error {
			stream, err := h.c.GetContainerLogs(ctx, req)
			if err == nil {
				_, err = recvErr(stream)
			}
			return err
		}
	}
	limit := func(n int) string { return fmt.Sprint(n) }
	for _, tc := range []struct {
		name  string
		call  func(context.Context) error
		code  codes.Code
		field string // the violation, for INVALID_ARGUMENT
		want  string // in the violation's description (or the message)
	}{
		{"pods per request", func(ctx context.Context) error {
			pods := make([]*podsyncv1.Pod, server.DefaultMaxPodsPerRequest+1)
			for i := range pods {
				pods[i] = testPod(t, "default", fmt.Sprintf("p%d", i), nil)
			}
			_, err := callRunPods(ctx, h.c, &podsyncv1.RunPodsRequest{Pods: pods})
			return err
		}, codes.InvalidArgument, "pods", limit(server.DefaultMaxPodsPerRequest)},
		{"containers per pod", sync(&podsyncv1.SyncPodRequest{Pod: pod(func(p *podsyncv1.Pod) {
			c := p.GetSpec().GetContainers()[0]
			for i := range server.DefaultMaxContainersPerPod {
				extra := proto.CloneOf(c)
				extra.Name = fmt.Sprintf("c%d", i)
				p.Spec.Containers = append(p.Spec.Containers, extra)
			}
		})}), codes.InvalidArgument, "pod.spec.containers", limit(server.DefaultMaxContainersPerPod)},
		{"env vars per container", sync(&podsyncv1.SyncPodRequest{Pod: pod(func(p *podsyncv1.Pod) {
			c := p.GetSpec().GetContainers()[0]
			for i := range server.DefaultMaxEnvVarsPerContainer + 1 {
				c.Env = append(c.Env, &podsyncv1.EnvVar{Name: fmt.Sprintf("V%d", i), Value: "x"})
			}
		})}), codes.InvalidArgument, "pod.spec.containers[0].env", limit(server.DefaultMaxEnvVarsPerContainer)},
		{"env bytes per container", sync(&podsyncv1.SyncPodRequest{Pod: pod(func(p *podsyncv1.Pod) {
			c := p.GetSpec().GetContainers()[0]
			c.Env = append(c.Env, &podsyncv1.EnvVar{Name: "A", Value: bigString(server.DefaultMaxEnvBytesPerContainer / 2)},
				&podsyncv1.EnvVar{Name: "B", Value: bigString(server.DefaultMaxEnvBytesPerContainer / 2)})
		})}), codes.InvalidArgument, "pod.spec.containers[0].env", limit(server.DefaultMaxEnvBytesPerContainer)},
		{"ConfigMap bytes", sync(&podsyncv1.SyncPodRequest{Pod: testPod(t, "default", "web", nil),
			ConfigMaps: configMaps(1, server.DefaultMaxConfigMapBytes)}),
			codes.InvalidArgument, "configMaps[0]", limit(server.DefaultMaxConfigMapBytes)},
		{"Secret bytes", sync(&podsyncv1.SyncPodRequest{Pod: testPod(t, "default", "web", nil),
			Secrets: []*podsyncv1.Secret{{ApiVersion: "v1", Kind: "Secret", Metadata: &podsyncv1.ObjectMeta{Name: "s", Namespace: "default"},
				StringData: map[string]string{"k": bigString(server.DefaultMaxSecretBytes)}}}}),
			codes.InvalidArgument, "secrets[0]", limit(server.DefaultMaxSecretBytes)},
		{"label value", sync(&podsyncv1.SyncPodRequest{Pod: testPod(t, "default", "web", map[string]string{"app": bigString(64)})}),
			codes.InvalidArgument, "pod.metadata.labels", "63"},
		{"annotations", sync(&podsyncv1.SyncPodRequest{Pod: pod(func(p *podsyncv1.Pod) {
			p.Metadata.Annotations = map[string]string{"a": bigString(256 << 10)}
		})}), codes.InvalidArgument, "pod.metadata.annotations", "262144"},
		{"name too long for the log directory", sync(&podsyncv1.SyncPodRequest{Pod: testPod(t, "default", strings.Repeat("n", 220), nil)}),
			codes.InvalidArgument, "pod.metadata.name", "255"},
		{"request bytes", sync(&podsyncv1.SyncPodRequest{Pod: testPod(t, "default", "web", nil),
			ConfigMaps: configMaps(17, 1000<<10)}),
			codes.InvalidArgument, "", limit(server.DefaultMaxRequestBytes)},
		{"message beyond gRPC's receive limit", sync(&podsyncv1.SyncPodRequest{Pod: testPod(t, "default", "web", nil),
			ConfigMaps: configMaps(18, 1000<<10)}),
			codes.ResourceExhausted, "", limit(server.DefaultMaxRecvMsgSize)},
		{"ListPods label selector", func(ctx context.Context) error {
			_, err := h.c.ListPods(ctx, &podsyncv1.ListPodsRequest{LabelSelector: "a in (" + strings.Repeat("b,", 2100) + "c)"})
			return err
		}, codes.InvalidArgument, "labelSelector", limit(server.DefaultMaxLabelSelectorBytes)},
		{"WatchPods label selector", func(ctx context.Context) error {
			stream, err := h.c.WatchPods(ctx, &podsyncv1.WatchPodsRequest{LabelSelector: "a in (" + strings.Repeat("b,", 2100) + "c)"})
			if err == nil {
				_, err = stream.Recv()
			}
			return err
		}, codes.InvalidArgument, "labelSelector", limit(server.DefaultMaxLabelSelectorBytes)},
		{"log limit_bytes below 1", logs(&podsyncv1.GetContainerLogsRequest{Name: "web", LimitBytes: new(int64)}),
			codes.InvalidArgument, "limitBytes", "greater than 0"},
		{"log tail_lines negative", logs(&podsyncv1.GetContainerLogsRequest{Name: "web", TailLines: func() *int64 { v := int64(-1); return &v }()}),
			codes.InvalidArgument, "tailLines", "greater than or equal to 0"},
		{"grace period", func(ctx context.Context) error {
			g := int64(server.DefaultMaxGracePeriodSeconds + 1)
			_, err := h.c.DeletePod(ctx, &podsyncv1.DeletePodRequest{Name: "web", GracePeriodSeconds: &g})
			return err
		}, codes.InvalidArgument, "gracePeriodSeconds", limit(server.DefaultMaxGracePeriodSeconds)},
		{"RunPods timeout", func(ctx context.Context) error {
			_, err := callRunPods(ctx, h.c, &podsyncv1.RunPodsRequest{Pods: []*podsyncv1.Pod{testPod(t, "default", "web", nil)},
				Timeout: durationpb.New(server.MaxRunPodsTimeout + time.Second)})
			return err
		}, codes.InvalidArgument, "timeout", server.MaxRunPodsTimeout.String()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A context of its own: under -race on a busy machine the
			// large messages alone take seconds, more than one shared
			// context leaves the last cases.
			err := tc.call(testContext(t))
			if got := status.Code(err); got != tc.code {
				t.Fatalf("code %v (%v), want %v", got, err, tc.code)
			}
			if tc.code != codes.InvalidArgument {
				if msg := status.Convert(err).Message(); !strings.Contains(msg, tc.want) {
					t.Errorf("message %q does not name the limit %s", msg, tc.want)
				}
				return
			}
			v := violations(err)
			desc, ok := v[tc.field]
			if !ok {
				t.Fatalf("violations %v: none for %q", v, tc.field)
			}
			if !strings.Contains(desc, tc.want) {
				t.Errorf("violation of %q: %q does not name the limit %s", tc.field, desc, tc.want)
			}
		})
	}
	// Nothing of it ran.
	if resp, err := h.c.ListPods(testContext(t), &podsyncv1.ListPodsRequest{}); err != nil || len(resp.GetPods()) != 0 {
		t.Errorf("ListPods after refused requests: %v %v", resp, err)
	}
	if sbs, _ := h.rt.ListPodSandbox(h.ctx, nil); len(sbs) != 0 {
		t.Errorf("%d sandboxes after refused requests", len(sbs))
	}
}

// TestHostilePathsRejected: names and paths that could leave their
// directories on the node are refused by validation, each with its field
// path: "..", absolute paths, NUL bytes and names too long for a file
// system.
func TestHostilePathsRejected(t *testing.T) {
	v := &server.Validator{}
	long := strings.Repeat("a", 256)
	mount := func(sub string) func(*podsyncv1.Pod) {
		return func(p *podsyncv1.Pod) {
			p.Spec.Volumes = []*podsyncv1.Volume{{Name: "data", EmptyDir: &podsyncv1.EmptyDirVolumeSource{}}}
			p.Spec.Containers[0].VolumeMounts = []*podsyncv1.VolumeMount{{Name: "data", MountPath: "/data", SubPath: sub}}
		}
	}
	hostPath := func(path string) func(*podsyncv1.Pod) {
		return func(p *podsyncv1.Pod) {
			p.Spec.Volumes = []*podsyncv1.Volume{{Name: "host", HostPath: &podsyncv1.HostPathVolumeSource{Path: path}}}
		}
	}
	item := func(path string) func(*podsyncv1.Pod) {
		return func(p *podsyncv1.Pod) {
			p.Spec.Volumes = []*podsyncv1.Volume{{Name: "cfg", ConfigMap: &podsyncv1.ConfigMapVolumeSource{
				Name: "cfg", Optional: proto.Bool(true), Items: []*podsyncv1.KeyToPath{{Key: "k", Path: path}}}}}
		}
	}
	secretItem := func(path string) func(*podsyncv1.Pod) {
		return func(p *podsyncv1.Pod) {
			p.Spec.Volumes = []*podsyncv1.Volume{{Name: "sec", Secret: &podsyncv1.SecretVolumeSource{
				SecretName: "sec", Optional: proto.Bool(true), Items: []*podsyncv1.KeyToPath{{Key: "k", Path: path}}}}}
		}
	}
	for _, tc := range []struct {
		name   string
		mutate func(*podsyncv1.Pod)
		field  string
	}{
		{"namespace with slash", func(p *podsyncv1.Pod) { p.Metadata.Namespace = "../etc" }, "pod.metadata.namespace"},
		{"name with slash", func(p *podsyncv1.Pod) { p.Metadata.Name = "a/../../b" }, "pod.metadata.name"},
		{"name with NUL", func(p *podsyncv1.Pod) { p.Metadata.Name = "web\x00" }, "pod.metadata.name"},
		{"name too long for the log directory", func(p *podsyncv1.Pod) { p.Metadata.Name = strings.Repeat("n", 253) }, "pod.metadata.name"},
		{"uid ..", func(p *podsyncv1.Pod) { p.Metadata.Uid = ".." }, "pod.metadata.uid"},
		{"uid escaping", func(p *podsyncv1.Pod) { p.Metadata.Uid = "../../../../etc/passwd" }, "pod.metadata.uid"},
		{"container ..", func(p *podsyncv1.Pod) { p.Spec.Containers[0].Name = ".." }, "pod.spec.containers[0].name"},
		{"container with slash", func(p *podsyncv1.Pod) { p.Spec.Containers[0].Name = "../../etc" }, "pod.spec.containers[0].name"},
		{"volume ..", func(p *podsyncv1.Pod) {
			p.Spec.Volumes = []*podsyncv1.Volume{{Name: "..", EmptyDir: &podsyncv1.EmptyDirVolumeSource{}}}
		}, "pod.spec.volumes[0].name"},
		{"volume name too long", func(p *podsyncv1.Pod) {
			p.Spec.Volumes = []*podsyncv1.Volume{{Name: long, EmptyDir: &podsyncv1.EmptyDirVolumeSource{}}}
		}, "pod.spec.volumes[0].name"},
		{"hostPath relative", hostPath("etc"), "pod.spec.volumes[0].hostPath.path"},
		{"hostPath ..", hostPath("/var/lib/../../etc"), "pod.spec.volumes[0].hostPath.path"},
		{"hostPath NUL", hostPath("/var/lib/x\x00"), "pod.spec.volumes[0].hostPath.path"},
		{"hostPath element too long", hostPath("/" + long), "pod.spec.volumes[0].hostPath.path"},
		{"subPath absolute", mount("/etc"), "pod.spec.containers[0].volumeMounts[0].subPath"},
		{"subPath ..", mount("a/../../etc"), "pod.spec.containers[0].volumeMounts[0].subPath"},
		{"subPath NUL", mount("a\x00/b"), "pod.spec.containers[0].volumeMounts[0].subPath"},
		{"subPath too long", mount(strings.Repeat("a/", 2048)), "pod.spec.containers[0].volumeMounts[0].subPath"},
		{"configMap item absolute", item("/etc/passwd"), "pod.spec.volumes[0].configMap.items[0].path"},
		{"configMap item ..", item("../../x"), "pod.spec.volumes[0].configMap.items[0].path"},
		{"configMap item NUL", item("x\x00"), "pod.spec.volumes[0].configMap.items[0].path"},
		{"secret item ..", secretItem("a/../../x"), "pod.spec.volumes[0].secret.items[0].path"},
		{"secret item element too long", secretItem(long), "pod.spec.volumes[0].secret.items[0].path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testPod(t, "default", "web", nil)
			tc.mutate(p)
			errs := v.ValidateSyncPodRequest(&podsyncv1.SyncPodRequest{Pod: p})
			for _, e := range errs {
				if e.Field == tc.field {
					return
				}
			}
			t.Errorf("violations %v: none for %s", errs, tc.field)
		})
	}
	// Requests that name a pod or container on the node.
	for name, errs := range map[string]field.ErrorList{
		"container":          v.ValidateGetContainerLogsRequest(&podsyncv1.GetContainerLogsRequest{Name: "web", Container: "../../../etc/shadow"}),
		"name":               v.ValidateGetPodRequest(&podsyncv1.GetPodRequest{Name: "../web"}),
		"namespace":          v.ValidateDeletePodRequest(&podsyncv1.DeletePodRequest{Namespace: "a/b", Name: "web"}),
		"logs namespace NUL": v.ValidateGetContainerLogsRequest(&podsyncv1.GetContainerLogsRequest{Namespace: "a\x00", Name: "web"}),
	} {
		if len(errs) == 0 {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestGetContainerLogsMessagesStayUnderClientLimit: long lines are sent
// in messages a client with gRPC's default 4 MiB receive limit accepts.
func TestGetContainerLogsMessagesStayUnderClientLimit(t *testing.T) {
	h := newFullHarness(t)
	msgs, err := callSync(h.ctx, h.c, &podsyncv1.SyncPodRequest{Pod: testPod(t, "default", "web", nil)})
	if err != nil {
		t.Fatal(err)
	}
	var id string
	for _, m := range msgs {
		if s := m.GetStep(); s.GetAction() == podsyncv1.StepAction_STEP_ACTION_START_CONTAINER {
			id = s.GetContainerId()
		}
	}
	lines := make([]string, 8)
	for i := range lines {
		lines[i] = strings.Repeat(string(rune('a'+i)), 700<<10)
	}
	if err := h.rt.WriteLog(id, "stdout", lines...); err != nil {
		t.Fatal(err)
	}
	stream, err := h.c.GetContainerLogs(h.ctx, &podsyncv1.GetContainerLogsRequest{Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("after %d lines: %v", got, err)
		}
		got += len(m.GetLines())
	}
	if got != len(lines) {
		t.Errorf("%d lines, want %d", got, len(lines))
	}
}

// TestWatchPodsSlowConsumerIsCutOff: a WatchPods caller that stops
// reading while many changes happen is cut off with RESOURCE_EXHAUSTED
// SLOW_CONSUMER once gRPC's flow-control window and its watch buffer are
// full, instead of having the changes queued for it without bound.
func TestWatchPodsSlowConsumerIsCutOff(t *testing.T) {
	h := newFullHarness(t, func(o *testdaemon.Options) {
		o.Store.WatchBuffer = 16
		// A fixed 64 KiB window (no BDP growth): the transport holds
		// that much for a reader that does not read.
		o.Dial = []grpc.DialOption{grpc.WithInitialWindowSize(64 << 10), grpc.WithInitialConnWindowSize(64 << 10)}
	})
	if _, err := callSync(h.ctx, h.c, &podsyncv1.SyncPodRequest{Pod: testPod(t, "default", "web", nil)}); err != nil {
		t.Fatal(err)
	}
	get, err := h.c.GetPod(h.ctx, &podsyncv1.GetPodRequest{Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	ref := store.PodRef{Namespace: "default", Name: "web", UID: types.UID(get.GetPod().GetMetadata().GetUid())}
	event := func(reason, msg string) store.Change {
		return store.EventChange(ref, store.Event{Type: "Normal", Reason: reason, Message: msg})
	}
	const changes = 2000 // about 2 MB of events, 30 times the window
	msg := bigString(1 << 10)
	// A watcher still replaying the log from the file waits for its reader
	// rather than being cut off (it holds no more than a batch); the cut
	// applies once it follows live changes. A probe it receives makes it
	// live in all but a scheduling accident, which a new attempt absorbs.
	for attempt := range 5 {
		ctx, cancel := context.WithCancel(h.ctx)
		defer cancel()
		stream, err := h.c.WatchPods(ctx, &podsyncv1.WatchPodsRequest{SinceRevision: h.st.Revision()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.st.Append(event("Probe", "")); err != nil {
			t.Fatal(err)
		}
		if m, err := stream.Recv(); err != nil || m.GetEvent().GetReason() != "Probe" {
			t.Fatalf("probe: %v %v", m, err)
		}
		cut := len(h.logs.FilterMessage("watcher ended as a slow consumer").All())
		for i := range changes / 100 { // 100 changes per transaction
			batch := make([]store.Change, 100)
			for j := range batch {
				batch[j] = event("Test", fmt.Sprintf("%d %s", i*100+j, msg))
			}
			if _, err := h.st.Append(batch...); err != nil {
				t.Fatal(err)
			}
		}
		if len(h.logs.FilterMessage("watcher ended as a slow consumer").All()) == cut {
			t.Logf("attempt %d: the watcher was still replaying", attempt)
			cancel()
			continue
		}
		n, err := recvErr(stream)
		wantError(t, err, codes.ResourceExhausted, errorinfo.ReasonSlowConsumer)
		if n >= changes {
			t.Errorf("received all %d changes: not cut off", n)
		}
		return
	}
	t.Fatal("no attempt had a live watcher")
}
