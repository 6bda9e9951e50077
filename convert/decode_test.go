package convert

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// decodedNames lists the names of the objects of m, by kind.
type decodedNames struct {
	Pods, ConfigMaps, Secrets []string
}

func namesOf(m *Manifests) decodedNames {
	var n decodedNames
	for _, p := range m.Pods {
		n.Pods = append(n.Pods, p.Namespace+"/"+p.Name)
	}
	for _, c := range m.ConfigMaps {
		n.ConfigMaps = append(n.ConfigMaps, c.Namespace+"/"+c.Name)
	}
	for _, s := range m.Secrets {
		n.Secrets = append(n.Secrets, s.Namespace+"/"+s.Name)
	}
	return n
}

// TestDecodeTestdata decodes every shared manifest; a manifest without a row
// here fails the test, so each is checked.
func TestDecodeTestdata(t *testing.T) {
	want := map[string]decodedNames{
		"multi-container.yaml": {Pods: []string{"shop/web"}},
		"init-containers.yaml": {Pods: []string{"/app-with-init"}},
		"sidecar.yaml":         {Pods: []string{"default/app-with-sidecar"}},
		"volumes.yaml": {
			Pods:       []string{"demo/volumes"},
			ConfigMaps: []string{"demo/app-config"},
			Secrets:    []string{"demo/db-credentials"},
		},
		"api-volumes.yaml": {
			Pods:       []string{"demo/api-volumes"},
			ConfigMaps: []string{"demo/api-config"},
			Secrets:    []string{"demo/api-token"},
		},
		"host-network.yaml":     {Pods: []string{"kube-system/node-agent"}},
		"probes-hooks.yaml":     {Pods: []string{"/probed"}},
		"container-fields.yaml": {Pods: []string{"/container-fields"}},
		"downward-api.yaml":     {Pods: []string{"demo/downward", "demo/downward-default-account"}},
		"job.yaml":              {Pods: []string{"batch/batch-report"}},
		"restart-rules.yaml":    {Pods: []string{"demo/restart-rules"}},
		"security-context.yaml": {Pods: []string{"default/confined"}},
		"pod-fields.yaml": {
			Pods:    []string{"default/pod-fields"},
			Secrets: []string{"default/registry-creds"},
		},
		"runtime-class.yaml": {Pods: []string{"default/runtime-class"}},
		"list.yaml": {
			Pods:       []string{"default/greeter"},
			ConfigMaps: []string{"default/greeter-config"},
		},
	}
	seen := make(map[string]bool)
	for _, path := range manifestFiles(t) {
		name := filepath.Base(path)
		seen[name] = true
		t.Run(name, func(t *testing.T) {
			w, ok := want[name]
			if !ok {
				t.Fatalf("no expectation for %s: add a row", name)
			}
			if diff := cmp.Diff(w, namesOf(decodeFile(t, path))); diff != "" {
				t.Errorf("decoded objects (-want +got):\n%s", diff)
			}
		})
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("%s is missing from %s", name, manifestsDir)
		}
	}
}

// TestDecodeMultiDocument checks a YAML stream of a Pod, a ConfigMap and a
// Secret, including YAML 1.1 octal file modes.
func TestDecodeMultiDocument(t *testing.T) {
	m := decodeFile(t, filepath.Join(manifestsDir, "volumes.yaml"))
	if len(m.Pods) != 1 || len(m.ConfigMaps) != 1 || len(m.Secrets) != 1 {
		t.Fatalf("decoded %d pods, %d configmaps, %d secrets, want 1 of each", len(m.Pods), len(m.ConfigMaps), len(m.Secrets))
	}
	vols := m.Pods[0].Spec.Volumes
	if got := vols[0].ConfigMap.DefaultMode; !cmp.Equal(got, ptr.To[int32](0o444)) {
		t.Errorf("configMap defaultMode = %v, want 0444", got)
	}
	if got := vols[0].ConfigMap.Items[1].Mode; !cmp.Equal(got, ptr.To[int32](0o440)) {
		t.Errorf("configMap item mode = %v, want 0440", got)
	}
	if got := m.Secrets[0].Data["DB_USER"]; string(got) != "app" {
		t.Errorf("secret data DB_USER = %q, want base64-decoded %q", got, "app")
	}
	if got := m.Secrets[0].StringData["DB_HOST"]; got != "db.demo.svc" {
		t.Errorf("secret stringData DB_HOST = %q, want %q", got, "db.demo.svc")
	}
	if got := m.ConfigMaps[0].Data["MODE"]; got != "production" {
		t.Errorf("configmap data MODE = %q, want production", got)
	}
}

// TestDecodeDoesNotDefault checks that Decode leaves defaulting to callers.
func TestDecodeDoesNotDefault(t *testing.T) {
	m := decodeFile(t, filepath.Join(manifestsDir, "init-containers.yaml"))
	pod := m.Pods[0]
	if pod.Namespace != "" || pod.UID != "" || pod.Spec.RestartPolicy != "" || pod.Spec.Containers[0].ImagePullPolicy != "" {
		t.Errorf("Decode defaulted the pod: namespace %q, uid %q, restartPolicy %q, imagePullPolicy %q",
			pod.Namespace, pod.UID, pod.Spec.RestartPolicy, pod.Spec.Containers[0].ImagePullPolicy)
	}
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want decodedNames
	}{
		{
			name: "json object",
			in: `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "namespace": "ns"},
			      "spec": {"containers": [{"name": "c", "image": "registry.local/busybox:1.37"}]}}`,
			want: decodedNames{Pods: []string{"ns/a"}},
		},
		{
			name: "json stream",
			in: `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"k": "v"}}
			     {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"k": "v"}}`,
			want: decodedNames{ConfigMaps: []string{"/cm"}, Secrets: []string{"/s"}},
		},
		{
			name: "json list",
			in: `{"apiVersion": "v1", "kind": "List", "items": [
			        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
			        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}]}`,
			want: decodedNames{Pods: []string{"/a"}, Secrets: []string{"/s"}},
		},
		{
			name: "empty and comment-only documents are skipped",
			in: "# leading comment\n---\n---\n" +
				"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: one\n" +
				"---\n# only a comment\n---\n\n---\n" +
				"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: two\n---\n",
			want: decodedNames{ConfigMaps: []string{"/one", "/two"}},
		},
		{
			name: "empty list",
			in:   "apiVersion: v1\nkind: List\nitems: []\n",
			want: decodedNames{},
		},
		{
			name: "empty input",
			in:   "",
			want: decodedNames{},
		},
		{
			name: "list items keep their place among documents",
			in: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: first}\n---\n" +
				"apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: second}}\n---\n" +
				"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: third}\n",
			want: decodedNames{ConfigMaps: []string{"/first", "/second", "/third"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Decode(strings.NewReader(tc.in))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if diff := cmp.Diff(tc.want, namesOf(m)); diff != "" {
				t.Errorf("decoded objects (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDecodeList checks the shared List manifest in detail.
func TestDecodeList(t *testing.T) {
	m := decodeFile(t, filepath.Join(manifestsDir, "list.yaml"))
	if len(m.Pods) != 1 || len(m.ConfigMaps) != 1 {
		t.Fatalf("decoded %d pods, %d configmaps, want 1 of each", len(m.Pods), len(m.ConfigMaps))
	}
	ref := m.Pods[0].Spec.Containers[0].Env[0].ValueFrom.ConfigMapKeyRef
	want := &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "greeter-config"}, Key: "GREETING"}
	if diff := cmp.Diff(want, ref); diff != "" {
		t.Errorf("configMapKeyRef (-want +got):\n%s", diff)
	}
	if got := m.Pods[0].Kind; got != "Pod" {
		t.Errorf("list item kind = %q, want Pod", got)
	}
}

func TestDecodeErrors(t *testing.T) {
	const pod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: c\n    image: i\n"
	tests := []struct {
		name string
		in   string
		// want is the *DocumentError expected, without Err.
		want DocumentError
		// contains are substrings the message must hold.
		contains []string
	}{
		{
			name:     "unknown field names the field path",
			in:       pod + "    imagePullPolicyy: Always\n",
			want:     DocumentError{Index: 0, Item: -1, Kind: "Pod", Name: "web"},
			contains: []string{`unknown field "spec.containers[0].imagePullPolicyy"`, `document 0 (Pod "web")`},
		},
		{
			name: "unknown field in a later document",
			in: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n---\n# a comment\n---\n" +
				"apiVersion: v1\nkind: Secret\nmetadata: {name: creds}\nstringdata: {a: b}\n",
			want:     DocumentError{Index: 1, Item: -1, Kind: "Secret", Name: "creds"},
			contains: []string{`unknown field "stringdata"`, `document 1 (Secret "creds")`},
		},
		{
			name:     "field names are case-sensitive",
			in:       pod + "    ports:\n    - containerport: 80\n",
			want:     DocumentError{Index: 0, Item: -1, Kind: "Pod", Name: "web"},
			contains: []string{`unknown field "spec.containers[0].ports[0].containerport"`},
		},
		{
			name:     "unknown field in json",
			in:       `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "labelz": {}}}`,
			want:     DocumentError{Index: 0, Item: -1, Kind: "Pod", Name: "web"},
			contains: []string{`unknown field "metadata.labelz"`},
		},
		{
			name:     "duplicate field in json",
			in:       `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"}, "spec": {"restartPolicy": "Never", "restartPolicy": "Always"}}`,
			want:     DocumentError{Index: 0, Item: -1, Kind: "Pod", Name: "web"},
			contains: []string{`duplicate field "spec.restartPolicy"`},
		},
		{
			name:     "duplicate key in yaml",
			in:       pod + "  restartPolicy: Never\n  restartPolicy: Always\n",
			contains: []string{"document 0: convert yaml to json", "restartPolicy"},
			want:     DocumentError{Index: 0, Item: -1},
		},
		{
			name:     "unknown field in a list item",
			in:       "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: ok}}\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: bad}, dta: {}}\n",
			want:     DocumentError{Index: 0, Item: 1, Kind: "ConfigMap", Name: "bad"},
			contains: []string{`document 0 (List) item 1 (ConfigMap "bad")`, `unknown field "dta"`},
		},
		{
			name:     "unknown field in the list",
			in:       "apiVersion: v1\nkind: List\nitemz: []\n",
			want:     DocumentError{Index: 0, Item: -1, Kind: "List"},
			contains: []string{`unknown field "itemz"`},
		},
		{
			name:     "wrong kind",
			in:       "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: web}\n",
			want:     DocumentError{Index: 0, Item: -1, Kind: "Ingress", Name: "web"},
			contains: []string{`kind "Ingress" is not supported`, "or a workload (Deployment,"},
		},
		{
			name:     "wrong kind in a list",
			in:       "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Endpoints, metadata: {name: data}}\n",
			want:     DocumentError{Index: 0, Item: 0, Kind: "Endpoints", Name: "data"},
			contains: []string{`kind "Endpoints" is not supported`},
		},
		{
			name:     "list in a list",
			in:       "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: List, items: []}\n",
			want:     DocumentError{Index: 0, Item: 0, Kind: "List"},
			contains: []string{"a List cannot hold a List"},
		},
		{
			name:     "wrong apiVersion",
			in:       "apiVersion: apps/v1\nkind: Pod\nmetadata: {name: web}\n",
			want:     DocumentError{Index: 0, Item: -1, Kind: "Pod", Name: "web"},
			contains: []string{`apiVersion "apps/v1" is not supported, want "v1"`},
		},
		{
			name:     "wrong apiVersion for a core kind",
			in:       "apiVersion: v2\nkind: Pod\nmetadata: {name: web}\n",
			want:     DocumentError{Index: 0, Item: -1, Kind: "Pod", Name: "web"},
			contains: []string{`apiVersion "v2" is not supported`},
		},
		{
			name:     "missing apiVersion",
			in:       "kind: Pod\nmetadata: {name: web}\n",
			want:     DocumentError{Index: 0, Item: -1, Kind: "Pod", Name: "web"},
			contains: []string{"apiVersion is missing"},
		},
		{
			name:     "missing kind",
			in:       "apiVersion: v1\nmetadata: {name: web}\n",
			want:     DocumentError{Index: 0, Item: -1, Name: "web"},
			contains: []string{"kind is missing"},
		},
		{
			name:     "kind is not a string",
			in:       "apiVersion: v1\nkind: [Pod]\n",
			want:     DocumentError{Index: 0, Item: -1},
			contains: []string{"kind is not a string"},
		},
		{
			name:     "document is not an object",
			in:       "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n---\n- just\n- a list\n",
			want:     DocumentError{Index: 1, Item: -1},
			contains: []string{"document 1: read object"},
		},
		{
			name:     "wrong value type",
			in:       pod + "  terminationGracePeriodSeconds: soon\n",
			want:     DocumentError{Index: 0, Item: -1, Kind: "Pod", Name: "web"},
			contains: []string{"terminationGracePeriodSeconds"},
		},
		{
			name:     "invalid json after a valid document",
			in:       `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}} {"apiVersion": `,
			want:     DocumentError{Index: 1, Item: -1},
			contains: []string{"document 1: read json"},
		},
		{
			name:     "invalid yaml separator",
			in:       "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n--- junk\n",
			want:     DocumentError{Index: 0, Item: -1},
			contains: []string{"document 0: read yaml", "junk"},
		},
		{
			name:     "invalid json",
			in:       `{"apiVersion": "v1", "kind": "Pod"`,
			want:     DocumentError{Index: 0, Item: -1},
			contains: []string{"document 0: read json"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Decode(strings.NewReader(tc.in))
			if err == nil {
				t.Fatalf("Decode = %+v, want an error", namesOf(m))
			}
			for _, s := range tc.contains {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
			var de *DocumentError
			if !errors.As(err, &de) {
				t.Fatalf("error %q (%T) is not a *DocumentError", err, err)
			}
			got := *de
			got.Err = nil
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("DocumentError (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeReadError(t *testing.T) {
	errBroken := errors.New("broken pipe")
	_, err := Decode(iotest.ErrReader(errBroken))
	if !errors.Is(err, errBroken) {
		t.Errorf("Decode error = %v, want it to wrap %v", err, errBroken)
	}
}
