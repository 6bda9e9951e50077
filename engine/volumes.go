package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/logx"
	"github.com/podsync/podsync/validation"
)

// NamedVolume is a node-local named volume: the directory a
// persistentVolumeClaim volume of its name mounts.
type NamedVolume struct {
	// Name is the claimName.
	Name string
	// Path is its directory on the node.
	Path string
	// Pods are the stored pods naming it, as namespace/name, sorted.
	Pods []string
}

// Volumes are the node's named volumes: the directories the
// persistentVolumeClaim volumes of its pods mount, under
// <root>/volumes, created by a pod's first pass or by Create.
type Volumes struct {
	store *store.Store
	cfg   criconfig.Options
	log   *zap.Logger
}

// Volumes returns the node's named volumes.
func (n *Node) Volumes() *Volumes { return &Volumes{store: n.store, cfg: n.cfg.node, log: n.cfg.log} }

// List returns the node's named volumes, sorted by name, with the
// stored pods that name each. A claim a stored pod names whose directory
// is not created yet (its pod has not run) is listed too.
func (n *Volumes) List(ctx context.Context) ([]NamedVolume, error) {
	users, err := n.claimUsers(ctx)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for name := range users {
		names[name] = true
	}
	entries, err := os.ReadDir(criconfig.ClaimVolumesRoot(n.cfg))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("list named volumes: %w", err)
	}
	for _, e := range entries {
		// A volume being removed is renamed to a hidden name first.
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			names[e.Name()] = true
		}
	}
	out := make([]NamedVolume, 0, len(names))
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range names {
			if !yield(k) {
				return
			}
		}
	}) {
		pods := users[name]
		slices.Sort(pods)
		out = append(out, NamedVolume{Name: name, Path: criconfig.ClaimVolumeDir(name, n.cfg), Pods: pods})
	}
	return out, nil
}

// Create creates the named volume name, as a pod naming the claim
// would on its first run (a PersistentVolumeClaim document applied), and
// reports whether it created it: an existing one is left as it is, or,
// with mustNotExist, refused with a *errdefs.PreconditionError. A name
// that cannot be a volume's is ErrInvalidSpec. The creation is fenced by
// ctx's lease condition (WithFence).
func (n *Volumes) Create(ctx context.Context, name string, mustNotExist bool) (bool, error) {
	var created bool
	err := n.store.Fenced(FenceOf(ctx), func() error {
		if mustNotExist {
			if _, err := os.Lstat(criconfig.ClaimVolumeDir(name, n.cfg)); err == nil {
				return &errdefs.PreconditionError{Kind: errdefs.RevisionMismatch, What: "volume " + name, Exists: true, Want: "absent"}
			}
		}
		var err error
		created, err = syncer.EnsureClaimVolume(name, n.cfg)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("create volume %q: %w", name, err)
	}
	if created {
		n.log.Info("named volume created", zap.String(logx.Volume, name))
	}
	return created, nil
}

// Delete removes the named volume name and its data. It returns
// false if there is none, an error wrapping ErrVolumeInUse (naming the
// pods) while a stored pod names it, whatever its phase: delete the pods
// first. A name that cannot be a volume's is ErrInvalidSpec; a refusal of
// ctx's lease condition a *errdefs.LeaseError.
//
// NOTE(podsync): the directory is renamed away before the pods are
// checked a second time, so a pod stored while the volume is removed
// either keeps it (the rename is undone) or finds a new, empty one.
func (n *Volumes) Delete(ctx context.Context, name string) (bool, error) {
	if err := errdefs.InvalidSpec(validation.CheckFileName("volume name", name)); err != nil {
		return false, err
	}
	if strings.HasPrefix(name, ".") {
		return false, fmt.Errorf("volume name %q: must not start with '.': %w", name, errdefs.ErrInvalidSpec)
	}
	if err := n.checkUnused(ctx, name); err != nil {
		return false, err
	}
	dir := criconfig.ClaimVolumeDir(name, n.cfg)
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("delete volume %q: %w", name, err)
	case !fi.IsDir():
		return false, fmt.Errorf("delete volume %q: %s is not a directory: %w", name, dir, errdefs.ErrInvalidSpec)
	}
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	gone := filepath.Join(filepath.Dir(dir), ".deleting-"+name+"-"+hex.EncodeToString(suffix))
	// The rename is the deletion's commit point: fenced by ctx's lease
	// condition, ordered with the lease's changes.
	if err := n.store.Fenced(FenceOf(ctx), func() error { return os.Rename(dir, gone) }); err != nil {
		return false, fmt.Errorf("delete volume %q: %w", name, err)
	}
	if err := n.checkUnused(ctx, name); err != nil {
		if rerr := os.Rename(gone, dir); rerr != nil {
			return false, errors.Join(err, fmt.Errorf("restore volume %q: %w", name, rerr))
		}
		return false, err
	}
	if err := os.RemoveAll(gone); err != nil {
		return false, fmt.Errorf("delete volume %q: %w", name, err)
	}
	n.log.Info("named volume removed", zap.String(logx.Volume, name))
	return true, nil
}

func (n *Volumes) checkUnused(ctx context.Context, name string) error {
	users, err := n.claimUsers(ctx)
	if err != nil {
		return err
	}
	if pods := users[name]; len(pods) > 0 {
		slices.Sort(pods)
		what := "pod"
		if len(pods) > 1 {
			what = "pods"
		}
		return fmt.Errorf("volume %q is used by %s %s; delete the pods that name it first: %w", name, what, strings.Join(pods, ", "), errdefs.ErrVolumeInUse)
	}
	return nil
}

// claimUsers maps each claimName the stored pods name to those pods.
func (n *Volumes) claimUsers(_ context.Context) (map[string][]string, error) {
	recs, _, err := n.store.ListShared(store.Filter{})
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	out := map[string][]string{}
	for _, rec := range recs {
		for _, v := range rec.Pod.Spec.Volumes {
			if c := v.PersistentVolumeClaim; c != nil {
				who := rec.Pod.Namespace + "/" + rec.Pod.Name
				if !slices.Contains(out[c.ClaimName], who) {
					out[c.ClaimName] = append(out[c.ClaimName], who)
				}
			}
		}
	}
	return out, nil
}
