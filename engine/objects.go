package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/model"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/logx"
)

// SourceAnnotation marks the pods and objects a source other than the
// API owns: "file:NAME" for those read from the file NAME of the manifest
// directory, as the kubelet marks static pods with
// kubernetes.io/config.source. The API refuses to change or delete them
// (ErrOwnedByFile).
const SourceAnnotation = "podsync.io/source"

// SourceOf returns the source of an object's annotations: "" for the API.
func SourceOf(annotations map[string]string) string { return annotations[SourceAnnotation] }

// Events recorded on the pods that use a changed ConfigMap or Secret.
const (
	EventConfigMapUpdated = "ConfigMapUpdated"
	EventSecretUpdated    = "SecretUpdated"
)

// ownedBy refuses a write by source of an object or pod whose stored
// annotations name another source.
func ownedBy(what string, annotations map[string]string, source string) error {
	if have := SourceOf(annotations); have != source {
		if have == "" {
			return nil // the API's object, now also in a file: the file takes it
		}
		name := strings.TrimPrefix(have, "file:")
		return fmt.Errorf("%s is owned by the file %q of the manifest directory: %w; change or remove that file instead", what, name, errdefs.ErrOwnedByFile)
	}
	return nil
}

// ApplyObjects stores ConfigMaps and Secrets as objects of the node, in
// one transaction (store.PutObjects), on behalf of source ("" for the
// API, "file:NAME" for the manifest directory). Every pod that refers to
// an object created or changed gets a pass at once, which writes its
// volume files again; a changed object also records an event on each of
// those pods (EventConfigMapUpdated, EventSecretUpdated).
//
// It returns an error wrapping ErrOwnedByFile when an object is owned by
// another source, and the store's errors (a *errdefs.PreconditionError, ErrInvalidSpec
// for a change of an immutable object).
func (n *Node) ApplyObjects(ctx context.Context, objs []store.ObjectPut, source string) ([]store.ObjectResult, error) {
	if len(objs) == 0 {
		return nil, nil
	}
	if err := n.waitReady(ctx); err != nil {
		return nil, err
	}
	res, err := n.store.PutObjectsFenced(objs, ownerCheck(source), FenceOf(ctx))
	if err != nil {
		return nil, fmt.Errorf("apply objects: %w", err)
	}
	n.objectsStored(ctx, res)
	return res, nil
}

// ownerCheck refuses the change of an object source does not own.
func ownerCheck(source string) func(old, next *store.ObjectRecord) error {
	return func(old, _ *store.ObjectRecord) error {
		if old != nil {
			return ownedBy(old.Ref().String(), old.Meta().Annotations, source)
		}
		return nil
	}
}

// objectsStored logs the objects a write created or changed and starts
// the passes of the pods that use them.
func (n *Node) objectsStored(ctx context.Context, res []store.ObjectResult) {
	var changed []store.ObjectResult
	for _, r := range res {
		if r.Changed {
			changed = append(changed, r)
			logx.From(ctx, n.cfg.log).Info("object stored", zap.String(logx.Object, r.Record.Ref().String()),
				zap.String(logx.ResourceVersion, r.Record.ResourceVersion()), zap.Bool("created", r.Created))
		}
	}
	n.objectsChanged(ctx, changed)
}

// objectsChanged starts a pass of every pod that refers to one of the
// changed objects and records an event of each update on it.
func (n *Node) objectsChanged(ctx context.Context, changed []store.ObjectResult) {
	if len(changed) == 0 {
		return
	}
	recs, _, err := n.store.ListShared(store.Filter{})
	if err != nil {
		logx.From(ctx, n.cfg.log).Warn("list pods of changed objects", zap.Error(err))
		return
	}
	for _, rec := range recs {
		if rec.Deleting || model.IsTerminal(rec.Pod.Status.Phase) {
			continue
		}
		cms, secrets := criconfig.ReferencedNames(rec.Pod)
		var events []store.Change
		uses := false
		for _, c := range changed {
			ref := c.Record.Ref()
			if ref.Namespace != rec.Pod.Namespace {
				continue
			}
			reason := ""
			switch {
			case ref.Kind == store.KindConfigMap && cms[ref.Name]:
				reason = EventConfigMapUpdated
			case ref.Kind == store.KindSecret && secrets[ref.Name]:
				reason = EventSecretUpdated
			default:
				continue
			}
			uses = true
			if c.Created {
				continue
			}
			events = append(events, store.EventChange(rec.Ref(), store.Event{Type: corev1.EventTypeNormal, Reason: reason,
				Message: fmt.Sprintf("%s %s changed (resourceVersion %s): its volume files are updated; "+
					"environment variables keep their values until the container restarts", ref.Kind, ref.Name, c.Record.ResourceVersion())}))
		}
		if !uses {
			continue
		}
		if len(events) > 0 {
			if _, err := n.store.Append(events...); err != nil && !errors.Is(err, errdefs.ErrPodNotFound) {
				logx.From(ctx, n.cfg.log).Warn("record object update events", append(logx.Pod(rec.Pod), zap.Error(err))...)
			}
		}
		n.workers.Kick(rec.Pod.UID)
	}
}

// kickUsers starts a pass of every live pod that refers to ref.
func (n *Node) kickUsers(ctx context.Context, ref store.ObjectRef) {
	recs, _, err := n.store.ListShared(store.Filter{})
	if err != nil {
		logx.From(ctx, n.cfg.log).Warn("list pods of a deleted object", zap.Error(err))
		return
	}
	for _, rec := range recs {
		if rec.Deleting || model.IsTerminal(rec.Pod.Status.Phase) || rec.Pod.Namespace != ref.Namespace {
			continue
		}
		cms, secrets := criconfig.ReferencedNames(rec.Pod)
		if ref.Kind == store.KindConfigMap && cms[ref.Name] || ref.Kind == store.KindSecret && secrets[ref.Name] {
			n.workers.Kick(rec.Pod.UID)
		}
	}
}

// GetObject returns the stored object ref, a Secret's values removed, or
// an error wrapping ErrObjectNotFound.
func (n *Node) GetObject(_ context.Context, ref store.ObjectRef) (*store.ObjectRecord, error) {
	return n.store.GetObject(ref)
}

// ListObjects returns the stored objects f selects (store.ListObjects).
func (n *Node) ListObjects(_ context.Context, f store.ObjectFilter) ([]*store.ObjectRecord, int64, error) {
	recs, rev, err := n.store.ListObjects(f)
	if err != nil {
		return nil, 0, fmt.Errorf("list objects: %w", err)
	}
	return recs, rev, nil
}

// DeleteObject removes the stored object ref on behalf of source, when
// resourceVersion (if not empty) is its version. Every pod that uses it
// gets a pass at once, as the kubelet's next volume remount: an optional
// source's files leave the volume; a required one's stay, its volume
// failing (FailedMount) until the object is back, and a container
// started later that needs it waits for it. found is false, with no
// error, when no such object is stored.
func (n *Node) DeleteObject(ctx context.Context, ref store.ObjectRef, resourceVersion, source string) (found bool, rev int64, err error) {
	rev, err = n.store.DeleteObjectFenced(ref, resourceVersion, func(old *store.ObjectRecord) error {
		return ownedBy(ref.String(), old.Meta().Annotations, source)
	}, FenceOf(ctx))
	switch {
	case errors.Is(err, errdefs.ErrObjectNotFound):
		return false, 0, nil
	case err != nil:
		return false, 0, fmt.Errorf("delete object: %w", err)
	}
	logx.From(ctx, n.cfg.log).Info("object deleted", zap.String(logx.Object, ref.String()))
	n.kickUsers(ctx, ref)
	return true, rev, nil
}

// ObjectPuts returns the puts of configMaps and secrets, without
// preconditions.
func ObjectPuts(configMaps []*corev1.ConfigMap, secrets []*corev1.Secret) []store.ObjectPut {
	out := make([]store.ObjectPut, 0, len(configMaps)+len(secrets))
	for _, cm := range configMaps {
		if cm != nil {
			out = append(out, store.ObjectPut{ConfigMap: cm})
		}
	}
	for _, s := range secrets {
		if s != nil {
			out = append(out, store.ObjectPut{Secret: s})
		}
	}
	return out
}

// RecordEvent records an event about a stored pod on behalf of another
// source of the node (the manifest directory reporting a bad file). It
// returns an error wrapping ErrNotFound when the pod is not stored.
func (n *Node) RecordEvent(ref store.PodRef, ev store.Event) error {
	_, err := n.store.Append(store.EventChange(ref, ev))
	return err
}
