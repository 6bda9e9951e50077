package server

import (
	"time"

	"go.uber.org/zap"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/runpods"
)

// defaultNamespace is the namespace of a request that names none.
const defaultNamespace = "default"

// ServiceOptions configure NewService.
type ServiceOptions struct {
	// Node runs the pods. Required.
	Node *engine.Node
	// Validator checks requests; nil uses DefaultLimits.
	Validator *Validator
	// Health tells whether the runtime answered yet; nil means always
	// ready.
	Health *HealthChecker
	// RunPods configures RunPods (Admission, Policy, PodLogDir); its Node
	// is set from Node.
	RunPods runpods.Options
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
}

// service implements podsync.v1.PodSyncService on an engine.Node. Each RPC
// lives in its own file; translation of engine results to the API is in
// translate.go.
type service struct {
	podsyncv1.UnimplementedPodSyncServiceServer

	node      *engine.Node
	validator *Validator
	health    *HealthChecker
	runPods   runpods.Options
	nodeName  string
	log       *zap.Logger
	pods      *podCache // recordToProto's messages
	// idleTimeout and sessions are ServiceOptions.StreamIdleTimeout and
	// Sessions.
	idleTimeout time.Duration
	sessions    *SessionMetrics
}

var _ podsyncv1.PodSyncServiceServer = (*service)(nil)

// NewService returns the PodSyncService of o.Node, to pass as
// Options.Service to New.
func NewService(o ServiceOptions) podsyncv1.PodSyncServiceServer {
	log := o.Logger
	if log == nil {
		log = zap.NewNop()
	}
	rp := o.RunPods
	rp.Node = o.Node
	if rp.Logger == nil {
		rp.Logger = log
	}
	return &service{
		node:      o.Node,
		validator: o.Validator,
		health:    o.Health,
		runPods:   rp,
		nodeName:  o.NodeName,
		log:       log,
		pods:      newPodCache(),

		idleTimeout: o.StreamIdleTimeout,
		sessions:    o.Sessions,
	}
}

// ready returns UNAVAILABLE until the runtime has answered once.
func (s *service) ready() error {
	if s.health == nil {
		return nil
	}
	return s.health.CheckReady()
}

func orDefaultNamespace(ns string) string {
	if ns == "" {
		return defaultNamespace
	}
	return ns
}
