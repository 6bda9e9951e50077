package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/podsync/podsync/internal/testing/testdaemon"
)

// TestVolumeListRemove: a pod's persistentVolumeClaim volume is listed
// with the pods naming it, cannot be removed while they are stored, is
// kept when they are deleted, and volume rm removes it.
func TestVolumeListRemove(t *testing.T) {
	td := testdaemon.New(t, testdaemon.Options{Images: []string{testImage}})
	d := &podsyncd{rt: td.Runtime, address: td.Target}
	pod := func(name string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + "}\nspec:\n  containers:\n  - name: app\n    image: " + testImage +
			"\n    volumeMounts: [{name: data, mountPath: /data}]\n  volumes:\n  - name: data\n    persistentVolumeClaim: {claimName: shared}\n"
	}
	mustSucceed(t, "run a", d.run(t, pod("a"), "run", "-f", "-"))
	mustSucceed(t, "run b", d.run(t, pod("b"), "run", "-f", "-"))
	r := d.run(t, "", "volume", "ls")
	mustSucceed(t, "volume ls", r)
	golden(t, "volume-ls.txt", strings.ReplaceAll(r.stdout, td.RootDir, "ROOT"))

	r = d.run(t, "", "volume", "rm", "shared")
	if r.code != 1 {
		t.Errorf("volume rm of a volume in use: exit %d", r.code)
	}
	golden(t, "volume-rm-in-use.txt", r.stderr)

	mustSucceed(t, "delete", d.run(t, "", "delete", "a", "b"))
	r = d.run(t, "", "volume", "ls")
	mustSucceed(t, "volume ls after delete", r)
	if !strings.Contains(r.stdout, "shared   <none>") {
		t.Errorf("the volume is not kept once its pods are deleted:\n%s", r.stdout)
	}
	r = d.run(t, "", "volume", "rm", "shared")
	mustSucceed(t, "volume rm", r)
	if r.stdout != "volume \"shared\" removed\n" {
		t.Errorf("volume rm printed %q", r.stdout)
	}
	r = d.run(t, "", "volume", "ls")
	if r.code != 0 || r.stdout != "" || r.stderr != "No named volumes.\n" {
		t.Errorf("volume ls after rm: %+v", r)
	}
	r = d.run(t, "", "volume", "rm", "shared")
	if r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("volume rm of a missing volume: %+v", r)
	}
	mustSucceed(t, "volume rm --ignore-not-found", d.run(t, "", "volume", "rm", "--ignore-not-found", "shared"))
}

// TestLabelsReachADownwardAPIFile: run again with new labels, and the
// running pod's downwardAPI file shows them (its next pass swaps the file
// in); the container is not restarted.
func TestLabelsReachADownwardAPIFile(t *testing.T) {
	td := testdaemon.New(t, testdaemon.Options{Images: []string{testImage}})
	d := &podsyncd{rt: td.Runtime, address: td.Target}
	pod := func(tier string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata: {name: info, labels: {tier: " + tier + "}}\nspec:\n  containers:\n  - name: app\n    image: " + testImage +
			"\n    volumeMounts: [{name: info, mountPath: /info}]\n  volumes:\n  - name: info\n    downwardAPI:\n" +
			"      items: [{path: labels, fieldRef: {fieldPath: metadata.labels}}]\n"
	}
	mustSucceed(t, "run", d.run(t, pod("bronze"), "run", "-f", "-"))
	var file string
	_ = filepath.WalkDir(td.RootDir, func(p string, e os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, "/downward-api/info") {
			file = filepath.Join(p, "labels")
		}
		return err
	})
	if b, err := os.ReadFile(file); err != nil || string(b) != `tier="bronze"` {
		t.Fatalf("labels file %s = %q, %v", file, b, err)
	}
	mustSucceed(t, "run with new labels", d.run(t, pod("gold"), "run", "-f", "-"))
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(file)
		if err == nil && string(b) == `tier="gold"` {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("labels file after the change = %q, %v", b, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	r := d.run(t, "", "get", "info")
	mustSucceed(t, "get", r)
	if !hasRestarts(r.stdout, "0") {
		t.Errorf("the container restarted:\n%s", r.stdout)
	}
}

// hasRestarts reports whether get's row of the pod shows restarts.
func hasRestarts(out, restarts string) bool {
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) >= 5 && f[1] == "info" {
			return f[4] == restarts
		}
	}
	return false
}

// TestPersistentVolumeClaimDocumentCreatesTheVolume: a PersistentVolumeClaim
// document beside a pod is created as the named volume before the pod is
// sent (podman kube play's semantics), said once as created, then as
// unchanged; the pod mounts it.
func TestPersistentVolumeClaimDocumentCreatesTheVolume(t *testing.T) {
	td := testdaemon.New(t, testdaemon.Options{Images: []string{testImage}})
	d := &podsyncd{rt: td.Runtime, address: td.Target}
	manifest := "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: cache}\nspec:\n  accessModes: [ReadWriteOnce]\n" +
		"  resources: {requests: {storage: 1Gi}}\n---\n" +
		"apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers:\n  - name: app\n    image: " + testImage +
		"\n    volumeMounts: [{name: data, mountPath: /data}]\n  volumes:\n  - name: data\n    persistentVolumeClaim: {claimName: cache}\n"
	r := d.run(t, manifest, "apply", "-f", "-")
	mustSucceed(t, "apply", r)
	if !strings.HasPrefix(r.stdout, "volume/cache created\n") || !strings.Contains(r.stderr, `PersistentVolumeClaim/cache: created as the node-local named volume "cache"`) {
		t.Errorf("apply of a claim and its pod:\nstdout %q\nstderr %q", r.stdout, r.stderr)
	}
	if fi, err := os.Stat(filepath.Join(td.RootDir, "claims", "default", "cache")); err != nil || !fi.IsDir() {
		t.Errorf("named volume directory: %v", err)
	}
	r = d.run(t, manifest, "apply", "-f", "-")
	mustSucceed(t, "apply again", r)
	if !strings.HasPrefix(r.stdout, "volume/cache unchanged\n") {
		t.Errorf("apply again: stdout %q", r.stdout)
	}
	r = d.run(t, "", "volume", "ls")
	mustSucceed(t, "volume ls", r)
	if !strings.Contains(r.stdout, "cache") || !strings.Contains(r.stdout, "default/a") {
		t.Errorf("volume ls:\n%s", r.stdout)
	}
}
