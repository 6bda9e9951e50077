package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/podsync/podsync/client"
	"github.com/podsync/podsync/convert"
	"github.com/podsync/podsync/validation"
)

// addFileFlag adds the repeatable -f flag of the commands that read
// manifests; shells complete it with manifest files and directories.
func addFileFlag(cmd *cobra.Command, files *[]string, usage string) {
	cmd.Flags().StringArrayVarP(files, "filename", "f", nil, usage)
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
}

// readManifests reads every named file, directory and "-" (stdin), in
// order, with convert.ReadManifests: every document of every file is
// checked before anything is sent — as podsyncd checks it unless
// decodeOnly (delete needs only the names) — and every problem is
// reported at once, one line each with its file and line. Notices (fields
// dropped or accepted without effect) go to stderr.
func (a *app) readManifests(names []string, decodeOnly bool) (*convert.Manifests, error) {
	var sources []convert.Source
	for _, name := range names {
		paths, err := expand(name)
		if err != nil {
			return nil, err
		}
		for _, p := range paths {
			var data []byte
			if p == "-" {
				data, err = io.ReadAll(a.stdin)
			} else {
				data, err = os.ReadFile(p)
			}
			if err != nil {
				return nil, fmt.Errorf("read manifests: %w", err)
			}
			sources = append(sources, convert.Source{Name: displayName(p), Data: data})
		}
	}
	m, notices, err := convert.ReadManifests(sources, convert.ReadOptions{DecodeOnly: decodeOnly, Validation: validation.Options{StoredObjects: true, Limits: validation.ClientLimits()}})
	for _, n := range notices {
		_, _ = fmt.Fprintf(a.stderr, "notice: %s\n", n)
	}
	return m, err
}

// expand turns a directory into its manifest files (*.yaml, *.yml and
// *.json, not recursively), sorted by name.
func expand(name string) ([]string, error) {
	if name == "-" {
		return []string{name}, nil
	}
	fi, err := os.Stat(name)
	if err != nil {
		return nil, fmt.Errorf("read manifests: %w", err)
	}
	if !fi.IsDir() {
		return []string{name}, nil
	}
	entries, err := os.ReadDir(name)
	if err != nil {
		return nil, fmt.Errorf("read manifests: %w", err)
	}
	var out []string
	for _, e := range entries {
		switch strings.ToLower(filepath.Ext(e.Name())) {
		case ".yaml", ".yml", ".json":
			if !e.IsDir() {
				out = append(out, filepath.Join(name, e.Name()))
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("read manifests: %s holds no .yaml, .yml or .json file", name)
	}
	slices.Sort(out)
	return out, nil
}

func displayName(p string) string {
	if p == "-" {
		return "stdin"
	}
	return p
}

// createClaims creates the named volume of each PersistentVolumeClaim
// document, as podman kube play does, before the pods that mount it are
// sent, and says so on w ("volume/data created", or "unchanged" for one
// that exists).
func (a *app) createClaims(ctx context.Context, c *client.Client, claims []convert.ClaimRef, w io.Writer) error {
	for _, claim := range claims {
		name := claim.Name
		created, err := c.CreateVolume(ctx, claim.Namespace, name)
		if err != nil {
			return err
		}
		word := "unchanged"
		if created {
			word = "created"
		}
		if _, err := fmt.Fprintf(w, "volume/%s %s\n", name, word); err != nil {
			return err
		}
	}
	return nil
}
