package server

import (
	"context"

	"google.golang.org/grpc"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/engine"
)

// WatchObjects streams the changes of the stored ConfigMaps and Secrets a
// filter selects, as WatchPods streams those of pods: with
// since_revision 0 the current objects first and a synced message at the
// list's revision, then every change after it, from the same revision
// log.
func (s *service) WatchObjects(req *podsyncv1.WatchObjectsRequest, stream grpc.ServerStreamingServer[podsyncv1.WatchObjectsResponse]) error {
	if err := InvalidRequest(s.validator.ValidateWatchObjectsRequest(req)); err != nil {
		return err
	}
	f := engine.ObjectFilter{Kind: objectKindFromProto(req.GetKind()), Namespace: req.GetNamespace()}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	list := func() (int64, error) {
		recs, rev, err := s.backend(ctx).Objects.ListObjects(ctx, f)
		if err != nil {
			return 0, err
		}
		for _, rec := range recs {
			obj, err := objectToProto(rec)
			if err != nil {
				return 0, err
			}
			if err := stream.Send(&podsyncv1.WatchObjectsResponse{
				Revision: rec.ModRevision,
				Object:   objectRefToProto(rec.Ref(), rec.ResourceVersion()),
				Change:   &podsyncv1.WatchObjectsResponse_Applied{Applied: obj},
			}); err != nil {
				return 0, err
			}
		}
		return rev, stream.Send(&podsyncv1.WatchObjectsResponse{
			Revision: rev,
			Change:   &podsyncv1.WatchObjectsResponse_Synced{Synced: &podsyncv1.WatchSynced{}},
		})
	}
	return s.listThenFollow(ctx, req.GetSinceRevision(), s.backend(ctx).Objects.Watch, list, func(e engine.Entry) error {
		if !e.IsObject() || (f.Kind != "" && e.Object.Kind != f.Kind) || (f.Namespace != "" && e.Object.Namespace != f.Namespace) {
			return nil
		}
		out, err := objectEntryToProto(e)
		if err != nil {
			return err
		}
		return stream.Send(out)
	})
}
