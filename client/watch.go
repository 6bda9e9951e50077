package client

import (
	"context"
	"errors"
	"slices"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// Watch follows the changes of the pods req selects, like WatchPods, and
// survives what ends a single stream: after a disconnect (UNAVAILABLE, a
// reset or ended stream, podsyncd restarting, SLOW_CONSUMER) it resumes
// after the last revision it delivered, with back-off (that of WithRetry,
// or 100 ms doubling up to 5 s, for as long as it takes), so that fn sees
// every change once and in order. fn is called on the calling goroutine.
// Watch returns only when ctx ends (an error matching ctx's with
// errors.Is), when fn returns an error (returned as it is), or on an error
// that retrying cannot cure, such as ErrInvalidArgument for a malformed
// selector, ErrPermissionDenied or an OUT_OF_RANGE FUTURE_REVISION.
//
// With req.since_revision 0 Watch starts, as WatchPods does, with one
// status message per current pod, each with the revision it last changed
// at, then a synced message (no pod) at the revision of that list, and
// then follows. With since_revision R it delivers every change after R.
//
// Watch lists again, from podsyncd's current state, when it cannot resume
// exactly: when podsyncd no longer keeps the revision to resume after
// (REVISION_COMPACTED), and when a stream that began with the current pods
// breaks before it is known to have sent all of them. A re-list delivers
// the current status of every selected pod again, and a deleted message
// for every pod delivered before that is no longer listed, or listed with
// another uid (it was deleted, or no longer matches the selector, in the
// meantime), and then a synced message. Messages of a re-list carry the
// list's revision (a deleted message has no time), and the changes in
// between (events, intermediate statuses) are not delivered.
//
// NOTE(client): podsyncd sends the deletion of a pod to a watcher with a
// label selector only if that stream has seen the pod since it began; after
// a resume, a selected pod deleted before it changed again goes unreported
// until the next re-list.
func (c *Client) Watch(ctx context.Context, req *podsyncv1.WatchPodsRequest, fn func(*podsyncv1.WatchPodsResponse) error) error {
	w := &watcher{
		c:         c,
		fn:        fn,
		namespace: req.GetNamespace(),
		selector:  req.GetLabelSelector(),
		since:     req.GetSinceRevision(),
		known:     map[string]*podsyncv1.PodRef{},
	}
	return w.run(ctx)
}

// watcher is the state of one Watch.
type watcher struct {
	c                   *Client
	fn                  func(*podsyncv1.WatchPodsResponse) error
	namespace, selector string

	// since is the revision to resume after: the highest revision
	// delivered, or the revision of the last re-list. 0 until anything was
	// delivered when the watch started with the current state.
	since int64
	// relist says that the next stream cannot resume exactly and must
	// start from a ListPods.
	relist bool
	// known are the pods delivered and not deleted, by "namespace/name",
	// for a re-list to find the pods deleted meanwhile.
	known map[string]*podsyncv1.PodRef
}

// fnError carries an error of the caller's fn out of the watcher.
type fnError struct{ err error }

func (e fnError) Error() string { return e.err.Error() }

func (w *watcher) run(ctx context.Context) error {
	const op = "Watch"
	bo := backoff{base: w.c.opts.retryBackoff}
	for {
		var delivered bool
		var err error
		if w.relist {
			delivered, err = w.list(ctx)
		}
		if err == nil {
			var d bool
			d, err = w.stream(ctx)
			delivered = delivered || d
		}
		var fe fnError
		if errors.As(err, &fe) {
			return fe.err
		}
		if ctx.Err() != nil {
			return wrap(op, "", ctx.Err())
		}
		switch {
		case Reason(err) == ReasonRevisionCompacted:
			w.relist = true
		case err == nil, retryable(err), Reason(err) == ReasonSlowConsumer:
			// The stream ended or broke: resume.
		default:
			return wrap(op, "", err)
		}
		if delivered {
			bo.reset()
		}
		if !sleep(ctx, bo.next()) {
			return wrap(op, "", ctx.Err())
		}
	}
}

// stream runs one WatchPods stream from w.since until it ends; a clean end
// is a nil error. It reports whether it delivered anything.
func (w *watcher) stream(ctx context.Context) (delivered bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := w.c.api.WatchPods(ctx, &podsyncv1.WatchPodsRequest{
		SinceRevision: w.since, Namespace: w.namespace, LabelSelector: w.selector,
	})
	if err != nil {
		return false, err
	}
	// A stream from revision 0 begins with one status per current pod, in
	// no revision order, up to a synced message. Until that (or, from a
	// podsyncd that sends none, a message that cannot belong to the list:
	// an event, a deletion, a second status of a pod) arrives, a break
	// leaves pods of the list unsent, and a plain resume after the highest
	// revision seen would miss them.
	initial := w.since == 0
	listed := map[string]bool{}
	for {
		m, err := s.Recv()
		if err != nil {
			if initial && delivered {
				w.relist = true
			}
			if isEOF(err) {
				return delivered, nil
			}
			return delivered, err
		}
		key := refName(m.GetPod())
		// synced ends the list this stream delivered, at a revision that
		// may be that of the last pod listed.
		ends := initial && m.GetSynced() != nil
		if initial {
			if m.GetStatus() != nil && !listed[key] {
				listed[key] = true
			} else {
				initial = false
			}
		}
		if !initial && !ends && m.GetRevision() <= w.since {
			continue // delivered before this stream
		}
		w.track(key, m)
		if err := w.fn(m); err != nil {
			return delivered, fnError{err}
		}
		delivered = true
		w.since = max(w.since, m.GetRevision())
	}
}

// list delivers the current state through ListPods: a deleted message for
// each known pod that is gone, then a status per pod, all at the list's
// revision, after which the watch resumes.
func (w *watcher) list(ctx context.Context) (delivered bool, err error) {
	resp, err := w.c.api.ListPods(ctx, &podsyncv1.ListPodsRequest{Namespace: w.namespace, LabelSelector: w.selector})
	if err != nil {
		return false, err
	}
	rev := resp.GetRevision()
	listed := make(map[string]string, len(resp.GetPods()))
	for _, p := range resp.GetPods() {
		listed[metaName(p.GetMetadata())] = p.GetMetadata().GetUid()
	}
	deliver := func(m *podsyncv1.WatchPodsResponse) error {
		w.track(refName(m.GetPod()), m)
		if err := w.fn(m); err != nil {
			return fnError{err}
		}
		delivered = true
		return nil
	}
	gone := slices.Sorted(func(yield func(string) bool) {
		for k, ref := range w.known {
			if uid, ok := listed[k]; (!ok || uid != ref.GetUid()) && !yield(k) {
				return
			}
		}
	})
	for _, k := range gone {
		if err := deliver(&podsyncv1.WatchPodsResponse{
			Revision: rev,
			Pod:      w.known[k],
			Change:   &podsyncv1.WatchPodsResponse_Deleted{Deleted: &podsyncv1.PodDeleted{}},
		}); err != nil {
			return delivered, err
		}
	}
	for _, p := range resp.GetPods() {
		md := p.GetMetadata()
		ns := md.GetNamespace()
		if ns == "" {
			ns = defaultNamespace
		}
		if err := deliver(&podsyncv1.WatchPodsResponse{
			Revision: rev,
			Pod:      &podsyncv1.PodRef{Namespace: ns, Name: md.GetName(), Uid: md.GetUid()},
			Change:   &podsyncv1.WatchPodsResponse_Status{Status: p.GetStatus()},
		}); err != nil {
			return delivered, err
		}
	}
	if err := deliver(&podsyncv1.WatchPodsResponse{
		Revision: rev,
		Change:   &podsyncv1.WatchPodsResponse_Synced{Synced: &podsyncv1.WatchSynced{}},
	}); err != nil {
		return delivered, err
	}
	w.since = max(w.since, rev)
	w.relist = false
	return delivered, nil
}

// track keeps w.known up to date with a delivered message.
func (w *watcher) track(key string, m *podsyncv1.WatchPodsResponse) {
	switch {
	case m.GetStatus() != nil:
		w.known[key] = m.GetPod()
	case m.GetDeleted() != nil:
		if ref, ok := w.known[key]; ok && ref.GetUid() == m.GetPod().GetUid() {
			delete(w.known, key)
		}
	}
}
