package security_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/client"
	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/internal/testing/testdaemon"
	"github.com/podsync/podsync/server"
)

// TestBoundaryHolds is the third pass at the node as a boundary: one row
// per attack found on the surfaces added since the second (docs/security.md,
// "Threats found and held", names the row of each finding).
func TestBoundaryHolds(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{name: "1 debug container by an exec identity", run: func(t *testing.T) {
			roles := func(r server.Roles) func(*testdaemon.Options) {
				return func(o *testdaemon.Options) { o.Server.Roles = r }
			}
			add := func(e *env) error {
				_, err := e.d.Client.AddEphemeralContainer(e.ctx, &podsyncv1.AddEphemeralContainerRequest{Namespace: "default", Name: "web",
					EphemeralContainer: &podsyncv1.EphemeralContainer{Name: "dbg", Image: testdaemon.Image, Command: []string{"sh"}}})
				return err
			}
			// Refused before the pod is even looked up.
			exec := newEnv(t, roles(server.Roles{Exec: []string{testdaemon.Self()}}))
			refused(t, add(exec), codes.PermissionDenied, client.ReasonPermissionDenied, "has role exec", "needs debug")
			// The debug role gets through to the node (no such pod).
			debug := newEnv(t, roles(server.Roles{Debug: []string{testdaemon.Self()}}))
			if err := add(debug); status.Code(err) != codes.NotFound {
				t.Errorf("AddEphemeralContainer as debug: %v, want NOT_FOUND (authorized, no pod)", err)
			}
		}},
		{name: "5 another namespace's claim of the same name", run: func(t *testing.T) {
			e := newEnv(t)
			claim := func(namespace string) *corev1.Pod {
				p := basePod("app")
				p.Namespace = namespace
				p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
				p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
				return p
			}
			for _, ns := range []string{"team-a", "team-b"} {
				if _, err := e.sync(claim(ns)); err != nil {
					t.Fatalf("SyncPod in %s: %v", ns, err)
				}
			}
			vols, err := e.d.Node.Volumes().List(e.ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(vols) != 2 || vols[0].Path == vols[1].Path {
				t.Fatalf("volumes %+v: want team-a's and team-b's data apart", vols)
			}
		}},
		{name: "7 adoption of a pod-spec record the node did not write", run: func(t *testing.T) {
			e := newEnv(t)
			tenant := basePod("tenant")
			tenant.UID = "0f8fad5b-d9cb-469f-a165-70867728950e"
			// A spec too large for the node to record its own (random data
			// does not compress), carrying a record of the tenant's making:
			// kube-system/stolen, under the tenant's UID, mounting
			// kube-system's Secret.
			noise := make([]byte, 200<<10)
			_, _ = rand.Read(noise)
			tenant.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "NOISE", Value: hex.EncodeToString(noise)}}
			stolen := basePod("stolen")
			stolen.Namespace, stolen.UID = "kube-system", tenant.UID
			stolen.Spec.Volumes = []corev1.Volume{{Name: "token", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "admin-token"}}}}
			forged, _ := model.EncodePodSpec(stolen)
			tenant.Annotations = map[string]string{model.AnnotationPodSpec: forged}
			if _, err := e.sync(tenant); err != nil {
				t.Fatalf("SyncPod: %v", err)
			}
			// The store is lost; the node adopts the runtime's pods.
			st, err := store.Open(filepath.Join(t.TempDir(), "podsync.db"), store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = st.Close() }()
			n, err := engine.NewNode(engine.NodeOptions{Runtime: e.d.Runtime, Images: e.d.Runtime, Store: st, Logger: zaptest.NewLogger(t),
				Config: criconfig.Options{RootDir: t.TempDir(), PodLogDir: t.TempDir()}, AdoptRuntime: true})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(e.ctx)
			done := make(chan error, 1)
			go func() { done <- n.Run(ctx) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Run: %v", err)
				}
			}()
			deadline := time.Now().Add(10 * time.Second)
			for {
				if _, err := st.GetByName("default", "tenant"); err == nil {
					break
				}
				if _, err := st.GetByName("kube-system", "stolen"); err == nil || time.Now().After(deadline) {
					t.Fatalf("adopted kube-system/stolen (%v), want the tenant's pod in its own name", err)
				}
				time.Sleep(10 * time.Millisecond)
			}
			rec, _ := st.GetByName("default", "tenant")
			for _, v := range rec.Pod.Spec.Volumes {
				if v.Secret != nil {
					t.Errorf("the adopted pod mounts Secret %s", v.Secret.SecretName)
				}
			}
			if rec.Pod.Annotations[model.AnnotationAdopted] == "" {
				t.Errorf("the pod was adopted from a record it wrote itself, want it rebuilt in part")
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}
