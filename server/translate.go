package server

import (
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/convert"
	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/model"
)

// This file is the one place where engine results become API messages
// (containerd's containerToProto): handlers call these and nothing else.

// stepActions maps the engine's step actions to the API's. Actions the
// API has no value for map to the nearest one and keep their name in the
// step's reason (see stepToProto).
var stepActions = map[engine.StepAction]podsyncv1.StepAction{
	engine.ActionCreatePodSandbox: podsyncv1.StepAction_STEP_ACTION_CREATE_POD_SANDBOX,
	engine.ActionConfigPodSandbox: podsyncv1.StepAction_STEP_ACTION_CONFIG_POD_SANDBOX,
	engine.ActionKillPodSandbox:   podsyncv1.StepAction_STEP_ACTION_KILL_POD_SANDBOX,
	engine.ActionStartContainer:   podsyncv1.StepAction_STEP_ACTION_START_CONTAINER,
	engine.ActionKillContainer:    podsyncv1.StepAction_STEP_ACTION_KILL_CONTAINER,
	engine.ActionPullImage:        podsyncv1.StepAction_STEP_ACTION_PULL_IMAGE,
	engine.ActionRemoveContainer:  podsyncv1.StepAction_STEP_ACTION_REMOVE_CONTAINER,

	engine.ActionUpdateContainerResources:  podsyncv1.StepAction_STEP_ACTION_UPDATE_CONTAINER_RESOURCES,
	engine.ActionUpdatePodSandboxResources: podsyncv1.StepAction_STEP_ACTION_UPDATE_POD_SANDBOX_RESOURCES,
	// Nearest values: a postStart hook is part of a start, a preStop hook
	// of a kill, mounting volumes prepares the sandbox's starts, and a
	// sandbox removal follows its kill.
	engine.ActionPostStartHook:    podsyncv1.StepAction_STEP_ACTION_START_CONTAINER,
	engine.ActionPreStopHook:      podsyncv1.StepAction_STEP_ACTION_KILL_CONTAINER,
	engine.ActionMountVolumes:     podsyncv1.StepAction_STEP_ACTION_START_CONTAINER,
	engine.ActionRemovePodSandbox: podsyncv1.StepAction_STEP_ACTION_KILL_POD_SANDBOX,
}

func containerTypeToProto(t engine.ContainerType) podsyncv1.ContainerType {
	switch t {
	case engine.ContainerTypeInit:
		return podsyncv1.ContainerType_CONTAINER_TYPE_INIT
	case engine.ContainerTypeSidecar:
		return podsyncv1.ContainerType_CONTAINER_TYPE_SIDECAR
	case engine.ContainerTypeRegular:
		return podsyncv1.ContainerType_CONTAINER_TYPE_REGULAR
	case engine.ContainerTypeEphemeral:
		return podsyncv1.ContainerType_CONTAINER_TYPE_EPHEMERAL
	}
	return podsyncv1.ContainerType_CONTAINER_TYPE_UNSPECIFIED
}

// containerTypeOf says which list of pod's spec holds the container name.
func containerTypeOf(pod *corev1.Pod, name string) podsyncv1.ContainerType {
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; c.Name == name {
			if model.IsRestartableInitContainer(c) {
				return podsyncv1.ContainerType_CONTAINER_TYPE_SIDECAR
			}
			return podsyncv1.ContainerType_CONTAINER_TYPE_INIT
		}
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return podsyncv1.ContainerType_CONTAINER_TYPE_REGULAR
		}
	}
	if model.EphemeralContainer(pod, name) != nil {
		return podsyncv1.ContainerType_CONTAINER_TYPE_EPHEMERAL
	}
	return podsyncv1.ContainerType_CONTAINER_TYPE_UNSPECIFIED
}

func timeToProto(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

// stepToProto translates one step. Failed steps are FAILED with the
// error as message when the engine gave none; back-offs BACKING_OFF.
// Actions without an API value of their own keep their engine name as
// the reason when they have none, so a client can tell a hook from a
// start.
func stepToProto(s engine.StepResult) *podsyncv1.SyncStep {
	out := &podsyncv1.SyncStep{
		Action:        stepActions[s.Action],
		Target:        s.Target,
		ContainerType: containerTypeToProto(s.ContainerType),
		Outcome:       podsyncv1.StepOutcome_STEP_OUTCOME_SUCCEEDED,
		Reason:        s.Reason,
		Message:       s.Message,
		StartTime:     timeToProto(s.Start),
		NextRetryTime: timeToProto(s.NextRetry),
		ContainerId:   s.ContainerID,
		SandboxId:     s.SandboxID,
		Attempt:       s.Attempt,
	}
	if !s.Start.IsZero() {
		out.Duration = durationpb.New(s.Duration)
	}
	switch {
	case s.Failed():
		out.Outcome = podsyncv1.StepOutcome_STEP_OUTCOME_FAILED
		if out.Message == "" {
			out.Message = s.Err.Error()
		}
	case s.BackedOff():
		out.Outcome = podsyncv1.StepOutcome_STEP_OUTCOME_BACKING_OFF
	}
	switch s.Action {
	case engine.ActionPostStartHook, engine.ActionPreStopHook, engine.ActionMountVolumes, engine.ActionRemovePodSandbox:
		if out.Reason == "" {
			out.Reason = string(s.Action)
		}
	}
	return out
}

func stepsToProto(steps []engine.StepResult) []*podsyncv1.SyncStep {
	out := make([]*podsyncv1.SyncStep, 0, len(steps))
	for _, s := range steps {
		out = append(out, stepToProto(s))
	}
	return out
}

func podRefToProto(r engine.PodRef) *podsyncv1.PodRef {
	return &podsyncv1.PodRef{Namespace: r.Namespace, Name: r.Name, Uid: string(r.UID)}
}

// statusToProto translates a pod status and adds podsync's own fields:
// the node name, and the sandbox the pod's containers run in — the one
// the last successful CreatePodSandbox of steps created, else sb.
func (s *service) statusToProto(st *corev1.PodStatus, steps []engine.StepResult, sb sandboxRef) *podsyncv1.PodStatus {
	if st == nil {
		return nil
	}
	out := convert.PodStatusToProto(st)
	out.NodeName = s.nodeName
	for i := len(steps) - 1; i >= 0; i-- {
		if st := steps[i]; st.Action == engine.ActionCreatePodSandbox && !st.Failed() && st.SandboxID != "" {
			sb = sandboxRef{id: st.SandboxID, attempt: st.Attempt}
			break
		}
	}
	out.SandboxId, out.SandboxAttempt = sb.id, sb.attempt
	return out
}

// currentSandbox returns the sandbox the pod with uid ran its containers
// in after its last pass; zero when it has none.
func (s *service) currentSandbox(pods Pods, uid types.UID) sandboxRef {
	if id, attempt, ok := pods.PodSandbox(uid); ok {
		return sandboxRef{id: id, attempt: attempt}
	}
	return sandboxRef{}
}

// recordToProto translates a stored pod: its defaulted spec and current
// status, with the sandbox of its last pass and, unless the caller set
// one, the time podsyncd stored it as metadata.creationTimestamp. Records
// from the Node have their secrets redacted, and a Pod carries no secret
// data anyway.
//
// The message comes from s.pods while the record and the sandbox are those
// it was made of; it is shared with other responses and must not be
// changed (see podCache).
func (s *service) recordToProto(pods Pods, rec *engine.PodRecord) *podsyncv1.Pod {
	return s.cachedPodToProto(rec, s.currentSandbox(pods, rec.Pod.UID))
}

// cachedPodToProto is podToProto through s.pods.
func (s *service) cachedPodToProto(rec *engine.PodRecord, sb sandboxRef) *podsyncv1.Pod {
	if p := s.pods.get(rec, sb); p != nil {
		return p
	}
	p := s.podToProto(rec, sb)
	s.pods.add(rec, sb, p)
	return p
}

// podToProto translates rec with the sandbox sb (none when zero), without
// the cache.
func (s *service) podToProto(rec *engine.PodRecord, sb sandboxRef) *podsyncv1.Pod {
	// Stored pods came from requests through convert.PodFromProto.
	p := convert.StoredPodToProto(rec.Pod)
	// StoredPodToProto converted the status unless it is zero; a returned
	// pod always has one, with the node name.
	if p.Status == nil {
		p.Status = convert.PodStatusToProto(&rec.Pod.Status)
	}
	p.Status.NodeName = s.nodeName
	if sb.id != "" {
		p.Status.SandboxId, p.Status.SandboxAttempt = sb.id, sb.attempt
	}
	if p.Metadata != nil && p.Metadata.CreationTimestamp == nil && !rec.CreatedAt.IsZero() {
		p.Metadata.CreationTimestamp = timestamppb.New(rec.CreatedAt)
	}
	return p
}

// planToProto translates a plan of pod.
func planToProto(pod *corev1.Pod, a engine.PodActions, now time.Time) *podsyncv1.PodPlan {
	out := &podsyncv1.PodPlan{
		Sandbox: &podsyncv1.SandboxDecision{
			Create:           a.Sandbox.Create,
			Attempt:          a.Sandbox.Attempt,
			KillSandboxIds:   a.Sandbox.KillIDs,
			Reason:           a.Sandbox.Reason,
			CurrentSandboxId: a.Sandbox.ID,
		},
		KillPod:       a.KillPod,
		KillPodReason: a.KillPodReason,
	}
	starting := map[string]bool{}
	for _, c := range append(append([]engine.ContainerAction(nil), a.StartInit...), a.Start...) {
		starting[c.Name] = true
	}
	for _, c := range a.Kill {
		out.ContainersToKill = append(out.ContainersToKill, &podsyncv1.ContainerKill{
			Name: c.Name, ContainerType: containerTypeOf(pod, c.Name), ContainerId: c.ContainerID,
			Reason: c.Reason, Message: c.Message, ChangedFields: c.ChangedFields, Restart: starting[c.Name],
		})
	}
	start := func(cs []engine.ContainerAction) []*podsyncv1.ContainerStart {
		var out []*podsyncv1.ContainerStart
		for _, c := range cs {
			out = append(out, &podsyncv1.ContainerStart{
				Name: c.Name, ContainerType: containerTypeOf(pod, c.Name), Reason: c.Reason,
				RestartCount: int32(min(c.Attempt, 1<<31-1)), //nolint:gosec // bounded above.
			})
		}
		return out
	}
	out.InitContainersToStart = start(a.StartInit)
	out.ContainersToStart = start(a.Start)
	for _, c := range a.BackOff {
		b := &podsyncv1.ContainerBackoff{
			Name: c.Name, ContainerType: containerTypeOf(pod, c.Name), Reason: c.Reason,
			NextRetryTime: timeToProto(c.NextAttempt),
		}
		if !c.NextAttempt.IsZero() {
			b.Delay = durationpb.New(max(c.NextAttempt.Sub(now), 0))
		}
		out.BackingOff = append(out.BackingOff, b)
	}
	for _, c := range a.PruneInit {
		out.InitInstancesToRemove = append(out.InitInstancesToRemove, c.ContainerID)
	}
	for _, r := range a.Resize {
		out.ContainersToResize = append(out.ContainersToResize, &podsyncv1.ContainerResize{
			Name: r.Name, ContainerType: containerTypeOf(pod, r.Name), ContainerId: r.ContainerID,
			Current: resourcesToProto(r.Current), Desired: resourcesToProto(r.Desired),
		})
	}
	if p := a.ResizePending; p != nil {
		out.ResizePending = &podsyncv1.ResizePending{Reason: p.Reason, Message: p.Message}
	}
	out.UpToDate = !a.KillPod && !a.Sandbox.Create && len(a.Kill) == 0 &&
		len(a.StartInit) == 0 && len(a.Start) == 0 && len(a.BackOff) == 0 && len(a.PruneInit) == 0 &&
		len(a.Resize) == 0
	return out
}

// resourcesToProto renders a resize's CPU and memory as quantities
// ("250m", "128Mi"), leaving out unset values.
func resourcesToProto(r engine.ContainerResources) *podsyncv1.ResourceRequirements {
	req := r.Requirements()
	out := &podsyncv1.ResourceRequirements{Requests: map[string]string{}, Limits: map[string]string{}}
	for k, q := range req.Requests {
		out.Requests[string(k)] = q.String()
	}
	for k, q := range req.Limits {
		out.Limits[string(k)] = q.String()
	}
	return out
}

// entryToProto translates an entry of the revision log.
func (s *service) entryToProto(e engine.Entry) *podsyncv1.WatchPodsResponse {
	out := &podsyncv1.WatchPodsResponse{Revision: e.Revision, Pod: podRefToProto(e.Pod)}
	switch e.Kind {
	case engine.EntryStatus:
		// The sandbox recorded with the status, not today's.
		sb := sandboxRef{id: e.Sandbox.ID, attempt: e.Sandbox.Attempt}
		out.Change = &podsyncv1.WatchPodsResponse_Status{Status: s.statusToProto(e.Status, nil, sb)}
	case engine.EntryEvent:
		out.Change = &podsyncv1.WatchPodsResponse_Event{Event: eventToProto(e.Event)}
	case engine.EntryDeleted:
		out.Change = &podsyncv1.WatchPodsResponse_Deleted{Deleted: &podsyncv1.PodDeleted{Time: timeToProto(e.Time)}}
	}
	return out
}

// eventToProto translates an event of the revision log. An event of an
// older store has no count: it occurred once.
func eventToProto(e *engine.Event) *podsyncv1.PodEvent {
	ev := &podsyncv1.PodEvent{Type: podsyncv1.EventType_EVENT_TYPE_UNSPECIFIED}
	if e == nil {
		return ev
	}
	ev.Reason, ev.Message, ev.Container, ev.Time = e.Reason, e.Message, e.Container, timeToProto(e.Time)
	ev.Name, ev.Count, ev.FirstTimestamp = e.Name, max(e.Count, 1), timeToProto(e.FirstTime)
	if e.FirstTime.IsZero() {
		ev.FirstTimestamp = ev.Time
	}
	switch e.Type {
	case corev1.EventTypeNormal:
		ev.Type = podsyncv1.EventType_EVENT_TYPE_NORMAL
	case corev1.EventTypeWarning:
		ev.Type = podsyncv1.EventType_EVENT_TYPE_WARNING
	}
	return ev
}

var podOutcomes = map[engine.Outcome]podsyncv1.PodOutcome{
	engine.ReachedTarget: podsyncv1.PodOutcome_POD_OUTCOME_REACHED_TARGET,
	engine.Rejected:      podsyncv1.PodOutcome_POD_OUTCOME_REJECTED,
	engine.Failed:        podsyncv1.PodOutcome_POD_OUTCOME_FAILED,
	engine.TimedOut:      podsyncv1.PodOutcome_POD_OUTCOME_TIMED_OUT,
}

func int32Of(n int) int32 {
	return int32(min(max(n, 0), 1<<31-1)) //nolint:gosec // clamped.
}

// summaryToProto translates RunPods' verdict.
func (s *service) summaryToProto(pods Pods, sum engine.RunPodsSummary) *podsyncv1.RunPodsSummary {
	out := &podsyncv1.RunPodsSummary{
		ReachedTarget: int32Of(sum.ReachedTarget),
		Rejected:      int32Of(sum.Rejected),
		Failed:        int32Of(sum.Failed),
		TimedOut:      int32Of(sum.TimedOut),
	}
	for _, r := range sum.Results {
		pr := &podsyncv1.PodResult{
			Pod:      podRefToProto(r.Pod),
			Admitted: r.Admitted,
			Outcome:  podOutcomes[r.Outcome],
			Reason:   r.Reason,
			Message:  r.Message,
			Duration: durationpb.New(r.Duration),
		}
		if r.Admitted {
			pr.Status = s.statusToProto(&r.Status, nil, s.currentSandbox(pods, r.Pod.UID))
		}
		for _, fc := range r.FailedContainers {
			pr.FailedContainers = append(pr.FailedContainers, &podsyncv1.FailedContainer{
				Name:          fc.Name,
				ContainerType: containerTypeToProto(fc.ContainerType),
				ExitCode:      fc.ExitCode,
				Reason:        fc.Reason,
				Message:       fc.Message,
				LogTail:       fc.LogTail,
				RestartCount:  fc.RestartCount,
			})
		}
		out.Results = append(out.Results, pr)
	}
	return out
}

// progressToProto translates a RunPods progress report, or returns nil.
func (s *service) progressToProto(pods Pods, p engine.RunPodsProgress) *podsyncv1.RunPodsResponse {
	ref := podRefToProto(p.Pod)
	switch {
	case p.Step != nil:
		return &podsyncv1.RunPodsResponse{Event: &podsyncv1.RunPodsResponse_Step{
			Step: &podsyncv1.PodStep{Pod: ref, Step: stepToProto(*p.Step)}}}
	case p.Status != nil:
		return &podsyncv1.RunPodsResponse{Event: &podsyncv1.RunPodsResponse_Status{
			Status: &podsyncv1.PodStatusUpdate{Pod: ref, Status: s.statusToProto(p.Status, nil, s.currentSandbox(pods, p.Pod.UID))}}}
	}
	return nil
}

func logLineToProto(l engine.LogLine) *podsyncv1.LogLine {
	out := &podsyncv1.LogLine{Time: timeToProto(l.Time), Content: l.Content}
	switch l.Stream {
	case engine.LogStdout:
		out.Stream = podsyncv1.LogStream_LOG_STREAM_STDOUT
	case engine.LogStderr:
		out.Stream = podsyncv1.LogStream_LOG_STREAM_STDERR
	}
	return out
}
