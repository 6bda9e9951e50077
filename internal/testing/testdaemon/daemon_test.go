package testdaemon_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/convert"
	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/host/cgroupfs"
	"github.com/podsync/podsync/internal/testing/testdaemon"
	"github.com/podsync/podsync/server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testPod(t *testing.T) *podsyncv1.Pod {
	t.Helper()
	p, err := convert.PodToProto(&corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: testdaemon.Image, Command: []string{"sleep", "inf"},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTransports: on every transport the daemon answers through Conn,
// runs a pod on its fake runtime and stores it.
func TestTransports(t *testing.T) {
	for _, tc := range []struct {
		name      string
		transport testdaemon.Transport
	}{
		{"unix", testdaemon.Unix},
		{"tcp", testdaemon.TCP},
		{"bufconn", testdaemon.Bufconn},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			opts := testdaemon.Options{Transport: tc.transport, Logger: zaptest.NewLogger(t)}
			if tc.transport == testdaemon.TCP {
				// Plaintext loopback callers are anonymous.
				opts.Server.Roles.Admin = []string{server.Anonymous}
			}
			d := testdaemon.New(t, opts)
			if (d.Socket != "") != (tc.transport == testdaemon.Unix) || (d.Addr != "") != (tc.transport == testdaemon.TCP) {
				t.Errorf("socket %q, addr %q for %s", d.Socket, d.Addr, tc.name)
			}
			_, err := d.Client.GetPod(ctx, &podsyncv1.GetPodRequest{Name: "web"})
			if status.Code(err) != codes.NotFound {
				t.Fatalf("GetPod of no pod: %v, want NOT_FOUND", err)
			}
			stream, err := d.Client.SyncPod(ctx, &podsyncv1.SyncPodRequest{Pod: testPod(t)})
			if err != nil {
				t.Fatal(err)
			}
			for {
				if _, err := stream.Recv(); errors.Is(err, io.EOF) {
					break
				} else if err != nil {
					t.Fatalf("SyncPod: %v", err)
				}
			}
			sbs, err := d.Runtime.ListPodSandbox(ctx, nil)
			if err != nil || len(sbs) != 1 {
				t.Errorf("sandboxes: %d, %v; want 1", len(sbs), err)
			}
			if _, err := d.Store.GetByName("default", "web"); err != nil {
				t.Errorf("stored pod: %v", err)
			}
		})
	}
}

// counting counts the GetPod calls it passes on.
type counting struct {
	podsyncv1.PodSyncServiceServer
	calls atomic.Int32
}

func (c *counting) GetPod(ctx context.Context, req *podsyncv1.GetPodRequest) (*podsyncv1.GetPodResponse, error) {
	c.calls.Add(1)
	return c.PodSyncServiceServer.GetPod(ctx, req)
}

// TestWrap: the daemon serves the service Wrap returns; Close twice is
// harmless.
func TestWrap(t *testing.T) {
	var c *counting
	d, err := testdaemon.Start(testdaemon.Options{Transport: testdaemon.Bufconn,
		Wrap: func(s podsyncv1.PodSyncServiceServer) podsyncv1.PodSyncServiceServer {
			c = &counting{PodSyncServiceServer: s}
			return c
		}})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = d.Client.GetPod(t.Context(), &podsyncv1.GetPodRequest{Name: "web"})
	if n := c.calls.Load(); n != 1 {
		t.Errorf("%d GetPod calls through the wrapper, want 1", n)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestCgroupRootIsTheDaemons: two daemons have cgroup roots of their own,
// a pod's cgroup (made for pod-level resources, on the host's cgroup file
// systems when the test runs as root) lies below its daemon's root and
// not below the host's /kubepods, and Close removes the root.
func TestCgroupRootIsTheDaemons(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	d := testdaemon.New(t, testdaemon.Options{Logger: zaptest.NewLogger(t)})
	other := testdaemon.New(t, testdaemon.Options{})
	if d.CgroupRoot == "" || d.CgroupRoot == "/" || d.CgroupRoot == other.CgroupRoot {
		t.Fatalf("cgroup roots %q and %q, want two of their own", d.CgroupRoot, other.CgroupRoot)
	}
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "0f8fad5b-d9cb-469f-a165-70867728950e"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: testdaemon.Image, Command: []string{"sleep", "inf"}}},
			Resources: &corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
			},
		},
	}
	p, err := convert.PodToProto(pod)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := d.Client.SyncPod(ctx, &podsyncv1.SyncPodRequest{Pod: p})
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := stream.Recv(); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("SyncPod: %v", err)
		}
	}
	if os.Geteuid() != 0 {
		t.Fatal("the pod cgroup rows need root (CI runs the unit tests as root)")
	}
	hs, err := cgroupfs.Hierarchies(criconfig.DefaultCgroupFS)
	if err != nil || len(hs) == 0 {
		t.Fatalf("cgroup hierarchies: %v %v", hs, err)
	}
	memory, err := cgroupfs.LockHierarchy(criconfig.DefaultCgroupFS) // memory (v1) or the unified mount
	if err != nil {
		t.Fatal(err)
	}
	mine := filepath.Join(memory, d.CgroupRoot, "kubepods", "pod"+string(pod.UID))
	if _, err := os.Stat(mine); err != nil {
		t.Errorf("no pod cgroup below the daemon's root: %v", err)
	}
	for _, h := range hs {
		if _, err := os.Stat(filepath.Join(h, "kubepods", "pod"+string(pod.UID))); err == nil {
			t.Errorf("a pod cgroup below the host's /kubepods in %s", h)
		}
	}
	if _, err := d.Client.DeletePod(ctx, &podsyncv1.DeletePodRequest{Namespace: "default", Name: "web"}); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		if _, err := os.Stat(filepath.Join(h, d.CgroupRoot)); err == nil {
			t.Errorf("cgroup root %s left in %s after Close", d.CgroupRoot, h)
		}
	}
}
