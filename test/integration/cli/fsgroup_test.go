//go:build integration

package cli_test

import (
	"strings"
	"testing"
)

// fsGroupManifest is the case: a non-root container (uid 1000,
// gid 3000) with fsGroup 2000 reading a Secret mounted at defaultMode
// 0440, which without the volume ownership is root:root and unreadable
// to it; and an emptyDir it writes.
const fsGroupManifest = `apiVersion: v1
kind: Secret
metadata: {name: creds}
stringData: {token: s3cr3t}
---
apiVersion: v1
kind: Pod
metadata: {name: fsgroup}
spec:
  terminationGracePeriodSeconds: 1
  securityContext: {runAsUser: 1000, runAsGroup: 3000, fsGroup: 2000}
  volumes:
  - {name: creds, secret: {secretName: creds, defaultMode: 0440}}
  - {name: scratch, emptyDir: {}}
  containers:
  - name: app
    image: registry.local/busybox:local
    command: ["sleep", "3600"]
    volumeMounts:
    - {name: creds, mountPath: /creds}
    - {name: scratch, mountPath: /scratch}
`

// TestFSGroup, as a user: the pod runs, its non-root container reads the
// Secret, stat shows the file as the kubelet leaves it (group 2000, mode
// 440), and what the container writes into its emptyDir inherits the
// group from the setgid directory.
func TestFSGroup(t *testing.T) {
	ctx := testContext(t)
	d := startPodsyncd(t)
	if r := d.ctl(ctx, fsGroupManifest, "run", "--timeout", "2m", "-f", "-"); r.code != 0 {
		t.Fatalf("run: %+v", r)
	}
	exec := func(cmd string) string {
		t.Helper()
		r := d.ctl(ctx, "", "exec", "fsgroup", "--", "sh", "-c", cmd)
		if r.code != 0 {
			t.Fatalf("exec %q: %+v", cmd, r)
		}
		return strings.TrimSpace(r.stdout)
	}
	if got := exec("id -u; id -G"); got != "1000\n3000 2000" {
		t.Errorf("id -u; id -G = %q, want 1000 and the groups 3000 2000", got)
	}
	if got := exec("cat /creds/token"); got != "s3cr3t" {
		t.Errorf("cat /creds/token = %q, want s3cr3t", got)
	}
	if got := exec("stat -L -c '%u %g %a' /creds/token"); got != "0 2000 440" {
		t.Errorf("stat /creds/token = %q, want 0 2000 440 (root:2000, group-readable)", got)
	}
	if got := exec("stat -c '%g %a' /creds"); got != "2000 2755" {
		t.Errorf("stat /creds = %q, want 2000 2755 (setgid)", got)
	}
	if got := exec("touch /scratch/x && stat -c '%u %g' /scratch/x"); got != "1000 2000" {
		t.Errorf("a file the container writes in the emptyDir: %q, want 1000 2000", got)
	}
}
