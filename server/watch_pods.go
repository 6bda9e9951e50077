package server

import (
	"context"

	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/engine/store"
)

// WatchPods streams the changes of the pods a filter selects: with
// since_revision 0 the current pods first and a synced message at the
// list's revision, then every change after it; with since_revision R every
// change after R. It ends cleanly when the client goes away, with
// OUT_OF_RANGE REVISION_COMPACTED for a compacted revision and
// RESOURCE_EXHAUSTED SLOW_CONSUMER for a client that fell behind
// (ToStatus maps the store's errors).
func (s *service) WatchPods(req *podsyncv1.WatchPodsRequest, stream grpc.ServerStreamingServer[podsyncv1.WatchPodsResponse]) error {
	if err := s.ready(); err != nil {
		return err
	}
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
	since := req.GetSinceRevision()
	if since == 0 {
		recs, rev, err := s.node.ListShared(ctx, f)
		if err != nil {
			return err
		}
		for _, rec := range recs {
			if wf.labels != nil {
				wf.labels[rec.Pod.UID] = rec.Pod.Labels
			}
			st := rec.Pod.Status
			if err := stream.Send(&podsyncv1.WatchPodsResponse{
				Revision: rec.ModRevision,
				Pod:      podRefToProto(rec.Ref()),
				Change:   &podsyncv1.WatchPodsResponse_Status{Status: s.statusToProto(&st, nil, s.currentSandbox(rec.Pod.UID))},
			}); err != nil {
				return err
			}
		}
		if err := stream.Send(&podsyncv1.WatchPodsResponse{
			Revision: rev,
			Change:   &podsyncv1.WatchPodsResponse_Synced{Synced: &podsyncv1.WatchSynced{}},
		}); err != nil {
			return err
		}
		since = rev
	}
	w, err := s.node.Watch(ctx, since)
	if err != nil {
		return err
	}
	return followLog(ctx, w, func(e store.Entry) error {
		if !wf.match(ctx, e) {
			return nil
		}
		return stream.Send(s.entryToProto(e))
	})
}

// followLog calls send with each entry w delivers until ctx ends or the
// log fails, and returns send's first error, w's, or nil when ctx ended
// (the client went away). WatchPods and WatchObjects follow the revision
// log with it.
func followLog(ctx context.Context, w *store.Watcher, send func(store.Entry) error) error {
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
			if err := send(e); err != nil {
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
	f store.Filter
	// labels are the selected pods' labels last seen; nil without a
	// selector.
	labels map[types.UID]labels.Set
}

// bySelector reports whether the filter has a label selector.
func (wf *watchFilter) bySelector() bool {
	return wf.f.Selector != nil && !wf.f.Selector.Empty()
}

func (wf *watchFilter) match(ctx context.Context, e store.Entry) bool {
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
	if e.Kind == store.KindDeleted {
		delete(wf.labels, e.Pod.UID)
		if e.Labels != nil || !known {
			set, known = e.Labels, true
		}
	} else if rec, err := wf.s.node.GetShared(ctx, e.Pod.Namespace, e.Pod.Name); err == nil && rec.Pod.UID == e.Pod.UID {
		// Only read, as the labels kept are: the shared record spares a
		// copy of the pod per entry.
		set, known = rec.Pod.Labels, true
		wf.labels[e.Pod.UID] = set
	}
	return known && wf.f.Selector.Matches(set)
}
