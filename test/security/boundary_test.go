package security_test

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/client"
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
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}
