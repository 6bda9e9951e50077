package claims

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
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
)

// NamedVolume is a node-local named volume: the directory a
// persistentVolumeClaim volume of its name mounts in the pods of its
// namespace.
type NamedVolume struct {
	// Namespace and Name (the claimName) name it.
	Namespace, Name string
	// Path is its directory on the node.
	Path string
	// Pods are the stored pods naming it, as namespace/name, sorted.
	Pods []string
}

// Volumes are the node's named volumes: the directories the
// persistentVolumeClaim volumes of its pods mount, one per namespace and
// claimName under <root>/claims, created by a pod's first pass or by
// Create.
type Volumes struct {
	store *store.Store
	cfg   criconfig.Options
	log   *zap.Logger
}

// New returns the named volumes of the node whose pods st holds, with
// its directories under cfg's root.
func New(st *store.Store, cfg criconfig.Options, log *zap.Logger) *Volumes {
	return &Volumes{store: st, cfg: cfg, log: log}
}

// claimKey is a named volume's namespace and name.
type claimKey struct{ namespace, name string }

// List returns the node's named volumes, sorted by namespace and name,
// with the stored pods that name each. A claim a stored pod names whose
// directory is not created yet (its pod has not run) is listed too.
func (n *Volumes) List(ctx context.Context) ([]NamedVolume, error) {
	users, err := n.claimUsers(ctx)
	if err != nil {
		return nil, err
	}
	keys := map[claimKey]bool{}
	for k := range users {
		keys[k] = true
	}
	root := criconfig.ClaimVolumesRoot(n.cfg)
	namespaces, err := os.ReadDir(root)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("list named volumes: %w", err)
	}
	for _, ns := range namespaces {
		entries, err := os.ReadDir(filepath.Join(root, ns.Name()))
		if err != nil {
			continue
		}
		for _, e := range entries {
			// A volume being removed is renamed to a hidden name first.
			if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
				keys[claimKey{ns.Name(), e.Name()}] = true
			}
		}
	}
	out := make([]NamedVolume, 0, len(keys))
	for _, k := range slices.SortedFunc(maps.Keys(keys), func(a, b claimKey) int {
		return cmp.Or(cmp.Compare(a.namespace, b.namespace), cmp.Compare(a.name, b.name))
	}) {
		pods := users[k]
		slices.Sort(pods)
		out = append(out, NamedVolume{Namespace: k.namespace, Name: k.name, Path: criconfig.ClaimVolumeDir(k.namespace, k.name, n.cfg), Pods: pods})
	}
	return out, nil
}

// Create creates the named volume name of namespace, as a pod of the
// namespace naming the claim would on its first run (a
// PersistentVolumeClaim document applied), and reports whether it created
// it: an existing one is left as it is, or, with mustNotExist, refused
// with a *errdefs.PreconditionError. A name that cannot be a volume's is
// ErrInvalidSpec. The creation is fenced by ctx's lease condition
// (store.WithFence).
func (n *Volumes) Create(ctx context.Context, namespace, name string, mustNotExist bool) (bool, error) {
	var created bool
	err := n.store.Fenced(store.FenceOf(ctx), func() error {
		if mustNotExist {
			if _, err := os.Lstat(criconfig.ClaimVolumeDir(namespace, name, n.cfg)); err == nil {
				return &errdefs.PreconditionError{Kind: errdefs.RevisionMismatch, What: "volume " + namespace + "/" + name, Exists: true, Want: "absent"}
			}
		}
		var err error
		created, err = syncer.EnsureClaimVolume(namespace, name, n.cfg)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("create volume %s/%s: %w", namespace, name, err)
	}
	if created {
		n.log.Info("named volume created", zap.String(logx.Volume, namespace+"/"+name))
	}
	return created, nil
}

// Delete removes the named volume name of namespace and its data. It
// returns false if there is none, an error wrapping ErrVolumeInUse
// (naming the pods) while a stored pod names it, whatever its phase:
// delete the pods first. A name that cannot be a volume's is
// ErrInvalidSpec; a refusal of ctx's lease condition a *errdefs.LeaseError.
//
// NOTE(podsync): the directory is renamed away before the pods are
// checked a second time, so a pod stored while the volume is removed
// either keeps it (the rename is undone) or finds a new, empty one.
func (n *Volumes) Delete(ctx context.Context, namespace, name string) (bool, error) {
	if err := syncer.CheckClaimVolumeName(namespace, name); err != nil {
		return false, err
	}
	k := claimKey{namespace, name}
	if err := n.checkUnused(ctx, k); err != nil {
		return false, err
	}
	dir := criconfig.ClaimVolumeDir(namespace, name, n.cfg)
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("delete volume %s/%s: %w", namespace, name, err)
	case !fi.IsDir():
		return false, fmt.Errorf("delete volume %s/%s: %s is not a directory: %w", namespace, name, dir, errdefs.ErrInvalidSpec)
	}
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	gone := filepath.Join(filepath.Dir(dir), ".deleting-"+name+"-"+hex.EncodeToString(suffix))
	// The rename is the deletion's commit point: fenced by ctx's lease
	// condition, ordered with the lease's changes.
	if err := n.store.Fenced(store.FenceOf(ctx), func() error { return os.Rename(dir, gone) }); err != nil {
		return false, fmt.Errorf("delete volume %s/%s: %w", namespace, name, err)
	}
	if err := n.checkUnused(ctx, k); err != nil {
		if rerr := os.Rename(gone, dir); rerr != nil {
			return false, errors.Join(err, fmt.Errorf("restore volume %s/%s: %w", namespace, name, rerr))
		}
		return false, err
	}
	if err := os.RemoveAll(gone); err != nil {
		return false, fmt.Errorf("delete volume %s/%s: %w", namespace, name, err)
	}
	n.log.Info("named volume removed", zap.String(logx.Volume, namespace+"/"+name))
	return true, nil
}

func (n *Volumes) checkUnused(ctx context.Context, k claimKey) error {
	users, err := n.claimUsers(ctx)
	if err != nil {
		return err
	}
	if pods := users[k]; len(pods) > 0 {
		slices.Sort(pods)
		what := "pod"
		if len(pods) > 1 {
			what = "pods"
		}
		return fmt.Errorf("volume %s/%s is used by %s %s; delete the pods that name it first: %w", k.namespace, k.name, what,
			strings.Join(pods, ", "), errdefs.ErrVolumeInUse)
	}
	return nil
}

// claimUsers maps each claim the stored pods name, in their namespace, to
// those pods.
func (n *Volumes) claimUsers(_ context.Context) (map[claimKey][]string, error) {
	recs, _, err := n.store.ListShared(store.Filter{})
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	out := map[claimKey][]string{}
	for _, rec := range recs {
		for _, v := range rec.Pod.Spec.Volumes {
			if c := v.PersistentVolumeClaim; c != nil {
				k, who := claimKey{rec.Pod.Namespace, c.ClaimName}, rec.Pod.Namespace+"/"+rec.Pod.Name
				if !slices.Contains(out[k], who) {
					out[k] = append(out[k], who)
				}
			}
		}
	}
	return out, nil
}

// Migrate moves the named volumes of the layout without namespaces to the
// namespace of the stored pods that name each (syncer.MigrateClaimVolumes):
// of pods of several namespaces, the first stored pod's keeps the data
// and the others get a new, empty volume, which is logged; one no pod
// names goes to "default", a PersistentVolumeClaim's default namespace.
func (n *Volumes) Migrate() error {
	recs, _, err := n.store.ListShared(store.Filter{})
	if err != nil {
		return fmt.Errorf("migrate named volumes: list pods: %w", err)
	}
	slices.SortFunc(recs, func(a, b *store.PodRecord) int { return cmp.Compare(a.CreateRevision, b.CreateRevision) })
	done, err := syncer.MigrateClaimVolumes(n.cfg, func(claim string) (string, []string) {
		var namespaces []string
		for _, rec := range recs {
			for _, v := range rec.Pod.Spec.Volumes {
				if c := v.PersistentVolumeClaim; c != nil && c.ClaimName == claim && !slices.Contains(namespaces, rec.Pod.Namespace) {
					namespaces = append(namespaces, rec.Pod.Namespace)
				}
			}
		}
		if len(namespaces) == 0 {
			return "default", nil
		}
		return namespaces[0], namespaces[1:]
	})
	for _, m := range done {
		log := n.log.Info
		if len(m.Left) > 0 {
			log = n.log.Warn
		}
		log("named volume moved to its namespace", zap.String(logx.Volume, m.Namespace+"/"+m.Claim),
			zap.Strings("namespaces_given_a_new_volume", m.Left))
	}
	return err
}
