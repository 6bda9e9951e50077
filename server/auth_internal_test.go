package server

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/descriptorpb"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// The read role's methods are exactly those the API declares free of side
// effects, so a new RPC cannot slip into the read role by mistake, nor a
// read-only one be left admin-only.
func TestReadMethodsAreTheSideEffectFreeOnes(t *testing.T) {
	svc := podsyncv1.File_podsync_v1_pod_sync_service_proto.Services().ByName("PodSyncService")
	methods := svc.Methods()
	for i := range methods.Len() {
		m := methods.Get(i)
		full := "/" + string(svc.FullName()) + "/" + string(m.Name())
		opts, _ := m.Options().(*descriptorpb.MethodOptions)
		noSideEffects := opts.GetIdempotencyLevel() == descriptorpb.MethodOptions_NO_SIDE_EFFECTS
		if got := requiredRole(full) == RoleRead; got != noSideEffects {
			t.Errorf("%s: read role %v, NO_SIDE_EFFECTS %v", full, got, noSideEffects)
		}
		if mutating(full) == noSideEffects {
			t.Errorf("%s: mutating %v, NO_SIDE_EFFECTS %v", full, mutating(full), noSideEffects)
		}
	}
	for _, m := range []string{
		"/grpc.health.v1.Health/Check",
		"/grpc.health.v1.Health/Watch",
		"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
		"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
	} {
		if requiredRole(m) != RoleRead {
			t.Errorf("%s needs %v, want read", m, requiredRole(m))
		}
	}
	if requiredRole("/podsync.v1.PodSyncService/SomethingNew") != RoleAdmin {
		t.Error("an unknown method does not need admin")
	}
}

func TestRoles(t *testing.T) {
	root := Identity{Principals: []string{"uid:0", "user:root"}}
	alice := Identity{Principals: []string{"uid:1000", "user:alice"}}
	cert := Identity{Principals: []string{"cn:ops", "dns:ops.example", "uri:spiffe://example/ops"}}
	anon := Identity{Principals: []string{Anonymous}}
	for _, tt := range []struct {
		name  string
		roles Roles
		id    Identity
		want  Role
	}{
		{"root is admin by default", Roles{}, root, RoleAdmin},
		{"root made read-only by uid", Roles{Read: []string{"uid:0"}}, root, RoleRead},
		{"root made read-only by name", Roles{Read: []string{"user:root"}}, root, RoleRead},
		{"unknown uid", Roles{}, alice, RoleNone},
		{"uid read", Roles{Read: []string{"uid:1000"}}, alice, RoleRead},
		{"user admin", Roles{Admin: []string{"user:alice"}}, alice, RoleAdmin},
		{"highest role wins", Roles{Read: []string{"cn:ops"}, Admin: []string{"uri:spiffe://example/ops"}}, cert, RoleAdmin},
		{"dns read", Roles{Read: []string{"dns:ops.example"}}, cert, RoleRead},
		{"cn of another", Roles{Admin: []string{"cn:dev"}}, cert, RoleNone},
		{"anonymous refused", Roles{}, anon, RoleNone},
		{"anonymous granted", Roles{Read: []string{Anonymous}}, anon, RoleRead},
		{"no principals", Roles{Admin: []string{"cn:ops"}}, Identity{}, RoleNone},
		{"exec", Roles{Exec: []string{"cn:ops"}}, cert, RoleExec},
		{"exec above read", Roles{Read: []string{"cn:ops"}, Exec: []string{"dns:ops.example"}}, cert, RoleExec},
		{"exec above read, in either order", Roles{Exec: []string{"cn:ops"}, Read: []string{"dns:ops.example"}}, cert, RoleExec},
		{"admin above exec", Roles{Exec: []string{"cn:ops"}, Admin: []string{"dns:ops.example"}}, cert, RoleAdmin},
		{"root made exec-only", Roles{Exec: []string{"uid:0"}}, root, RoleExec},
		{"debug", Roles{Debug: []string{"cn:ops"}}, cert, RoleDebug},
		{"debug above exec, in either order", Roles{Debug: []string{"cn:ops"}, Exec: []string{"dns:ops.example"}}, cert, RoleDebug},
		{"admin above debug", Roles{Debug: []string{"cn:ops"}, Admin: []string{"dns:ops.example"}}, cert, RoleAdmin},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, err := newAuthorizer(tt.roles)
			if err != nil {
				t.Fatal(err)
			}
			if got := a.role(tt.id); got != tt.want {
				t.Errorf("role %v, want %v", got, tt.want)
			}
		})
	}
}

// TestSessionMethodsNeedExec: ExecSync, Exec, Attach and PortForward need
// the exec role, which debug and admin have and read has not; exec allows
// the read methods and nothing that changes pods — not even a debug
// container.
func TestSessionMethodsNeedExec(t *testing.T) {
	sessions := []string{
		podsyncv1.PodSyncService_ExecSync_FullMethodName, podsyncv1.PodSyncService_Exec_FullMethodName,
		podsyncv1.PodSyncService_Attach_FullMethodName, podsyncv1.PodSyncService_PortForward_FullMethodName,
	}
	id := Identity{Principals: []string{"cn:ops"}}
	for _, m := range sessions {
		if err := authorize(m, id, RoleRead); status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s as read: %v, want PERMISSION_DENIED", m, err)
		}
		for _, r := range []Role{RoleExec, RoleDebug, RoleAdmin} {
			if err := authorize(m, id, r); err != nil {
				t.Errorf("%s as %v: %v", m, r, err)
			}
		}
		if !counted(m, m != podsyncv1.PodSyncService_ExecSync_FullMethodName) {
			t.Errorf("%s is not counted against the stream cap", m)
		}
		if finishAtShutdown(m) {
			t.Errorf("%s is let finish at shutdown; sessions end when it starts", m)
		}
	}
	if err := authorize(podsyncv1.PodSyncService_GetPod_FullMethodName, id, RoleExec); err != nil {
		t.Errorf("GetPod as exec: %v", err)
	}
	for _, m := range []string{podsyncv1.PodSyncService_SyncPod_FullMethodName, podsyncv1.PodSyncService_DeletePod_FullMethodName,
		podsyncv1.PodSyncService_AddEphemeralContainer_FullMethodName} {
		if err := authorize(m, id, RoleExec); status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s as exec: %v, want PERMISSION_DENIED", m, err)
		}
	}
}

// TestDebugContainersNeedDebug: AddEphemeralContainer changes the pod, so
// it needs the debug role (or admin), never exec; debug may open sessions
// too, and change nothing else.
func TestDebugContainersNeedDebug(t *testing.T) {
	id := Identity{Principals: []string{"cn:oncall"}}
	m := podsyncv1.PodSyncService_AddEphemeralContainer_FullMethodName
	for _, r := range []Role{RoleRead, RoleExec} {
		if err := authorize(m, id, r); status.Code(err) != codes.PermissionDenied {
			t.Errorf("AddEphemeralContainer as %v: %v, want PERMISSION_DENIED", r, err)
		}
	}
	for _, r := range []Role{RoleDebug, RoleAdmin} {
		if err := authorize(m, id, r); err != nil {
			t.Errorf("AddEphemeralContainer as %v: %v", r, err)
		}
	}
	if finishAtShutdown(m) {
		t.Error("AddEphemeralContainer is let finish at shutdown")
	}
	for _, other := range []string{podsyncv1.PodSyncService_SyncPod_FullMethodName, podsyncv1.PodSyncService_DeletePod_FullMethodName,
		podsyncv1.PodSyncService_ApplyObjects_FullMethodName} {
		if err := authorize(other, id, RoleDebug); status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s as debug: %v, want PERMISSION_DENIED", other, err)
		}
	}
}

func TestRolesValidate(t *testing.T) {
	good := Roles{Admin: []string{"cn:a", "dns:b.example", "uri:spiffe://x/y", "uid:0", "user:root", Anonymous}}
	if err := good.Validate(); err != nil {
		t.Errorf("valid roles: %v", err)
	}
	for _, bad := range []string{"root", "cn:", "uid:root", "uid:-1", "email:a@b", ""} {
		if err := (Roles{Read: []string{bad}}).Validate(); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestLimiterForgetsIdleBuckets(t *testing.T) {
	l := newLimiters(RateLimit{PerSecond: 1, Burst: 1})
	now := time.Unix(0, 0)
	l.now = func() time.Time {
		now = now.Add(time.Second) // every bucket is full again
		return now
	}
	for i := range maxLimiters + 10 {
		_ = l.allow(string(rune('a'+i%26)) + string(rune(i)))
	}
	if n := len(l.m); n > maxLimiters || n < 10 {
		t.Errorf("%d buckets kept, want at least 10 and at most %d", n, maxLimiters)
	}
	if newLimiters(RateLimit{PerSecond: -1}) != nil {
		t.Error("a negative rate does not disable the limit")
	}
}
