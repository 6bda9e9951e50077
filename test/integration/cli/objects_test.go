//go:build integration

package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestApplySeparateFiles: podsyncctl apply takes a ConfigMap and a
// Secret from one file and a Deployment using them from another, applied
// separately and in the "wrong" order; the pods wait for their objects
// and run once they are applied; get cm/secrets list them without the
// Secret's value; an update of the ConfigMap reaches the mounted file in
// the running containers; delete cm removes it.
func TestApplySeparateFiles(t *testing.T) {
	ctx := testContext(t)
	d := startPodsyncd(t)
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	config := func(greeting string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web-config}\ndata: {greeting: " + greeting + "}\n---\n" +
			"apiVersion: v1\nkind: Secret\nmetadata: {name: web-token}\nstringData: {token: s3cret}\n"
	}
	deploy := write("deploy.yaml", `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 1
      volumes:
      - {name: cfg, configMap: {name: web-config}}
      containers:
      - name: app
        image: registry.local/busybox:local
        command: [sh, -c, 'trap "exit 0" TERM; while true; do cat /etc/web/greeting > /tmp/seen; sleep 0.2; done']
        env:
        - name: TOKEN
          valueFrom: {secretKeyRef: {name: web-token, key: token}}
        volumeMounts:
        - {name: cfg, mountPath: /etc/web}
`)
	out := d.mustCtl(ctx, "apply", "-f", deploy)
	if !strings.Contains(out, "pod/web-0 created") || !strings.Contains(out, "pod/web-1 created") {
		t.Errorf("apply of the Deployment before its objects:\n%s", out)
	}
	if st := d.pod(ctx, "web-0").GetStatus(); st.GetPhase() == "Running" {
		t.Errorf("a pod without its ConfigMap and Secret runs: %v", st)
	}
	cfg := write("config.yaml", config("hello"))
	out = d.mustCtl(ctx, "apply", "-f", cfg)
	if !strings.Contains(out, "configmap/web-config created") || !strings.Contains(out, "secret/web-token created") {
		t.Errorf("apply of the objects:\n%s", out)
	}
	for _, name := range []string{"web-0", "web-1"} {
		eventually(ctx, t, name+" runs once its objects are applied", func() bool { return d.pod(ctx, name).GetStatus().GetPhase() == "Running" })
	}
	out = d.mustCtl(ctx, "get", "cm")
	if !hasRow(out, "default", "web-config", "1") {
		t.Errorf("get cm:\n%s", out)
	}
	if out = d.mustCtl(ctx, "get", "secrets", "web-token", "-o", "yaml"); strings.Contains(out, "s3cret") || strings.Contains(out, "czNjcmV0") {
		t.Errorf("get secret shows its value:\n%s", out)
	}

	write("config.yaml", config("bonjour"))
	out = d.mustCtl(ctx, "apply", "-f", cfg)
	if !strings.Contains(out, "configmap/web-config configured") || !strings.Contains(out, "secret/web-token unchanged") {
		t.Errorf("apply of the changed ConfigMap:\n%s", out)
	}
	rs, err := inst.RuntimeService(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rs.Close(context.Background()) }()
	for _, name := range []string{"web-0", "web-1"} {
		p := d.pod(ctx, name)
		cid := strings.TrimPrefix(p.GetStatus().GetContainerStatuses()[0].GetContainerId(), "containerd://")
		eventually(ctx, t, name+" reads the new greeting", func() bool {
			stdout, _, err := rs.ExecSync(ctx, cid, []string{"cat", "/tmp/seen"}, 10*time.Second)
			return err == nil && strings.TrimSpace(string(stdout)) == "bonjour"
		})
	}
	if out = d.mustCtl(ctx, "delete", "cm", "web-config"); !strings.Contains(out, "configmap/web-config deleted") {
		t.Errorf("delete cm:\n%s", out)
	}
}
