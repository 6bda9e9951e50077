package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/convert"
)

func newConvertCommand() *cobra.Command {
	var files []string
	var request string
	cmd := &cobra.Command{
		Use:   "convert -f FILE...",
		Short: "Print the API request for a set of manifests",
		Long: "convert reads Pod, ConfigMap and Secret manifests (YAML or JSON, multi-document,\n" +
			"kind: List; files, directories or - for stdin), applies the API server's\n" +
			"defaults, checks that podsync supports every field, and prints the request\n" +
			"as the API's JSON, ready for grpcurl -d @.",
		Example: "  podsyncctl convert -f pod.yaml | grpcurl -unix -plaintext -d @ \\\n" +
			"      /run/podsync/podsync.sock podsync.v1.PodSyncService/RunPods\n" +
			"  podsyncctl convert --request sync -f web.yaml",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return usageError{errors.New("convert needs at least one -f")}
			}
			m, err := readManifests(cmd.InOrStdin(), files)
			if err != nil {
				return err
			}
			msg, err := buildRequest(m, request)
			if err != nil {
				return err
			}
			out, err := marshalJSON(msg)
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "manifest file, directory (its .yaml, .yml and .json files) or - for stdin; repeatable")
	cmd.Flags().StringVar(&request, "request", "run", "request to build: run (RunPodsRequest), sync or plan (one pod)")
	return cmd
}

// marshalJSON renders msg as the API's JSON, indented the same way on every
// run (protojson varies its whitespace on purpose).
func marshalJSON(msg proto.Message) ([]byte, error) {
	raw, err := protojson.Marshal(msg)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", msg.ProtoReflect().Descriptor().Name(), err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		return nil, fmt.Errorf("indent %s: %w", msg.ProtoReflect().Descriptor().Name(), err)
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// buildRequest defaults and converts the manifests into the request kind
// named by kind.
func buildRequest(m *convert.Manifests, kind string) (proto.Message, error) {
	for _, p := range m.Pods {
		convert.Default(p)
	}
	for _, c := range m.ConfigMaps {
		convert.DefaultConfigMap(c)
	}
	for _, s := range m.Secrets {
		convert.DefaultSecret(s)
	}
	pods, cms, secrets, err := convert.ManifestsToProto(m)
	if err != nil {
		return nil, err
	}
	if len(pods) == 0 {
		return nil, errors.New("no Pod in the manifests")
	}
	switch kind {
	case "run":
		return &podsyncv1.RunPodsRequest{Pods: pods, ConfigMaps: cms, Secrets: secrets}, nil
	case "sync", "plan":
		if len(pods) != 1 {
			return nil, fmt.Errorf("--request %s takes exactly one Pod, the manifests hold %d", kind, len(pods))
		}
		if kind == "sync" {
			return &podsyncv1.SyncPodRequest{Pod: pods[0], ConfigMaps: cms, Secrets: secrets}, nil
		}
		return &podsyncv1.PlanPodRequest{Pod: pods[0], ConfigMaps: cms, Secrets: secrets}, nil
	}
	return nil, usageError{fmt.Errorf("--request must be run, sync or plan, not %q", kind)}
}

// readManifests decodes every named file, directory and "-" (stdin), in
// order, into one set of manifests.
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
			all.Pods = append(all.Pods, m.Pods...)
			all.ConfigMaps = append(all.ConfigMaps, m.ConfigMaps...)
			all.Secrets = append(all.Secrets, m.Secrets...)
		}
	}
	return all, nil
}

// expand turns a directory into its manifest files, sorted by name.
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
	var out []string
	err = filepath.WalkDir(name, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch strings.ToLower(filepath.Ext(p)) {
		case ".yaml", ".yml", ".json":
			if !d.IsDir() {
				out = append(out, p)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read manifests in %s: %w", name, err)
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
