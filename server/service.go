package server

import (
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// defaultNamespace is the namespace of a request that names none.
const defaultNamespace = "default"

// ServiceOptions configure NewService.
type ServiceOptions struct {
	// Backend is the node the service answers for; nil until SetBackend
	// (podsyncd builds the service before it reaches the runtime). Calls
	// are UNAVAILABLE while there is none.
	Backend *Backend
	// Validator checks requests; nil uses DefaultLimits.
	Validator *Validator
	// Health tells whether the runtime answered yet; nil means always
	// ready.
	Health *HealthChecker
	// NodeName is reported in every pod status.
	NodeName string
	// StreamIdleTimeout ends exec, attach and port-forward sessions idle
	// for that long; zero means engine.DefaultStreamIdleTimeout.
	StreamIdleTimeout time.Duration
	// Sessions, if set, count the exec, attach and port-forward sessions
	// (NewSessionMetrics).
	Sessions *SessionMetrics
	// Logger receives the service's logs; nil discards. Calls log through
	// the request-scoped logger in their ctx when there is one.
	Logger *zap.Logger
	// RequireLease refuses a mutating call that does not carry the current
	// epoch of the node's held lease (podsyncd --require-lease); without
	// it leases are advisory: only an older epoch is refused.
	RequireLease bool
}

// Service is podsync.v1.PodSyncService on a node's Backend, which may
// change while it serves (SetBackend: podsyncd runs a new node each time
// it reconnects to the runtime). Its readiness gate, UnaryReady and
// StreamReady, hands each call the backend current when it arrives, or
// refuses it with UNAVAILABLE while there is none; New installs them.
type Service interface {
	podsyncv1.PodSyncServiceServer
	// SetBackend makes b the backend of the calls that arrive from now
	// on; nil refuses them until the next.
	SetBackend(b *Backend)
	// UnaryReady and StreamReady are the readiness gate.
	UnaryReady() grpc.UnaryServerInterceptor
	StreamReady() grpc.StreamServerInterceptor
}

// service implements podsync.v1.PodSyncService on a Backend. Each RPC
// lives in its own file; translation of engine results to the API is in
// translate.go.
type service struct {
	podsyncv1.UnimplementedPodSyncServiceServer

	cur       atomic.Pointer[Backend]
	validator *Validator
	health    *HealthChecker
	nodeName  string
	log       *zap.Logger
	pods      *podCache // recordToProto's messages
	// idleTimeout and sessions are ServiceOptions.StreamIdleTimeout and
	// Sessions.
	idleTimeout time.Duration
	sessions    *SessionMetrics
	// requireLease is ServiceOptions.RequireLease.
	requireLease bool
}

var _ Service = (*service)(nil)

// NewService returns the PodSyncService of o.Backend, to pass as
// Options.Service to New.
func NewService(o ServiceOptions) Service {
	log := o.Logger
	if log == nil {
		log = zap.NewNop()
	}
	s := &service{
		validator: o.Validator,
		health:    o.Health,
		nodeName:  o.NodeName,
		log:       log,
		pods:      newPodCache(),

		idleTimeout:  o.StreamIdleTimeout,
		sessions:     o.Sessions,
		requireLease: o.RequireLease,
	}
	s.cur.Store(o.Backend)
	return s
}

// SetBackend makes b the backend of the calls that arrive from now on.
func (s *service) SetBackend(b *Backend) { s.cur.Store(b) }

func orDefaultNamespace(ns string) string {
	if ns == "" {
		return defaultNamespace
	}
	return ns
}

// podEncoding is the encoding of a pod message the service shares
// between responses (podCodec), nil for any other.
func (s *service) podEncoding(pod *podsyncv1.Pod) []byte { return s.pods.encoding(pod) }
