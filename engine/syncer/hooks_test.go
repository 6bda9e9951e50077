package syncer_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/engine/syncer/syncertest"
)

// hookServer records the requests of httpGet hooks.
type hookServer struct {
	mu   sync.Mutex
	reqs []*http.Request
	port int
}

func newHookServer(t *testing.T) *hookServer {
	hs := &hookServer{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hs.mu.Lock()
		hs.reqs = append(hs.reqs, r)
		hs.mu.Unlock()
		// The status does not matter to a hook, only a failed request.
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(srv.Close)
	hs.port = srv.Listener.Addr().(*net.TCPAddr).Port
	return hs
}

func (hs *hookServer) requests() []*http.Request {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return append([]*http.Request(nil), hs.reqs...)
}

// TestHTTPGetHooks is the kubelet's runHTTPHandler: a postStart and a
// preStop httpGet reach the server with the path, the handler's headers, a
// named port and the kubelet's User-Agent and Accept; any answer is a
// success, a failed request kills the container with FailedPostStartHook.
func TestHTTPGetHooks(t *testing.T) {
	hs := newHookServer(t)
	h := syncertest.New(t)
	pod := enginetest.Pod()
	pod.Spec.Containers = pod.Spec.Containers[:1]
	c := &pod.Spec.Containers[0]
	c.Ports = []corev1.ContainerPort{{Name: "hooks", ContainerPort: int32(hs.port)}}
	c.Lifecycle = &corev1.Lifecycle{
		PostStart: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{
			Host: "127.0.0.1", Path: "/started", Port: intstr.FromString("hooks"), Scheme: corev1.URISchemeHTTP,
			HTTPHeaders: []corev1.HTTPHeader{{Name: "X-Hook", Value: "postStart"}, {Name: "Host", Value: "web.local"}},
		}},
		PreStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{
			Host: "127.0.0.1", Path: "stopping?now=1", Port: intstr.FromInt32(int32(hs.port)),
		}},
	}
	res := h.Sync(pod)
	syncertest.WantSteps(t, res, "CreatePodSandbox #0 NoSandbox", "ConfigPodSandbox #0", "PostStartHook app", "StartContainer app NewSandbox")
	pod = pod.DeepCopy()
	pod.DeletionTimestamp = ptr.To(metav1.NewTime(syncertest.T0))
	res = h.Sync(pod)
	syncertest.WantSteps(t, res, "PreStopHook app", "KillContainer app PodKilled", "KillPodSandbox #0 PodDeleted")
	reqs := hs.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d hook requests, want 2", len(reqs))
	}
	if r := reqs[0]; r.URL.Path != "/started" || r.Header.Get("X-Hook") != "postStart" || r.Host != "web.local" ||
		!strings.HasPrefix(r.UserAgent(), "kube-lifecycle/") || r.Header.Get("Accept") != "*/*" {
		t.Errorf("postStart request %s %s host %s headers %v", r.Method, r.URL, r.Host, r.Header)
	}
	if r := reqs[1]; r.URL.Path != "/stopping" || r.URL.RawQuery != "now=1" {
		t.Errorf("preStop request %s", r.URL)
	}
}

func TestFailingHTTPGetHook(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := lis.Addr().(*net.TCPAddr).Port
	_ = lis.Close()
	h := syncertest.New(t)
	pod := enginetest.Pod()
	pod.Spec.Containers = pod.Spec.Containers[:1]
	pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{
		Host: "127.0.0.1", Path: "/started", Port: intstr.FromString(strconv.Itoa(closed)),
	}}}
	res := h.Sync(pod)
	syncertest.WantSteps(t, res,
		"CreatePodSandbox #0 NoSandbox",
		"ConfigPodSandbox #0",
		"PostStartHook app !PostStartHookError",
		"KillContainer app FailedPostStartHook",
		"StartContainer app !PostStartHookError",
	)
	st := syncertest.FailedStep(t, res, syncer.ActionStartContainer, "app")
	if want := `HTTP lifecycle hook (/started) for Container "app" in Pod "web_shop(uid-1)" failed - error: `; !strings.HasPrefix(st.Message, want) ||
		!strings.Contains(st.Message, "connection refused") {
		t.Errorf("message %q, want the kubelet's %q… with the refusal", st.Message, want)
	}
	if inst := syncertest.Newest(t, res, "app"); inst.State != model.ContainerExited {
		t.Errorf("app %+v, want killed", inst)
	}
}

// TestSleepHooks: a postStart sleep holds the start for its seconds; a
// preStop sleep longer than the grace period is cut short by it, with the
// kubelet's message, and the kill goes on.
func TestSleepHooks(t *testing.T) {
	h := syncertest.New(t)
	pod := enginetest.Pod()
	pod.Spec.Containers = pod.Spec.Containers[:1]
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
	pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{
		PostStart: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 3}},
		PreStop:   &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 20}},
	}
	// The sleeps wait on the fake clock: step it while the pass waits,
	// a second every 250ms, so that the preStop's grace period, which
	// bounds it in real time, ends before the sleep would.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(250 * time.Millisecond):
				if h.Clock.HasWaiters() {
					h.Clock.Step(time.Second)
				}
			}
		}
	})
	defer func() { close(stop); wg.Wait() }()
	res := h.Sync(pod)
	syncertest.WantSteps(t, res, "CreatePodSandbox #0 NoSandbox", "ConfigPodSandbox #0", "PostStartHook app", "StartContainer app NewSandbox")
	if hook := res.Step(syncer.ActionPostStartHook, "app"); hook.Duration < 3*time.Second {
		t.Errorf("postStart sleep took %s, want 3s", hook.Duration)
	}
	pod = pod.DeepCopy()
	pod.DeletionTimestamp = ptr.To(metav1.NewTime(syncertest.T0))
	pod.DeletionGracePeriodSeconds = ptr.To[int64](2)
	res = h.Sync(pod)
	syncertest.WantSteps(t, res, "PreStopHook app !PreStopHookError", "KillContainer app PodKilled", "KillPodSandbox #0 PodDeleted")
	hook := res.Step(syncer.ActionPreStopHook, "app")
	if hook == nil {
		t.Fatal("no preStop hook step")
	}
	if hook.Duration != 2*time.Second {
		t.Errorf("preStop sleep took %s, want the 2s grace period", hook.Duration)
	}
	if want := `Sleep lifecycle hook (20) for Container "app" in Pod "web_shop(uid-1)" failed - error: container terminated before sleep hook finished`; hook.Message != want {
		t.Errorf("preStop message %q, want %q", hook.Message, want)
	}
}

// TestStopSignal: lifecycle.stopSignal reaches the runtime, and a runtime
// that ignores it (containerd 1.6 reports none) refuses the start with a
// message that says so, leaving no container behind.
func TestStopSignal(t *testing.T) {
	pod := enginetest.Pod()
	pod.Spec.Containers = pod.Spec.Containers[:1]
	pod.Spec.OS = &corev1.PodOS{Name: corev1.Linux}
	pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{StopSignal: ptr.To(corev1.SIGUSR1)}

	h := syncertest.New(t)
	res := h.Sync(pod)
	syncertest.WantSteps(t, res, "CreatePodSandbox #0 NoSandbox", "ConfigPodSandbox #0", "StartContainer app NewSandbox")
	id := syncertest.Newest(t, res, "app").ID
	st, err := h.RT.ContainerStatus(h.Ctx, id, false)
	if err != nil || st.GetStatus().GetStopSignal() != runtimeapi.Signal_SIGNAL_SIGUSR1 {
		t.Errorf("stop signal %v, %v; want SIGUSR1", st.GetStatus().GetStopSignal(), err)
	}

	old := syncertest.New(t, func(o *syncer.SyncerOptions) {
		rt := enginetest.NewRuntime(enginetest.WithClock(o.Clock), enginetest.WithImages(enginetest.Image), enginetest.WithoutStopSignals())
		o.Runtime, o.Images = rt, rt
	})
	res = old.Sync(pod)
	syncertest.WantSteps(t, res, "CreatePodSandbox #0 NoSandbox", "ConfigPodSandbox #0", "StartContainer app !CreateContainerError")
	step := syncertest.FailedStep(t, res, syncer.ActionStartContainer, "app")
	if !strings.Contains(step.Message, "ignores lifecycle.stopSignal SIGUSR1") || !strings.Contains(step.Message, "containerd 2.1 or later") {
		t.Errorf("message %q, want the refusal of the ignored stop signal", step.Message)
	}
	if got := old.CriContainers(); len(got) != 0 {
		t.Errorf("containers left: %v", got)
	}
}

// TestHTTPSHookFallsBackToHTTP is the kubelet's fallback: an HTTPS hook
// answered in plain HTTP is sent again over HTTP, without its
// Authorization header.
func TestHTTPSHookFallsBackToHTTP(t *testing.T) {
	hs := newHookServer(t)
	h := syncertest.New(t)
	pod := enginetest.Pod()
	pod.Spec.Containers = pod.Spec.Containers[:1]
	pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{
		Host: "127.0.0.1", Path: "/tls", Port: intstr.FromInt32(int32(hs.port)), Scheme: corev1.URISchemeHTTPS,
		HTTPHeaders: []corev1.HTTPHeader{{Name: "Authorization", Value: "Bearer x"}},
	}}}
	res := h.Sync(pod)
	syncertest.WantSteps(t, res, "CreatePodSandbox #0 NoSandbox", "ConfigPodSandbox #0", "PostStartHook app", "StartContainer app NewSandbox")
	reqs := hs.requests()
	if len(reqs) != 1 || reqs[0].URL.Path != "/tls" || reqs[0].Header.Get("Authorization") != "" {
		t.Fatalf("requests %v, want one plain GET /tls without Authorization", reqs)
	}
}

// TestHTTPGetHookRedirects: a hook follows a redirect to the same host,
// never one to another host (the kubelet's RedirectChecker(false)): the
// node makes no request a pod did not name.
func TestHTTPGetHookRedirects(t *testing.T) {
	other := newHookServer(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/here":
			http.Redirect(w, r, "/there", http.StatusFound)
		case "/away":
			http.Redirect(w, r, "http://localhost:"+strconv.Itoa(other.port)+"/elsewhere", http.StatusFound)
		default:
			w.Header().Set("X-Seen", r.URL.Path)
		}
	}))
	t.Cleanup(srv.Close)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	h := syncertest.New(t)
	pod := enginetest.Pod()
	for i, p := range []string{"/here", "/away"} {
		pod.Spec.Containers[i].Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{
			Host: "127.0.0.1", Path: p, Port: intstr.FromInt32(int32(port)),
		}}}
	}
	res := h.Sync(pod)
	syncertest.WantSteps(t, res, "CreatePodSandbox #0 NoSandbox", "ConfigPodSandbox #0",
		"PostStartHook app", "StartContainer app NewSandbox", "PostStartHook helper", "StartContainer helper NewSandbox")
	if got := other.requests(); len(got) != 0 {
		t.Errorf("the redirect to another host was followed: %v", got)
	}
}
