package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/podsync/podsync/convert"
)

// addFileFlag adds the repeatable -f flag of the commands that read
// manifests; shells complete it with manifest files and directories.
func addFileFlag(cmd *cobra.Command, files *[]string, usage string) {
	cmd.Flags().StringArrayVarP(files, "filename", "f", nil, usage)
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
}

// readManifests decodes every named file, directory and "-" (stdin), in
// order, into one set of manifests, defaulted as the API server defaults
// them. Every error names the file; decoding and conversion errors name
// the document and the field (convert.Decode, convert.ManifestsToProto).
func readManifests(stdin io.Reader, names []string) (*convert.Manifests, error) {
	all := &convert.Manifests{}
	for _, name := range names {
		paths, err := expand(name)
		if err != nil {
			return nil, err
		}
		for _, p := range paths {
			var data []byte
			if p == "-" {
				data, err = io.ReadAll(stdin)
			} else {
				data, err = os.ReadFile(p)
			}
			if err != nil {
				return nil, fmt.Errorf("read manifests: %w", err)
			}
			m, err := convert.Decode(bytes.NewReader(data))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", displayName(p), err)
			}
			for _, pod := range m.Pods {
				convert.Default(pod)
			}
			for _, c := range m.ConfigMaps {
				convert.DefaultConfigMap(c)
			}
			for _, s := range m.Secrets {
				convert.DefaultSecret(s)
			}
			// Convert each file on its own too, so that a field podsync
			// does not support is reported with the file it is in.
			if _, _, _, err := convert.ManifestsToProto(m); err != nil {
				return nil, fmt.Errorf("%s: %w", displayName(p), err)
			}
			all.Pods = append(all.Pods, m.Pods...)
			all.ConfigMaps = append(all.ConfigMaps, m.ConfigMaps...)
			all.Secrets = append(all.Secrets, m.Secrets...)
			for _, n := range m.Notices {
				all.Notices = append(all.Notices, displayName(p)+": "+n)
			}
		}
	}
	return all, nil
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

// manifests reads manifests as readManifests does and prints their
// notices (such as a Service skipped beside a Deployment) on stderr.
func (a *app) manifests(names []string) (*convert.Manifests, error) {
	m, err := readManifests(a.stdin, names)
	if err != nil {
		return nil, err
	}
	for _, n := range m.Notices {
		_, _ = fmt.Fprintf(a.stderr, "notice: %s\n", n)
	}
	return m, nil
}
