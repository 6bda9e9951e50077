//go:build integration

package daemon_test

import (
	"strings"
	"testing"
)

// TestGrpcurlObjects: the object RPCs as docs/operator.md shows them:
// ApplyObjects, GetObject (a Secret's values left out), ListObjects,
// WatchObjects from a revision, DeleteObject, and a stale
// resourceVersion refused with Aborted.
func TestGrpcurlObjects(t *testing.T) {
	ctx := testContext(t)
	d := startPodsyncd(t, daemonOptions{})
	call := func(stdin, method string, flags ...string) string {
		t.Helper()
		out, err := d.grpcurl(ctx, stdin, flags, "podsync.v1.PodSyncService/"+method)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s:\n%s", method, out)
		return out
	}
	apply := `{"configMaps": [{"metadata": {"name": "web-config", "namespace": "itest"}, "data": {"greeting": "hello"}}],` +
		` "secrets": [{"metadata": {"name": "web-token", "namespace": "itest"}, "stringData": {"token": "s3cret"}}]}`
	out := call(apply, "ApplyObjects")
	for _, want := range []string{`"kind": "OBJECT_KIND_CONFIG_MAP"`, `"resourceVersion": "1"`, `"created": true`, `"changed": true`} {
		if !strings.Contains(out, want) {
			t.Errorf("ApplyObjects output has no %s", want)
		}
	}
	out = call(`{"kind": "OBJECT_KIND_SECRET", "namespace": "itest", "name": "web-token"}`, "GetObject")
	if strings.Contains(out, "s3cret") || strings.Contains(out, "czNjcmV0") || !strings.Contains(out, `"token"`) {
		t.Errorf("GetObject of a Secret shows its value or not its key")
	}
	out = call(`{"namespace": "itest"}`, "ListObjects")
	if !strings.Contains(out, `"web-config"`) || !strings.Contains(out, `"web-token"`) {
		t.Errorf("ListObjects misses an object")
	}
	call(`{"configMaps": [{"metadata": {"name": "web-config", "namespace": "itest", "resourceVersion": "1"}, "data": {"greeting": "hello again"}}]}`, "ApplyObjects")
	_, err := d.grpcurl(ctx, `{"configMaps": [{"metadata": {"name": "web-config", "namespace": "itest", "resourceVersion": "1"}, "data": {"greeting": "stale"}}]}`,
		nil, "podsync.v1.PodSyncService/ApplyObjects")
	if err == nil || !strings.Contains(err.Error(), "Aborted") || !strings.Contains(err.Error(), "REVISION_MISMATCH") {
		t.Errorf("ApplyObjects at a stale version: %v, want Aborted REVISION_MISMATCH", err)
	} else {
		t.Logf("stale ApplyObjects:\n%v", err)
	}
	out = call(`{"kind": "OBJECT_KIND_CONFIG_MAP", "namespace": "itest", "name": "web-config"}`, "DeleteObject")
	if !strings.Contains(out, `"found": true`) {
		t.Errorf("DeleteObject: %s", out)
	}
	out, _ = d.grpcurl(ctx, `{"sinceRevision": "1"}`, []string{"-max-time", "2"}, "podsync.v1.PodSyncService/WatchObjects")
	t.Logf("WatchObjects:\n%s", out)
	if !strings.Contains(out, `"deleted"`) || strings.Count(out, `"applied"`) != 2 {
		t.Errorf("WatchObjects from revision 1: want the Secret, the update and the deletion:\n%s", out)
	}
}
