package syncer

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/validation"
)

// CheckClaimVolumeName checks a named volume's namespace and name, each
// one path element that does not start with a dot; an error wraps
// ErrInvalidSpec.
func CheckClaimVolumeName(namespace, claim string) error {
	for _, f := range []struct{ what, v string }{{"namespace", namespace}, {"claimName", claim}} {
		if err := errdefs.InvalidSpec(validation.CheckFileName(f.what, f.v)); err != nil {
			return err
		}
		if strings.HasPrefix(f.v, ".") {
			return fmt.Errorf("%s %q: must not start with '.': %w", f.what, f.v, errdefs.ErrInvalidSpec)
		}
	}
	return nil
}

// EnsureClaimVolume creates the node-local named volume claim of
// namespace (mode 0777, as an emptyDir's, so that any user of a container
// may write it), podman kube play's semantics, and reports whether it
// created it; an existing one is left as it is.
func EnsureClaimVolume(namespace, claim string, opts criconfig.Options) (created bool, err error) {
	if err := CheckClaimVolumeName(namespace, claim); err != nil {
		return false, err
	}
	parent := filepath.Join(criconfig.ClaimVolumesRoot(opts), namespace)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return false, fmt.Errorf("create the named volumes' directory: %w", err)
	}
	dir := criconfig.ClaimVolumeDir(namespace, claim, opts)
	fi, err := os.Lstat(dir)
	switch {
	case err == nil && fi.IsDir():
		return false, nil
	case err == nil:
		return false, fmt.Errorf("named volume %s/%s: %s is not a directory: %w", namespace, claim, dir, errdefs.ErrInvalidSpec)
	case !errors.Is(err, fs.ErrNotExist):
		return false, err
	}
	if err := os.Mkdir(dir, 0o777); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, nil
		}
		return false, fmt.Errorf("create named volume %s/%s: %w", namespace, claim, err)
	}
	return true, os.Chmod(dir, 0o777)
}

// ClaimMigration is one named volume MigrateClaimVolumes moved.
type ClaimMigration struct {
	// Claim is the volume's name; Namespace the namespace it now belongs
	// to.
	Claim, Namespace string
	// Left are the other namespaces whose pods named it: they get a new,
	// empty volume of that name.
	Left []string
}

// MigrateClaimVolumes moves the named volumes of the layout without
// namespaces (criconfig.LegacyClaimVolumesRoot, <root>/volumes/<claim>,
// where every namespace's pods shared one volume per claimName) to the
// namespace owner names (criconfig.ClaimVolumeDir): owner returns the
// namespace a claim's data goes to, and the other namespaces whose pods
// named it. Each move is a rename, so running containers keep their
// mounts and a crash leaves every volume in one place or the other; a
// later call moves what is left. The legacy directory goes once empty
// (with what a deletion left behind in it). A volume whose namespace
// holds one of that name already stays where it is, and is reported in
// the error.
func MigrateClaimVolumes(opts criconfig.Options, owner func(claim string) (namespace string, others []string)) ([]ClaimMigration, error) {
	legacy := criconfig.LegacyClaimVolumesRoot(opts)
	entries, err := os.ReadDir(legacy)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("migrate named volumes: %w", err)
	}
	var done []ClaimMigration
	var errs []error
	for _, e := range entries {
		old := filepath.Join(legacy, e.Name())
		if strings.HasPrefix(e.Name(), ".deleting-") {
			errs = append(errs, os.RemoveAll(old))
			continue
		}
		if !e.IsDir() || CheckClaimVolumeName("default", e.Name()) != nil {
			continue
		}
		ns, others := owner(e.Name())
		if err := CheckClaimVolumeName(ns, e.Name()); err != nil {
			errs = append(errs, fmt.Errorf("migrate named volume %q: %w", e.Name(), err))
			continue
		}
		if err := os.MkdirAll(filepath.Join(criconfig.ClaimVolumesRoot(opts), ns), 0o755); err != nil {
			errs = append(errs, fmt.Errorf("migrate named volume %q: %w", e.Name(), err))
			continue
		}
		to := criconfig.ClaimVolumeDir(ns, e.Name(), opts)
		if _, err := os.Lstat(to); err == nil {
			errs = append(errs, fmt.Errorf("migrate named volume %q: %s exists already: %s is left where it is", e.Name(), to, old))
			continue
		}
		if err := os.Rename(old, to); err != nil {
			errs = append(errs, fmt.Errorf("migrate named volume %q: %w", e.Name(), err))
			continue
		}
		done = append(done, ClaimMigration{Claim: e.Name(), Namespace: ns, Left: others})
	}
	if rest, err := os.ReadDir(legacy); err == nil && len(rest) == 0 {
		errs = append(errs, os.Remove(legacy))
	}
	return done, errors.Join(errs...)
}
