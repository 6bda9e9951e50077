package cli

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	corev1 "k8s.io/api/core/v1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// TestKubeOutputGolden: -o yaml and json print core/v1 Pods (a kind: List
// for several, int64 fields as numbers, no podsync-only status field),
// name, jsonpath and custom-columns as kubectl documents them.
func TestKubeOutputGolden(t *testing.T) {
	for _, tt := range []struct {
		file, format string
		single       bool
	}{
		{"get-pod.yaml", "yaml", true},
		{"get-pods.yaml", "yaml", false},
		{"get-pods.json", "json", false},
		{"get-pods-name.txt", "name", false},
		{"get-pods-jsonpath.txt", `jsonpath={range .items[*]}{.metadata.name}{"\t"}{.status.podIP}{"\n"}{end}`, false},
		{"get-pod-jsonpath.txt", "jsonpath={.status.containerStatuses[0].state}", true},
		{"get-pods-custom-columns.txt", "custom-columns=NAME:.metadata.name,PHASE:status.phase,IMAGES:{.spec.containers[*].image},NODE:.spec.nodeName", false},
	} {
		p, err := newKubePrinter(tt.format, os.ReadFile)
		if err != nil {
			t.Fatal(err)
		}
		pods := testPods()[:2]
		if tt.single {
			pods = pods[:1]
		}
		objs, err := kubePods(pods)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := p.print(&b, objs, tt.single); err != nil {
			t.Fatalf("%s: %v", tt.format, err)
		}
		golden(t, tt.file, b.String())
	}
	if strings.Contains(readGolden(t, "get-pods.yaml"), "sandboxID") {
		t.Error("-o yaml shows podsync's sandboxID; -o proto-yaml is for that")
	}
}

// TestKubeFormatsRefused: a format kubectl does not document is a usage
// error naming the ones it does.
func TestKubeFormatsRefused(t *testing.T) {
	for _, o := range []string{"xml", "jsonpath=", "custom-columns=NAME", "jsonpath={.bad"} {
		if _, err := newKubePrinter(o, os.ReadFile); err == nil {
			t.Errorf("-o %s: accepted", o)
		}
	}
}

func readGolden(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDescribePodGolden: describe's page of a pod whose readiness probe
// fails: its container's state and probe, the conditions, the volumes,
// and the events, one line per series with its count.
func TestDescribePodGolden(t *testing.T) {
	p := testPods()[0]
	p.Metadata.Labels = map[string]string{"app": "web"}
	p.Spec.Containers[0].ReadinessProbe = &podsyncv1.Probe{Exec: &podsyncv1.ExecAction{Command: []string{"false"}},
		TimeoutSeconds: 1, PeriodSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3}
	p.Spec.Volumes = []*podsyncv1.Volume{{Name: "scratch", EmptyDir: &podsyncv1.EmptyDirVolumeSource{}}}
	p.Spec.Containers[0].VolumeMounts = []*podsyncv1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	pod, err := kubePod(p)
	if err != nil {
		t.Fatal(err)
	}
	ev := func(typ podsyncv1.EventType, reason, msg string, count int32, first, last time.Duration) *podsyncv1.ListedEvent {
		return &podsyncv1.ListedEvent{Pod: &podsyncv1.PodRef{Namespace: "default", Name: "web", Uid: p.GetMetadata().GetUid()},
			Event: &podsyncv1.PodEvent{Type: typ, Reason: reason, Message: msg, Container: "httpd", Count: count,
				FirstTimestamp: timestamppb.New(fixedNow.Add(-first)), Time: timestamppb.New(fixedNow.Add(-last)), Name: "web.1"}}
	}
	normal, warning := podsyncv1.EventType_EVENT_TYPE_NORMAL, podsyncv1.EventType_EVENT_TYPE_WARNING
	listed := []*podsyncv1.ListedEvent{
		ev(normal, "Pulled", `Container image "registry.local/busybox:local" already present on machine`, 1, 5*time.Minute, 5*time.Minute),
		ev(normal, "Started", "Started container httpd", 1, 5*time.Minute, 5*time.Minute),
		ev(warning, "Unhealthy", "Readiness probe failed: ", 42, 5*time.Minute, 2*time.Second),
	}
	var evs []*corev1.Event
	for _, le := range listed {
		evs = append(evs, kubeEvent(le, "node-1"))
	}
	var b bytes.Buffer
	if err := writeDescribePod(&b, pod, p.GetStatus(), evs, fixedNow, time.UTC); err != nil {
		t.Fatal(err)
	}
	golden(t, "describe.txt", b.String())
	if !strings.Contains(b.String(), "Unhealthy  2s (x42 over 5m)") {
		t.Errorf("describe lacks the counted Unhealthy line:\n%s", b.String())
	}
}
