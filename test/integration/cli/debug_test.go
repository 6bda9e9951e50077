//go:build integration

package cli_test

import (
	"context"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/engine/model"
)

// criContainers returns the runtime's containers of the pod uid named
// name (all of them when name is empty).
func criContainers(ctx context.Context, t *testing.T, uid, name string) []*runtimeapi.Container {
	t.Helper()
	rs, err := inst.RuntimeService(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rs.Close(context.Background()) }()
	cs, err := rs.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{model.LabelPodUID: uid}})
	if err != nil {
		t.Fatalf("ListContainers: %v", err)
	}
	var out []*runtimeapi.Container
	for _, c := range cs {
		if name == "" || c.GetMetadata().GetName() == name {
			out = append(out, c)
		}
	}
	return out
}

func ephemeralStatus(p *podsyncv1.Pod, name string) *podsyncv1.ContainerStatus {
	for _, st := range p.GetStatus().GetEphemeralContainerStatuses() {
		if st.GetName() == name {
			return st
		}
	}
	return nil
}

// TestDebug: podsyncctl debug --target httpd -- ps runs a debug container
// in httpd's process namespace (its ps lists httpd), shows it in the
// pod's ephemeralContainerStatuses, does not restart it once it exited,
// and removes it with the pod; with -i it attaches stdin to the debug
// container.
func TestDebug(t *testing.T) {
	ctx := testContext(t)
	d := startPodsyncd(t)
	runWeb(ctx, t, d)
	uid := d.pod(ctx, "web").GetMetadata().GetUid()

	r := d.ctl(ctx, "", "debug", "web", "--image", "registry.local/busybox:local", "--target", "httpd", "-c", "dbg", "--", "ps")
	if r.code != 0 || !strings.Contains(r.stdout, "httpd -f -p 8080") {
		t.Fatalf("debug web --target httpd -- ps = %+v; want httpd's process listed", r)
	}
	st := ephemeralStatus(d.pod(ctx, "web"), "dbg")
	if st == nil || st.GetState().GetTerminated() == nil || st.GetState().GetTerminated().GetExitCode() != 0 {
		t.Fatalf("dbg's status = %v; want terminated with exit code 0", st)
	}
	first := st.GetContainerId()

	// Not restarted: a few passes later (a relist, a kick by a spec
	// update) it is the same exited instance, the only one.
	d.mustCtl(ctx, "debug", "web", "--image", "registry.local/busybox:local", "-c", "dbg2", "--", "true")
	time.Sleep(3 * time.Second)
	st = ephemeralStatus(d.pod(ctx, "web"), "dbg")
	if st.GetContainerId() != first || st.GetRestartCount() != 0 || st.GetState().GetTerminated() == nil {
		t.Errorf("dbg's status later = %v; want the first instance %s, terminated, never restarted", st, first)
	}
	if cs := criContainers(ctx, t, uid, "dbg"); len(cs) != 1 {
		t.Errorf("the runtime holds %d instances of dbg, want 1", len(cs))
	}

	// -i attaches podsyncctl's stdin to the debug container: a shell
	// that reads ps, runs it in httpd's process namespace and ends at the
	// end of its input.
	r = d.ctl(ctx, "ps\n", "debug", "-i", "web", "--image", "registry.local/busybox:local", "--target", "httpd", "-c", "dbgi", "--", "sh")
	if r.code != 0 || !strings.Contains(r.stdout, "httpd -f -p 8080") {
		t.Errorf("echo ps | debug -i web --target httpd -- sh = %+v; want httpd's process listed", r)
	}

	// A running debug container goes with the pod.
	d.mustCtl(ctx, "debug", "web", "--image", "registry.local/busybox:local", "-c", "dbg3", "--attach=false", "--", "sleep", "3600")
	if st := ephemeralStatus(d.pod(ctx, "web"), "dbg3"); st.GetState().GetRunning() == nil {
		t.Errorf("dbg3's status = %v; want running", st)
	}
	d.mustCtl(ctx, "delete", "web")
	eventually(ctx, t, "the pod's containers are removed", func() bool { return len(criContainers(ctx, t, uid, "")) == 0 })
	if ids := sandboxes(ctx, t, uid); len(ids) > 0 {
		t.Errorf("sandboxes left after delete: %v", ids)
	}
}
