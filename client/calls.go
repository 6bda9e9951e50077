package client

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// defaultNamespace is the namespace podsyncd assumes when a request names
// none.
const defaultNamespace = "default"

// podName is "namespace/name" for error messages and result matching.
func podName(namespace, name string) string {
	if namespace == "" {
		namespace = defaultNamespace
	}
	return namespace + "/" + name
}

func refName(ref *podsyncv1.PodRef) string {
	return podName(ref.GetNamespace(), ref.GetName())
}

func metaName(m *podsyncv1.ObjectMeta) string {
	return podName(m.GetNamespace(), m.GetName())
}

// RunResult is what RunPods reports: the summary and, per requested pod,
// its result, steps and last status.
type RunResult struct {
	// Summary is the stream's last message; nil if the stream failed
	// before it.
	Summary *podsyncv1.RunPodsSummary
	// Pods has one entry per pod of the request, in request order.
	Pods []PodOutcome
}

// PodOutcome is what RunPods reports about one pod.
type PodOutcome struct {
	// Result is the pod's entry of the summary; nil until the summary
	// arrived.
	Result *podsyncv1.PodResult
	// Steps are the pod's sync steps, in the order they happened.
	Steps []*podsyncv1.SyncStep
	// Status is the last status seen: the last status update of the
	// stream, or else the one in Result.
	Status *podsyncv1.PodStatus
}

// OK reports whether the summary arrived and every pod reached its
// target: none was rejected, failed or timed out.
func (r *RunResult) OK() bool {
	if r == nil || r.Summary == nil {
		return false
	}
	for _, p := range r.Pods {
		if p.Result.GetOutcome() != podsyncv1.PodOutcome_POD_OUTCOME_REACHED_TARGET {
			return false
		}
	}
	return true
}

// runCollector folds a RunPods stream into a RunResult.
type runCollector struct {
	res   *RunResult
	index map[string][]int // "namespace/name" → positions in the request
}

func newRunCollector(req *podsyncv1.RunPodsRequest) *runCollector {
	rc := &runCollector{res: &RunResult{Pods: make([]PodOutcome, len(req.GetPods()))}, index: map[string][]int{}}
	for i, p := range req.GetPods() {
		k := metaName(p.GetMetadata())
		rc.index[k] = append(rc.index[k], i)
	}
	return rc
}

func (rc *runCollector) add(m *podsyncv1.RunPodsResponse) {
	switch {
	case m.GetStep() != nil:
		for _, i := range rc.index[refName(m.GetStep().GetPod())] {
			rc.res.Pods[i].Steps = append(rc.res.Pods[i].Steps, m.GetStep().GetStep())
		}
	case m.GetStatus() != nil:
		for _, i := range rc.index[refName(m.GetStatus().GetPod())] {
			rc.res.Pods[i].Status = m.GetStatus().GetStatus()
		}
	case m.GetSummary() != nil:
		sum := m.GetSummary()
		rc.res.Summary = sum
		results := sum.GetResults()
		if len(results) == len(rc.res.Pods) {
			for i, r := range results {
				rc.res.Pods[i].Result = r
			}
		} else {
			for _, r := range results {
				for _, i := range rc.index[refName(r.GetPod())] {
					rc.res.Pods[i].Result = r
				}
			}
		}
		for i := range rc.res.Pods {
			if p := &rc.res.Pods[i]; p.Status == nil {
				p.Status = p.Result.GetStatus()
			}
		}
	}
}

// RunPods runs a batch of pods and waits for each to reach
// req.wait_for, fail, or time out (see the RPC's documentation). progress,
// if not nil, is called with every message of the stream as it arrives,
// summary included, on the calling goroutine.
//
// Pods that admission refuses, that fail or time out are not errors: the
// result says so (see RunResult.OK). An error is ErrInvalidArgument for a
// malformed request (nothing was run), ErrUIDMismatch for an explicit uid
// that differs from a live pod's, or a failure of the call; then the
// RunResult holds what arrived before the error (Summary nil), or is nil
// if nothing did. RunPods is never retried, not even with WithRetry: the
// pods may be running already; call it again to wait again. Canceling ctx
// stops the waiting, never the pods.
func (c *Client) RunPods(ctx context.Context, req *podsyncv1.RunPodsRequest, progress func(*podsyncv1.RunPodsResponse)) (*RunResult, error) {
	const op = "RunPods"
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, m, err := openStream(ctx, c, false, func(ctx context.Context) (grpc.ServerStreamingClient[podsyncv1.RunPodsResponse], error) {
		return c.api.RunPods(ctx, req)
	})
	if isEOF(err) {
		return nil, newError(op, "", codes.Internal, "the stream ended without a summary")
	}
	if err != nil {
		return nil, wrap(op, "", err)
	}
	rc := newRunCollector(req)
	for {
		rc.add(m)
		if progress != nil {
			progress(m)
		}
		if m, err = stream.Recv(); err != nil {
			break
		}
	}
	if !isEOF(err) {
		return rc.res, wrap(op, "", err)
	}
	if rc.res.Summary == nil {
		return rc.res, newError(op, "", codes.Internal, "the stream ended without a summary")
	}
	return rc.res, nil
}

// SyncPod applies req.pod, creating it if podsyncd does not know it, and
// runs one sync pass now. onStep, if not nil, is called with each step as
// it finishes, on the calling goroutine. It returns the stream's final
// result: the status after the pass.
//
// A failed step (ErrImagePull, CrashLoopBackOff, …) is a step with outcome
// FAILED or BACKING_OFF, not an error. Errors: ErrInvalidArgument (see
// FieldViolations), ErrUIDMismatch (an explicit uid differs from the live
// pod's), ErrRejected when admission refuses a new pod (Reason says why:
// "OutOfcpu", "NodePorts", a policy reason), ErrAborted while the pod is
// being deleted. With WithRetry it is retried on ErrUnavailable until the
// first step arrives (SyncPod is idempotent).
func (c *Client) SyncPod(ctx context.Context, req *podsyncv1.SyncPodRequest, onStep func(*podsyncv1.SyncStep)) (*podsyncv1.SyncPodResult, error) {
	const op = "SyncPod"
	object := metaName(req.GetPod().GetMetadata())
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, m, err := openStream(ctx, c, true, func(ctx context.Context) (grpc.ServerStreamingClient[podsyncv1.SyncPodResponse], error) {
		return c.api.SyncPod(ctx, req)
	})
	if isEOF(err) {
		return nil, newError(op, object, codes.Internal, "the stream ended without a result")
	}
	if err != nil {
		return nil, wrap(op, object, err)
	}
	var res *podsyncv1.SyncPodResult
	for {
		if s := m.GetStep(); s != nil && onStep != nil {
			onStep(s)
		}
		if r := m.GetResult(); r != nil {
			res = r
		}
		if m, err = stream.Recv(); err != nil {
			break
		}
	}
	if !isEOF(err) {
		return nil, wrap(op, object, err)
	}
	if res == nil {
		return nil, newError(op, object, codes.Internal, "the stream ended without a result")
	}
	return res, nil
}

// PlanPod says what a sync of req.pod would do now, without doing it.
// Errors: ErrInvalidArgument. Retried on ErrUnavailable with WithRetry.
func (c *Client) PlanPod(ctx context.Context, req *podsyncv1.PlanPodRequest) (*podsyncv1.PlanPodResponse, error) {
	return unary(ctx, c, "PlanPod", metaName(req.GetPod().GetMetadata()), c.api.PlanPod, req)
}

// GetPod returns a pod's stored spec and current status; an empty
// namespace means "default". Errors: ErrNotFound when podsyncd has no such
// pod. Retried on ErrUnavailable with WithRetry.
func (c *Client) GetPod(ctx context.Context, namespace, name string) (*podsyncv1.GetPodResponse, error) {
	req := &podsyncv1.GetPodRequest{Namespace: namespace, Name: name}
	return unary(ctx, c, "GetPod", podName(namespace, name), c.api.GetPod, req)
}

// GetNode returns what podsyncd's admission knows of its node: name,
// labels, taints, capacity and allocatable resources. Retried on
// ErrUnavailable with WithRetry.
func (c *Client) GetNode(ctx context.Context) (*podsyncv1.Node, error) {
	resp, err := unary(ctx, c, "GetNode", "", c.api.GetNode, &podsyncv1.GetNodeRequest{})
	return resp.GetNode(), err
}

// ListPods lists pods by namespace, label selector and phase, ordered by
// namespace and name, with the revision to watch from. Errors:
// ErrInvalidArgument for a malformed selector. Retried on ErrUnavailable
// with WithRetry.
func (c *Client) ListPods(ctx context.Context, req *podsyncv1.ListPodsRequest) (*podsyncv1.ListPodsResponse, error) {
	return unary(ctx, c, "ListPods", "", c.api.ListPods, req)
}

// ListEvents lists the pods' events podsyncd still holds, one per series
// (its newest occurrence, with the series' count and first and last
// timestamps), oldest first. Errors: ErrInvalidArgument for a malformed
// namespace, name or uid. Retried on ErrUnavailable with WithRetry.
func (c *Client) ListEvents(ctx context.Context, req *podsyncv1.ListEventsRequest) (*podsyncv1.ListEventsResponse, error) {
	name := ""
	if req.GetPodName() != "" {
		name = podName(req.GetNamespace(), req.GetPodName())
	}
	return unary(ctx, c, "ListEvents", name, c.api.ListEvents, req)
}

// DeletePod stops and removes a pod and returns once it is gone. A pod
// that does not exist is not an error: the response says found = false.
// Errors: ErrUIDMismatch (Reason UID_MISMATCH, Metadata "uid" the live
// pod's) when req.uid names another incarnation. Retried on ErrUnavailable
// with WithRetry (DeletePod is idempotent).
func (c *Client) DeletePod(ctx context.Context, req *podsyncv1.DeletePodRequest) (*podsyncv1.DeletePodResponse, error) {
	return unary(ctx, c, "DeletePod", podName(req.GetNamespace(), req.GetName()), c.api.DeletePod, req)
}

// WatchPods opens one WatchPods stream and calls fn with each message, on
// the calling goroutine, until fn returns an error (which WatchPods
// returns as it is), ctx ends or the stream fails. It does not resume:
// see Watch. With WithRetry, opening the stream is retried on
// ErrUnavailable until the first message arrives. Errors:
// ErrRevisionCompacted, ErrSlowConsumer (Metadata "revision" is the last
// revision sent), ErrInvalidArgument.
func (c *Client) WatchPods(ctx context.Context, req *podsyncv1.WatchPodsRequest, fn func(*podsyncv1.WatchPodsResponse) error) error {
	const op = "WatchPods"
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, m, err := openStream(ctx, c, true, func(ctx context.Context) (grpc.ServerStreamingClient[podsyncv1.WatchPodsResponse], error) {
		return c.api.WatchPods(ctx, req)
	})
	for err == nil {
		if err := fn(m); err != nil {
			return err
		}
		m, err = stream.Recv()
	}
	if isEOF(err) {
		return nil
	}
	return wrap(op, "", err)
}

// Logs streams a container's log lines to fn, on the calling goroutine,
// until the log ends (or, with req.follow, until ctx ends or the pod is
// deleted), or fn returns an error, which Logs returns as it is. Errors:
// ErrNotFound for an unknown pod or container, or no previous instance;
// ErrInvalidArgument when the pod has several containers and
// req.container is empty. With WithRetry, opening the stream is retried on
// ErrUnavailable until the first lines arrive.
func (c *Client) Logs(ctx context.Context, req *podsyncv1.GetContainerLogsRequest, fn func(*podsyncv1.LogLine) error) error {
	object := podName(req.GetNamespace(), req.GetName())
	if req.GetContainer() != "" {
		object += " container " + req.GetContainer()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, m, err := openStream(ctx, c, true, func(ctx context.Context) (grpc.ServerStreamingClient[podsyncv1.GetContainerLogsResponse], error) {
		return c.api.GetContainerLogs(ctx, req)
	})
	for err == nil {
		for _, l := range m.GetLines() {
			if err := fn(l); err != nil {
				return err
			}
		}
		m, err = stream.Recv()
	}
	if isEOF(err) {
		return nil
	}
	return wrap("Logs", object, err)
}

// Health asks grpc.health.v1 for the serving status of podsyncd as a
// whole (service ""): SERVING once the container runtime answers,
// NOT_SERVING while it does not or podsyncd is shutting down. It is never
// retried: ErrUnavailable means podsyncd itself does not answer.
func (c *Client) Health(ctx context.Context) (healthpb.HealthCheckResponse_ServingStatus, error) {
	resp, err := c.health.Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return healthpb.HealthCheckResponse_UNKNOWN, wrap("Health", "", err)
	}
	return resp.GetStatus(), nil
}

// ListVolumes returns the node's named volumes (the directories
// persistentVolumeClaim volumes mount, one per namespace and claimName),
// ordered by namespace and name, each with the stored pods that name it.
// Retried on ErrUnavailable with WithRetry.
func (c *Client) ListVolumes(ctx context.Context) ([]*podsyncv1.NamedVolume, error) {
	resp, err := unary(ctx, c, "ListVolumes", "", c.api.ListVolumes, &podsyncv1.ListVolumesRequest{})
	return resp.GetVolumes(), err
}

// CreateVolume creates the named volume name of namespace (empty means
// "default"): the directory a persistentVolumeClaim volume of that
// claimName mounts in the pods of the namespace, as a pod naming the
// claim would on its first run; created is false when it existed.
// Retried on ErrUnavailable with WithRetry (CreateVolume is idempotent).
func (c *Client) CreateVolume(ctx context.Context, namespace, name string) (created bool, err error) {
	resp, err := unary(ctx, c, "CreateVolume", namespace+"/"+name, c.api.CreateVolume, &podsyncv1.CreateVolumeRequest{Namespace: namespace, Name: name})
	return resp.GetCreated(), err
}

// DeleteVolume removes the named volume name of namespace (empty means
// "default") and its data. A volume that does not exist is not an error:
// found is false. Errors: ErrVolumeInUse (Reason VOLUME_IN_USE) while a
// stored pod names it. Retried on ErrUnavailable with WithRetry
// (DeleteVolume is idempotent).
func (c *Client) DeleteVolume(ctx context.Context, namespace, name string) (found bool, err error) {
	resp, err := unary(ctx, c, "DeleteVolume", namespace+"/"+name, c.api.DeleteVolume, &podsyncv1.DeleteVolumeRequest{Namespace: namespace, Name: name})
	return resp.GetFound(), err
}

// ApplyObjects stores ConfigMaps and Secrets as objects of the node, all
// or none; pods using a changed one get their volume files updated.
// Errors: ErrInvalidArgument (also for a change of an immutable object),
// ErrConflict when an object's metadata.resource_version is not the
// stored one, ErrOwnedByFile. Retried on ErrUnavailable with WithRetry.
func (c *Client) ApplyObjects(ctx context.Context, req *podsyncv1.ApplyObjectsRequest) (*podsyncv1.ApplyObjectsResponse, error) {
	return unary(ctx, c, "ApplyObjects", "", c.api.ApplyObjects, req)
}

// GetObject returns a stored ConfigMap or Secret (a Secret's values
// removed); an empty namespace means "default". Errors: ErrNotFound
// (Reason OBJECT_NOT_FOUND). Retried on ErrUnavailable with WithRetry.
func (c *Client) GetObject(ctx context.Context, kind podsyncv1.ObjectKind, namespace, name string) (*podsyncv1.Object, error) {
	req := &podsyncv1.GetObjectRequest{Kind: kind, Namespace: namespace, Name: name}
	resp, err := unary(ctx, c, "GetObject", podName(namespace, name), c.api.GetObject, req)
	return resp.GetObject(), err
}

// ListObjects lists the stored ConfigMaps and Secrets by kind, namespace
// and label selector, with the revision to watch from. Retried on
// ErrUnavailable with WithRetry.
func (c *Client) ListObjects(ctx context.Context, req *podsyncv1.ListObjectsRequest) (*podsyncv1.ListObjectsResponse, error) {
	return unary(ctx, c, "ListObjects", "", c.api.ListObjects, req)
}

// DeleteObject removes a stored ConfigMap or Secret; one that does not
// exist is found = false. Errors: ErrConflict when req.resource_version
// is not the stored one, ErrOwnedByFile. Retried on ErrUnavailable with
// WithRetry.
func (c *Client) DeleteObject(ctx context.Context, req *podsyncv1.DeleteObjectRequest) (*podsyncv1.DeleteObjectResponse, error) {
	return unary(ctx, c, "DeleteObject", podName(req.GetNamespace(), req.GetName()), c.api.DeleteObject, req)
}

// WatchObjects opens one WatchObjects stream and calls fn with each
// message, as WatchPods does; resume with since_revision from the last
// revision seen. Errors: ErrRevisionCompacted, ErrSlowConsumer,
// ErrInvalidArgument.
func (c *Client) WatchObjects(ctx context.Context, req *podsyncv1.WatchObjectsRequest, fn func(*podsyncv1.WatchObjectsResponse) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, m, err := openStream(ctx, c, true, func(ctx context.Context) (grpc.ServerStreamingClient[podsyncv1.WatchObjectsResponse], error) {
		return c.api.WatchObjects(ctx, req)
	})
	for err == nil {
		if err := fn(m); err != nil {
			return err
		}
		m, err = stream.Recv()
	}
	if isEOF(err) {
		return nil
	}
	return wrap("WatchObjects", "", err)
}
