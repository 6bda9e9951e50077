package convert

import (
	"time"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodStatusToProto converts a core/v1 PodStatus. podsync's own status
// fields (sandbox, node name) are left for the caller to set.
func PodStatusToProto(in *corev1.PodStatus) *podsyncv1.PodStatus {
	if in == nil {
		return nil
	}
	return &podsyncv1.PodStatus{
		Phase:                 string(in.Phase),
		Conditions:            podConditionsToProto(in.Conditions),
		Message:               in.Message,
		Reason:                in.Reason,
		HostIp:                in.HostIP,
		HostIps:               toSlice(in.HostIPs, func(h corev1.HostIP) *podsyncv1.HostIP { return &podsyncv1.HostIP{Ip: h.IP} }),
		PodIp:                 in.PodIP,
		PodIps:                toSlice(in.PodIPs, func(p corev1.PodIP) *podsyncv1.PodIP { return &podsyncv1.PodIP{Ip: p.IP} }),
		StartTime:             timePtrToProto(in.StartTime),
		InitContainerStatuses: toSlice(in.InitContainerStatuses, containerStatusToProto),
		ContainerStatuses:     toSlice(in.ContainerStatuses, containerStatusToProto),
		QosClass:              string(in.QOSClass),
		ObservedGeneration:    in.ObservedGeneration,

		EphemeralContainerStatuses: toSlice(in.EphemeralContainerStatuses, containerStatusToProto),
	}
}

func isZeroPodStatus(st *corev1.PodStatus) bool {
	return st.Phase == "" && len(st.Conditions) == 0 && st.Message == "" && st.Reason == "" &&
		st.HostIP == "" && len(st.HostIPs) == 0 && st.PodIP == "" && len(st.PodIPs) == 0 &&
		st.StartTime == nil && len(st.InitContainerStatuses) == 0 && len(st.ContainerStatuses) == 0 && len(st.EphemeralContainerStatuses) == 0 &&
		st.QOSClass == "" && st.ObservedGeneration == 0
}

// podConditionsToProto converts conditions, keeping nil as nil. The
// conditions, and then their times, are allocated in one block each rather
// than one by one: a status has five conditions, which made most of its
// allocations.
func podConditionsToProto(in []corev1.PodCondition) []*podsyncv1.PodCondition {
	if in == nil {
		return nil
	}
	times := 0
	for i := range in {
		if !in[i].LastProbeTime.IsZero() {
			times++
		}
		if !in[i].LastTransitionTime.IsZero() {
			times++
		}
	}
	ts := make([]timestamppb.Timestamp, times)
	// next is timeToProto into the next timestamp of the block.
	next := func(t metav1.Time) *timestamppb.Timestamp {
		if t.IsZero() {
			return nil
		}
		p := &ts[0]
		ts = ts[1:]
		p.Seconds, p.Nanos = t.Unix(), int32(t.Nanosecond()) //nolint:gosec // below 1e9, as in timestamppb.New.
		return p
	}
	conds := make([]podsyncv1.PodCondition, len(in))
	out := make([]*podsyncv1.PodCondition, len(in))
	for i := range in {
		src, dst := &in[i], &conds[i]
		dst.Type = string(src.Type)
		dst.Status = string(src.Status)
		dst.LastProbeTime = next(src.LastProbeTime)
		dst.LastTransitionTime = next(src.LastTransitionTime)
		dst.Reason = src.Reason
		dst.Message = src.Message
		out[i] = dst
	}
	return out
}

func containerStatusToProto(in corev1.ContainerStatus) *podsyncv1.ContainerStatus {
	return &podsyncv1.ContainerStatus{
		Name:               in.Name,
		State:              containerStateToProto(&in.State),
		LastState:          containerStateToProto(&in.LastTerminationState),
		Ready:              in.Ready,
		RestartCount:       in.RestartCount,
		Image:              in.Image,
		ImageId:            in.ImageID,
		ContainerId:        in.ContainerID,
		Started:            in.Started,
		Resources:          statusResourcesToProto(in.Resources),
		AllocatedResources: resourceListToProto(in.AllocatedResources),
	}
}

func statusResourcesToProto(in *corev1.ResourceRequirements) *podsyncv1.ResourceRequirements {
	if in == nil {
		return nil
	}
	return &podsyncv1.ResourceRequirements{Requests: resourceListToProto(in.Requests), Limits: resourceListToProto(in.Limits)}
}

func containerStateToProto(in *corev1.ContainerState) *podsyncv1.ContainerState {
	if in.Waiting == nil && in.Running == nil && in.Terminated == nil {
		return nil
	}
	out := &podsyncv1.ContainerState{}
	if w := in.Waiting; w != nil {
		out.Waiting = &podsyncv1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}
	}
	if r := in.Running; r != nil {
		out.Running = &podsyncv1.ContainerStateRunning{StartedAt: timeToProto(r.StartedAt)}
	}
	if t := in.Terminated; t != nil {
		out.Terminated = &podsyncv1.ContainerStateTerminated{
			ExitCode:    t.ExitCode,
			Signal:      t.Signal,
			Reason:      t.Reason,
			Message:     t.Message,
			StartedAt:   timeToProto(t.StartedAt),
			FinishedAt:  timeToProto(t.FinishedAt),
			ContainerId: t.ContainerID,
		}
	}
	return out
}

func quantityPtrToString(q *resource.Quantity) string {
	if q == nil {
		return ""
	}
	return q.String()
}

func podStatusFromProto(in *podsyncv1.PodStatus) corev1.PodStatus {
	return corev1.PodStatus{
		Phase:                 corev1.PodPhase(in.Phase),
		Conditions:            toSlice(in.Conditions, podConditionFromProto),
		Message:               in.Message,
		Reason:                in.Reason,
		HostIP:                in.HostIp,
		HostIPs:               toSlice(in.HostIps, func(h *podsyncv1.HostIP) corev1.HostIP { return corev1.HostIP{IP: h.GetIp()} }),
		PodIP:                 in.PodIp,
		PodIPs:                toSlice(in.PodIps, func(p *podsyncv1.PodIP) corev1.PodIP { return corev1.PodIP{IP: p.GetIp()} }),
		StartTime:             timePtrFromProto(in.StartTime),
		InitContainerStatuses: toSlice(in.InitContainerStatuses, containerStatusFromProto),
		ContainerStatuses:     toSlice(in.ContainerStatuses, containerStatusFromProto),
		QOSClass:              corev1.PodQOSClass(in.QosClass),
		ObservedGeneration:    in.ObservedGeneration,

		EphemeralContainerStatuses: toSlice(in.EphemeralContainerStatuses, containerStatusFromProto),
	}
}

// PodStatusFromProto converts the API's PodStatus to core/v1. podsync's own
// fields (sandbox, node name) have no place in core/v1 and are not copied.
func PodStatusFromProto(in *podsyncv1.PodStatus) *corev1.PodStatus {
	if in == nil {
		return nil
	}
	st := podStatusFromProto(in)
	return &st
}

func podConditionFromProto(in *podsyncv1.PodCondition) corev1.PodCondition {
	return corev1.PodCondition{
		Type:               corev1.PodConditionType(in.GetType()),
		Status:             corev1.ConditionStatus(in.GetStatus()),
		LastProbeTime:      timeFromProto(in.GetLastProbeTime()),
		LastTransitionTime: timeFromProto(in.GetLastTransitionTime()),
		Reason:             in.GetReason(),
		Message:            in.GetMessage(),
	}
}

func containerStatusFromProto(in *podsyncv1.ContainerStatus) corev1.ContainerStatus {
	return corev1.ContainerStatus{
		Name:                 in.GetName(),
		State:                containerStateFromProto(in.GetState()),
		LastTerminationState: containerStateFromProto(in.GetLastState()),
		Ready:                in.GetReady(),
		RestartCount:         in.GetRestartCount(),
		Image:                in.GetImage(),
		ImageID:              in.GetImageId(),
		ContainerID:          in.GetContainerId(),
		Started:              in.Started,
		Resources:            statusResourcesFromProto(in.GetResources()),
		AllocatedResources:   statusResourceList(in.GetAllocatedResources()),
	}
}

// statusResourcesFromProto and statusResourceList read the resources of a
// status, which the server wrote: a value that does not parse is left out.
func statusResourcesFromProto(in *podsyncv1.ResourceRequirements) *corev1.ResourceRequirements {
	if in == nil {
		return nil
	}
	return &corev1.ResourceRequirements{Requests: statusResourceList(in.GetRequests()), Limits: statusResourceList(in.GetLimits())}
}

func statusResourceList(in map[string]string) corev1.ResourceList {
	if in == nil {
		return nil
	}
	out := make(corev1.ResourceList, len(in))
	for name, v := range in {
		if q, err := resource.ParseQuantity(v); err == nil {
			out[corev1.ResourceName(name)] = q
		}
	}
	return out
}

func containerStateFromProto(in *podsyncv1.ContainerState) corev1.ContainerState {
	var out corev1.ContainerState
	if in == nil {
		return out
	}
	if w := in.Waiting; w != nil {
		out.Waiting = &corev1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}
	}
	if r := in.Running; r != nil {
		out.Running = &corev1.ContainerStateRunning{StartedAt: timeFromProto(r.StartedAt)}
	}
	if t := in.Terminated; t != nil {
		out.Terminated = &corev1.ContainerStateTerminated{
			ExitCode:    t.ExitCode,
			Signal:      t.Signal,
			Reason:      t.Reason,
			Message:     t.Message,
			StartedAt:   timeFromProto(t.StartedAt),
			FinishedAt:  timeFromProto(t.FinishedAt),
			ContainerID: t.ContainerId,
		}
	}
	return out
}

func timeToProto(t metav1.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t.Time)
}

func timePtrToProto(t *metav1.Time) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return timestamppb.New(t.Time)
}

func timeFromProto(t *timestamppb.Timestamp) metav1.Time {
	if t == nil {
		return metav1.Time{}
	}
	return metav1.NewTime(t.AsTime().In(time.Local))
}

func timePtrFromProto(t *timestamppb.Timestamp) *metav1.Time {
	if t == nil {
		return nil
	}
	mt := timeFromProto(t)
	return &mt
}
