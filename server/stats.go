package server

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/errorinfo"
	"github.com/podsync/podsync/logx"
)

// GetPodStats returns one pod's usage.
func (s *service) GetPodStats(ctx context.Context, req *podsyncv1.GetPodStatsRequest) (*podsyncv1.GetPodStatsResponse, error) {
	if err := InvalidRequest(validatePodName(nil, req.GetNamespace(), req.GetName())); err != nil {
		return nil, err
	}
	st, err := s.backend(ctx).Stats.PodStats(ctx, orDefaultNamespace(req.GetNamespace()), req.GetName())
	if errors.Is(err, errdefs.ErrNotRunning) {
		return nil, WithReason(err, errorinfo.ReasonPodNotRunning, nil)
	}
	if err != nil {
		return nil, err
	}
	return &podsyncv1.GetPodStatsResponse{Stats: podStatsToProto(st)}, nil
}

// ListPodStats returns the usage of the running pods and of the node.
func (s *service) ListPodStats(ctx context.Context, req *podsyncv1.ListPodStatsRequest) (*podsyncv1.ListPodStatsResponse, error) {
	if ns := req.GetNamespace(); ns != "" {
		if err := InvalidRequest(validateOptionalNamespace(nil, ns)); err != nil {
			return nil, err
		}
	}
	sum, err := s.backend(ctx).Stats.Summary(ctx, req.GetNamespace())
	if err != nil {
		return nil, err
	}
	resp := &podsyncv1.ListPodStatsResponse{}
	for _, st := range sum.Pods {
		resp.Pods = append(resp.Pods, podStatsToProto(st))
	}
	if n := sum.Node; n != nil {
		resp.Node = &podsyncv1.NodeStats{Cpu: cpuToProto(n.CPU), Memory: memoryToProto(n.Memory)}
	} else if sum.NodeErr != nil {
		// The pods' usage stands without the node's; the response says
		// it is unknown, the log why.
		logx.From(ctx, s.log).Warn("node stats unavailable", zap.Error(sum.NodeErr))
	}
	return resp, nil
}

func podStatsToProto(st engine.PodStats) *podsyncv1.PodStats {
	p := &podsyncv1.PodStats{
		Namespace: st.Namespace, Name: st.Name, Uid: string(st.UID), Source: st.Source,
		Cpu: cpuToProto(st.CPU), Memory: memoryToProto(st.Memory),
		Network: &podsyncv1.NetworkStats{Time: statsTime(st.Network.Time), RxBytes: st.Network.RxBytes, TxBytes: st.Network.TxBytes,
			RxErrors: st.Network.RxErrors, TxErrors: st.Network.TxErrors},
	}
	for _, c := range st.Containers {
		p.Containers = append(p.Containers, &podsyncv1.ContainerStats{
			Name: c.Name, Cpu: cpuToProto(c.CPU), Memory: memoryToProto(c.Memory),
			Rootfs: &podsyncv1.FsStats{Time: statsTime(c.Rootfs.Time), UsedBytes: c.Rootfs.UsedBytes, InodesUsed: c.Rootfs.InodesUsed},
		})
	}
	return p
}

func cpuToProto(c engine.CPUStats) *podsyncv1.CPUStats {
	return &podsyncv1.CPUStats{Time: statsTime(c.Time), UsageNanoCores: c.UsageNanoCores, UsageCoreNanoSeconds: c.UsageCoreNanoSeconds}
}

func memoryToProto(m engine.MemoryStats) *podsyncv1.MemoryStats {
	return &podsyncv1.MemoryStats{Time: statsTime(m.Time), WorkingSetBytes: m.WorkingSetBytes, RssBytes: m.RSSBytes, UsageBytes: m.UsageBytes,
		AvailableBytes: m.AvailableBytes}
}

func statsTime(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() || t.Unix() == 0 {
		return nil
	}
	return timestamppb.New(t)
}
