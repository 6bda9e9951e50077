package convert_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/podsync/podsync/convert"
)

const readPod = `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: web
    image: registry.local/busybox:local
`

// TestReadManifests: every problem of every source, with its line, in
// the words of a manifest; what is fine passes.
func TestReadManifests(t *testing.T) {
	tests := []struct {
		name         string
		sources      []string
		decodeOnly   bool
		wantProblems []string
		wantNotices  []string
		// wantUID, when set, is the first pod's uid after reading.
		wantUID string
	}{
		{name: "a valid pod", sources: []string{readPod}},
		{name: "quantities, port names and YAML 1.1 booleans decode as the API server decodes them", sources: []string{readPod +
			"    resources: {limits: {cpu: 1, memory: 128Mi}}\n    ports: [{name: http, containerPort: 80}]\n" +
			"    readinessProbe: {tcpSocket: {port: http}}\n    securityContext: {allowPrivilegeEscalation: no}\n"}},
		{name: "wrong types name the path and what was wanted", sources: []string{readPod +
			"    command: sh -c true\n    ports: [{containerPort: \"80\"}]\n    resources: {limits: {cpu: [1]}}\n    env: [{name: A, value: on}]\n"},
			wantProblems: []string{
				`f0:9: Pod/web: spec.containers[0].command: want a list, got the string "sh -c true"`,
				`f0:10: Pod/web: spec.containers[0].ports[0].containerPort: want an integer, got the string "80"`,
				`f0:11: Pod/web: spec.containers[0].resources.limits.cpu: want a quantity such as "500m" or "128Mi", got a list`,
				`f0:12: Pod/web: spec.containers[0].env[0].value: want a string, got the boolean on (YAML reads an unquoted on as one); quote it`,
			}},
		{name: "one round: validation's problems come with the type check's, each at its line and field",
			sources: []string{strings.Replace(readPod, "  containers:", "  restartPolicy: Sometimes\n  containers:", 1) +
				"    imagee: busybox\n    resources: {limits: {memory: 12XB}}\n    ports: [{containerPort: eighty}]\n" +
				"  volumes: [{name: data, emptyDir: {sizeLimit: 1Zz}}]\n"},
			wantProblems: []string{
				`f0:6: Pod/web: spec.restartPolicy: "Sometimes" is not one of the values podsync knows: "Always", "OnFailure", "Never"`,
				`f0:10: Pod/web: spec.containers[0].imagee: unknown field; did you mean image?`,
				`f0:11: Pod/web: spec.containers[0].resources.limits.memory: "12XB" is not valid: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'`,
				`f0:12: Pod/web: spec.containers[0].ports[0].containerPort: want an integer, got the string "eighty"`,
				`f0:13: Pod/web: spec.volumes[0].emptyDir.sizeLimit: "1Zz" is not valid: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'`,
			}},
		{name: "a removed field is not also reported missing, nor the field a typo meant",
			sources: []string{strings.Replace(readPod, "    image: registry.local/busybox:local\n", "    imag: registry.local/busybox:local\n    ports: [{containerport: 80}, {containerPort: x}]\n", 1) +
				"---\napiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  containers: [{name: [c], image: i}]\n"},
			wantProblems: []string{
				`f0:8: Pod/web: spec.containers[0].imag: unknown field; did you mean image?`,
				`f0:9: Pod/web: spec.containers[0].ports[0].containerport: unknown field; did you mean containerPort?`,
				`f0:9: Pod/web: spec.containers[0].ports[1].containerPort: want an integer, got the string "x"`,
				`f0:15: Pod/x: spec.containers[0].name: want a string, got a list`,
			}},
		{name: "a refused field does not hide the rest of the pod",
			sources: []string{strings.Replace(readPod, "  containers:", "  readinessGates: [{conditionType: x}]\n  restartPolicy: Sometimes\n  containers:", 1)},
			wantProblems: []string{
				`f0:6: Pod/web: spec.readinessGates: readiness gates are set by controllers podsync does not run; remove them`,
				`f0:7: Pod/web: spec.restartPolicy: "Sometimes" is not one of the values podsync knows: "Always", "OnFailure", "Never"`,
			}},
		{name: "a bad time is reported at its field", sources: []string{strings.Replace(readPod, "  name: web\n", "  name: web\n  creationTimestamp: yesterday\n", 1)},
			wantProblems: []string{`f0:5: Pod/web: metadata.creationTimestamp: want a time such as "2026-01-02T15:04:05Z", got the string "yesterday"`}},
		{name: "unknown fields suggest the nearest known one, or none", sources: []string{strings.Replace(readPod, "  containers:", "  restartPolice: Never\n  frobnicate: 1\n  containers:", 1)},
			wantProblems: []string{
				`f0:6: Pod/web: spec.restartPolice: unknown field; did you mean restartPolicy?`,
				`f0:7: Pod/web: spec.frobnicate: unknown field`,
			}},
		{name: "a List's items are checked with their lines", sources: []string{"apiVersion: v1\nkind: List\nitems:\n" +
			"- apiVersion: v1\n  kind: Pod\n  metadata: {name: a}\n  spec: {containers: [{name: c, image: i}]}\n" +
			"- apiVersion: v1\n  kind: Pod\n  metadata: {name: b}\n  spec: {containers: [{name: c}]}\n"},
			wantProblems: []string{`f0:11: Pod/b: spec.containers[0].image: required`}},
		{name: "every source is checked and references reach across sources", sources: []string{
			readPod + "    envFrom: [{configMapRef: {name: cfg}}, {secretRef: {name: creds}}]\n",
			"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: creds}\nstringData: {a: b}\n",
			readPod,
			"apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  containers: {name: c}\n",
		},
			wantProblems: []string{
				`f2:4: Pod/web: metadata.name: "default/web" is given twice`,
				`f3:5: Pod/x: spec.containers: want a list, got an object`,
			}},
		{name: "a dump's server-filled fields are dropped with a notice, its uid kept", sources: []string{
			strings.Replace(readPod, "  name: web\n", "  name: web\n  uid: 5d0c6a0e-3c1b-4f57-9a43-2b8c1f7e9d10\n  resourceVersion: \"7\"\n  generation: 2\n  selfLink: /api/v1/namespaces/default/pods/web\n  creationTimestamp: \"2026-02-27T09:14:03Z\"\n  ownerReferences: [{apiVersion: v1, kind: Node, name: node-1, uid: u}]\n", 1) +
				"    volumeMounts: [{name: kube-api-access-abcde, mountPath: /var/run/secrets/kubernetes.io/serviceaccount}]\n" +
				"  serviceAccountName: default\n  volumes:\n  - name: kube-api-access-abcde\n    projected:\n      sources:\n" +
				"      - serviceAccountToken: {path: token, expirationSeconds: 3607}\n      - configMap: {name: kube-root-ca.crt, items: [{key: ca.crt, path: ca.crt}]}\n" +
				"      - downwardAPI: {items: [{path: namespace, fieldRef: {fieldPath: metadata.namespace}}]}\nstatus: {phase: Running}\n"},
			wantUID: "5d0c6a0e-3c1b-4f57-9a43-2b8c1f7e9d10",
			wantNotices: []string{
				"f0:1: Pod/web: dropped what the API server fills in: metadata.resourceVersion, metadata.generation, metadata.selfLink, metadata.creationTimestamp, metadata.ownerReferences, status, volume kube-api-access-abcde and its mounts (the service account token the API server injects)",
				"f0:1: Pod/web: accepted spec.serviceAccountName, but no service account token is mounted: podsync has no API server to issue one",
			}},
		{name: "a projected volume of another shape is not the injected one", sources: []string{readPod +
			"  volumes:\n  - name: kube-api-access-mine\n    projected:\n      sources:\n      - serviceAccountToken: {path: token, audience: vault}\n" +
			"      - configMap: {name: kube-root-ca.crt}\n      - downwardAPI: {items: [{path: namespace, fieldRef: {fieldPath: metadata.namespace}}]}\n"},
			wantProblems: []string{
				"f0:13: Pod/web: spec.volumes[0].projected.sources[0].serviceAccountToken: a single node has no API server, so it mints no service account tokens, trust bundles or pod certificates; mount the credentials from a Secret (a secret source) or remove the source",
				`f0:14: Pod/web: spec.volumes[0].projected.sources[1].configMap.name: "kube-root-ca.crt": no ConfigMap of this name in namespace "default" in the request; set optional to run without it`,
			}},
		// podsyncd names the pod (RunPods; SyncPod refuses it).
		{name: "generateName without a name is accepted, twice", sources: []string{strings.Replace(readPod, "name: web\nspec", "generateName: web-\nspec", 1) + "---\n" +
			strings.Replace(readPod, "name: web\nspec", "generateName: web-\nspec", 1)}},
		{name: "generateName is a name's prefix", sources: []string{strings.Replace(readPod, "name: web\nspec", "generateName: Web_\nspec", 1)},
			wantProblems: []string{"f0:4: Pod: metadata.generateName: \"Web_\" is not valid: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"}},
		{name: "decode only skips podsyncd's checks", decodeOnly: true, sources: []string{strings.Replace(readPod, "name: web\n    image", "name: Web\n    image", 1)}},
		{name: "a YAML syntax error names its line", sources: []string{"apiVersion: v1\nkind: Pod\nmetadata: [\n"},
			wantProblems: []string{"f0:3: did not find expected node content"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var srcs []convert.Source
			for i, s := range tt.sources {
				srcs = append(srcs, convert.Source{Name: "f" + string(rune('0'+i)), Data: []byte(s)})
			}
			m, notices, err := convert.ReadManifests(srcs, convert.ReadOptions{DecodeOnly: tt.decodeOnly})
			var got []string
			if err != nil {
				var me *convert.ManifestsError
				if !errors.As(err, &me) {
					t.Fatalf("error %v is not a *ManifestsError", err)
				}
				for _, p := range me.Problems {
					got = append(got, p.String())
				}
			} else if m == nil || len(m.Pods) == 0 {
				t.Errorf("no error and no pods")
			} else if tt.wantUID != "" && string(m.Pods[0].UID) != tt.wantUID {
				t.Errorf("uid %q, want %q kept", m.Pods[0].UID, tt.wantUID)
			}
			if diff := cmp.Diff(tt.wantProblems, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			var gotNotices []string
			for _, n := range notices {
				gotNotices = append(gotNotices, n.String())
			}
			if diff := cmp.Diff(tt.wantNotices, gotNotices); diff != "" {
				t.Errorf("notices (-want +got):\n%s", diff)
			}
		})
	}
}
