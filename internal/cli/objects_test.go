package cli

import (
	"os"
	"strings"
	"testing"
)

// TestApplyGetDeleteObjects: apply stores the ConfigMaps and Secrets of
// one file and the pods of another, which refer to them; get cm and get
// secrets list them without a Secret's value; a second apply reports
// them unchanged; delete cm removes one.
func TestApplyGetDeleteObjects(t *testing.T) {
	d := startPodsyncd(t)
	objects := writeManifest(t, "config.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web-config\ndata:\n  greeting: hello\n"+
		"---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: web-token\nstringData:\n  token: s3cret\n")
	pod := writeManifest(t, "pod.yaml", podManifest("web", "sleep inf",
		"  volumes:\n  - name: cfg\n    configMap: {name: web-config}\n")+
		"    env:\n    - name: TOKEN\n      valueFrom: {secretKeyRef: {name: web-token, key: token}}\n")

	r := d.run(t, "", "apply", "-f", pod)
	mustSucceed(t, "apply of a pod whose objects are not stored yet", r)
	if !strings.Contains(r.stdout, "pod/web created") {
		t.Errorf("apply output:\n%s", r.stdout)
	}
	// kubectl's unchanged for the same pod again, configured for a change.
	if r = d.run(t, "", "apply", "-f", pod); r.code != 0 || !strings.Contains(r.stdout, "pod/web unchanged") {
		t.Errorf("apply of the same pod again: %+v", r)
	}
	changed := writeManifest(t, "pod2.yaml", strings.Replace(readFile(t, pod), "sleep inf", "sleep 1d", 1))
	if r = d.run(t, "", "apply", "-f", changed); r.code != 0 || !strings.Contains(r.stdout, "pod/web configured") {
		t.Errorf("apply of a changed pod: %+v", r)
	}
	r = d.run(t, "", "apply", "-f", objects)
	mustSucceed(t, "apply objects", r)
	for _, want := range []string{"configmap/web-config created", "secret/web-token created"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("apply output has no %q:\n%s", want, r.stdout)
		}
	}
	r = d.run(t, "", "apply", "-f", objects)
	mustSucceed(t, "apply again", r)
	if !strings.Contains(r.stdout, "configmap/web-config unchanged") {
		t.Errorf("second apply output:\n%s", r.stdout)
	}

	r = d.run(t, "", "get", "cm")
	mustSucceed(t, "get cm", r)
	if !hasRow(r.stdout, "default", "web-config", "1") {
		t.Errorf("get cm:\n%s", r.stdout)
	}
	r = d.run(t, "", "get", "secrets", "web-token", "-o", "json")
	mustSucceed(t, "get secret -o json", r)
	if strings.Contains(r.stdout, "s3cret") || strings.Contains(r.stdout, "czNjcmV0") || !strings.Contains(r.stdout, `"token"`) {
		t.Errorf("get secret shows its value, or not its key:\n%s", r.stdout)
	}

	r = d.run(t, "", "delete", "cm", "web-config")
	mustSucceed(t, "delete cm", r)
	if !strings.Contains(r.stdout, "configmap/web-config deleted") {
		t.Errorf("delete output:\n%s", r.stdout)
	}
	if r = d.run(t, "", "delete", "cm", "web-config"); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("delete of a missing ConfigMap: exit %d, stderr %s", r.code, r.stderr)
	}
	mustSucceed(t, "delete --ignore-not-found", d.run(t, "", "delete", "cm", "web-config", "--ignore-not-found"))
	if r = d.run(t, "", "get", "cm"); !strings.Contains(r.stderr, "No resources found") {
		t.Errorf("get cm after the delete: %s %s", r.stdout, r.stderr)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
