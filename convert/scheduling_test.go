package convert_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/structpb"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/convert"
)

// A pod as charts render it: the scheduling fields a node checks
// (nodeSelector, tolerations, required node affinity) and those it
// accepts without effect (preferred node affinity, pod anti-affinity,
// topology spread) all survive the trip through the API.
const chartPod = `apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  nodeSelector:
    kubernetes.io/os: linux
  tolerations:
  - key: node.kubernetes.io/not-ready
    operator: Exists
    effect: NoExecute
    tolerationSeconds: 300
  - key: node.kubernetes.io/unreachable
    operator: Exists
    effect: NoExecute
    tolerationSeconds: 300
  - key: dedicated
    operator: Equal
    value: web
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions:
          - {key: kubernetes.io/arch, operator: In, values: [amd64, arm64]}
          matchFields:
          - {key: metadata.name, operator: NotIn, values: [other]}
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 10
        preference:
          matchExpressions:
          - {key: disk, operator: Exists}
    podAntiAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels: {app: web}
    podAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - topologyKey: topology.kubernetes.io/zone
        labelSelector:
          matchExpressions:
          - {key: app, operator: In, values: [db]}
  topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels: {app: web}
  containers:
  - name: web
    image: nginx
`

func TestSchedulingFieldsRoundTrip(t *testing.T) {
	m, err := convert.Decode(strings.NewReader(chartPod))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{
		`Pod "web": spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution: accepted, no effect: podsync runs on one node and has no scheduler`,
		`Pod "web": spec.affinity.podAffinity: accepted, no effect: podsync runs on one node and has no scheduler`,
		`Pod "web": spec.affinity.podAntiAffinity: accepted, no effect: podsync runs on one node and has no scheduler`,
		`Pod "web": spec.topologySpreadConstraints: accepted, no effect: podsync runs on one node and has no scheduler`,
	}, m.Notices); d != "" {
		t.Errorf("notices (-want +got):\n%s", d)
	}
	pod := m.Pods[0]
	convert.Default(pod)
	pb, err := convert.PodToProto(pod)
	if err != nil {
		t.Fatalf("PodToProto: %v", err)
	}
	if got := pb.GetSpec().GetNodeSelector()["kubernetes.io/os"]; got != "linux" {
		t.Errorf("proto nodeSelector = %q, want linux", got)
	}
	back, err := convert.PodFromProto(pb)
	if err != nil {
		t.Fatalf("PodFromProto: %v", err)
	}
	if d := cmp.Diff(pod, back); d != "" {
		t.Errorf("round trip (-want +got):\n%s", d)
	}
}

func TestSchedulingJSONFieldsDecodeStrictly(t *testing.T) {
	bad, err := structpb.NewStruct(map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": []any{map[string]any{"topologyKey": "k", "topologyKeyy": "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	pb := &podsyncv1.Pod{
		Metadata: &podsyncv1.ObjectMeta{Name: "p"},
		Spec: &podsyncv1.PodSpec{
			Containers: []*podsyncv1.Container{{Name: "c", Image: "i"}},
			Affinity:   &podsyncv1.Affinity{PodAffinity: bad},
		},
	}
	_, err = convert.PodFromProto(pb)
	var inv *convert.InvalidError
	if !errors.As(err, &inv) || len(inv.Errors) != 1 || inv.Errors[0].Field != "spec.affinity.podAffinity" || !strings.Contains(inv.Errors[0].Error(), "topologyKeyy") {
		t.Fatalf("PodFromProto error = %v, want spec.affinity.podAffinity naming topologyKeyy", err)
	}
}
