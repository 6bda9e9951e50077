package server

import (
	"context"

	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/engine"
)

// WatchPods streams the changes of the pods a filter selects: with
// since_revision 0 the current pods first and a synced message at the
// list's revision, then every change after it; with since_revision R every
// change after R. It ends cleanly when the client goes away, with
// OUT_OF_RANGE REVISION_COMPACTED for a compacted revision and
// RESOURCE_EXHAUSTED SLOW_CONSUMER for a client that fell behind
// (ToStatus maps the store's errors).
func (s *service) WatchPods(req *podsyncv1.WatchPodsRequest, stream grpc.ServerStreamingServer[podsyncv1.WatchPodsResponse]) error {
	if err := InvalidRequest(s.validator.ValidateWatchPodsRequest(req)); err != nil {
		return err
	}
	f, err := filterOf(req.GetNamespace(), req.GetLabelSelector())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()

	wf := &watchFilter{s: s, f: f}
	if wf.bySelector() {
		// Kept for the stream's life: only a selector needs them.
		wf.labels = map[types.UID]labels.Set{}
	}
	list := func() (int64, error) {
		recs, rev, err := s.backend(ctx).Pods.ListShared(ctx, f)
		if err != nil {
			return 0, err
		}
		for _, rec := range recs {
			if wf.labels != nil {
				wf.labels[rec.Pod.UID] = rec.Pod.Labels
			}
			st := rec.Pod.Status
			if err := stream.Send(&podsyncv1.WatchPodsResponse{
				Revision: rec.ModRevision,
				Pod:      podRefToProto(rec.Ref()),
				Change:   &podsyncv1.WatchPodsResponse_Status{Status: s.statusToProto(&st, nil, s.currentSandbox(s.backend(ctx).Pods, rec.Pod.UID))},
			}); err != nil {
				return 0, err
			}
		}
		return rev, stream.Send(&podsyncv1.WatchPodsResponse{
			Revision: rev,
			Change:   &podsyncv1.WatchPodsResponse_Synced{Synced: &podsyncv1.WatchSynced{}},
		})
	}
	return s.listThenFollow(ctx, req.GetSinceRevision(), s.backend(ctx).Pods.Watch, list, func(e engine.Entry) error {
		if !wf.match(ctx, e) {
			return nil
		}
		return stream.Send(s.entryToProto(e))
	})
}

// listThenFollow is the one shape of WatchPods and WatchObjects. With
// since 0, list sends the current items and a synced message and returns
// the revision it listed at, and the revision log is followed after that
// revision (through watch); otherwise after since. follow gets each entry
// of the log until ctx ends or the log fails; listThenFollow returns
// list's or follow's first error, the log's, or nil when ctx ended (the
// client went away).
func (s *service) listThenFollow(ctx context.Context, since int64, watch func(context.Context, int64) (*engine.Watcher, error),
	list func() (int64, error), follow func(engine.Entry) error) error {
	if since == 0 {
		rev, err := list()
		if err != nil {
			return err
		}
		since = rev
	}
	w, err := watch(ctx, since)
	if err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.Events():
			if !ok {
				if ctx.Err() != nil {
					return nil // the client went away
				}
				return w.Err()
			}
			if err := follow(e); err != nil {
				return err
			}
		}
	}
}

// watchFilter matches revision log entries against a filter. Status and
// event entries name pods, not their labels: it looks the labels up in the
// store. Deletions carry the labels the pod had.
type watchFilter struct {
	s *service
	f engine.PodFilter
	// labels are the selected pods' labels last seen; nil without a
	// selector.
	labels map[types.UID]labels.Set
}

// bySelector reports whether the filter has a label selector.
func (wf *watchFilter) bySelector() bool {
	return wf.f.Selector != nil && !wf.f.Selector.Empty()
}

func (wf *watchFilter) match(ctx context.Context, e engine.Entry) bool {
	if e.IsObject() {
		return false // WatchObjects' entries
	}
	if wf.f.Namespace != "" && e.Pod.Namespace != wf.f.Namespace {
		return false
	}
	if !wf.bySelector() {
		return true
	}
	set, known := wf.labels[e.Pod.UID]
	if e.Kind == engine.EntryDeleted {
		delete(wf.labels, e.Pod.UID)
		if e.Labels != nil || !known {
			set, known = e.Labels, true
		}
	} else if rec, err := wf.s.backend(ctx).Pods.GetShared(ctx, e.Pod.Namespace, e.Pod.Name); err == nil && rec.Pod.UID == e.Pod.UID {
		// Only read, as the labels kept are: the shared record spares a
		// copy of the pod per entry.
		set, known = rec.Pod.Labels, true
		wf.labels[e.Pod.UID] = set
	}
	return known && wf.f.Selector.Matches(set)
}
