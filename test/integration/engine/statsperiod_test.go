//go:build integration

package engine_test

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/internal/testing/localcri"
	"github.com/podsync/podsync/internal/testing/localcri/localcritest"
)

// TestStatsPeriodKeepsPodLimits: the private containerd 2.x reads its
// containers' and pod cgroups' stats every 10 s, not every second
// (docs/runtime-cost.md), and that changes nothing of the pod cgroup: a
// pod whose container allocates beyond its pod-level memory limit, with
// no limit of its own, is killed by the kernel. Containerd 1.6 has no
// background stats reader: its key of that name is its snapshot period,
// a number of seconds.
func TestStatsPeriodKeepsPodLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	st, err := e.rt.Status(e.ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		StatsCollectPeriod json.RawMessage `json:"statsCollectPeriod"`
	}
	if err := json.Unmarshal([]byte(st.GetInfo()["config"]), &cfg); err != nil {
		t.Fatalf("CRI status config: %v", err)
	}
	want := `"` + localcri.DefaultStatsCollectPeriod + `"`
	if inst.Flavour() == localcri.Containerd16 {
		want = "10"
	}
	if got := string(cfg.StatsCollectPeriod); got != want {
		t.Errorf("statsCollectPeriod = %s, want %s", got, want)
	}

	pod := e.newPod()
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	// dd holds one 64 MiB block: twice the pod's limit.
	pod.Spec.Containers = []corev1.Container{localcritest.Shell("app", "dd if=/dev/zero of=/dev/null bs=64M count=1")}
	l := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("32Mi")}
	pod.Spec.Resources = &corev1.ResourceRequirements{Requests: l.DeepCopy(), Limits: l}
	res := e.until(pod, "app terminated", func(res syncer.SyncResult) bool {
		cs := e.status(pod, res).ContainerStatuses
		return len(cs) == 1 && cs[0].State.Terminated != nil
	})
	term := e.status(pod, res).ContainerStatuses[0].State.Terminated
	if term.ExitCode != 137 {
		t.Errorf("app exited %d (%s: %s), want 137: killed at its pod's memory limit", term.ExitCode, term.Reason, strings.TrimSpace(term.Message))
	}
}
