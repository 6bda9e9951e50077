package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/convert"
)

func newConvertCommand(a *app) *cobra.Command {
	var files []string
	var request, output string
	cmd := &cobra.Command{
		Use:   "convert -f FILE...",
		Short: "Print the API request for a set of manifests",
		Long: "convert reads Pod, ConfigMap and Secret manifests (YAML or JSON, multi-document,\n" +
			"kind: List; files, directories or - for stdin), applies the API server's\n" +
			"defaults, checks that podsync supports every field, and prints the request\n" +
			"as the API's JSON, ready for grpcurl -d @. It does not contact podsyncd.",
		Example: "  podsyncctl convert -f pod.yaml | grpcurl -unix -plaintext -d @ \\\n" +
			"      /run/podsync/podsync.sock podsync.v1.PodSyncService/RunPods\n" +
			"  podsyncctl convert --request sync -f web.yaml",
		Args: usageArgs(cobra.NoArgs),
		RunE: func(_ *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return usageErrorf("convert needs at least one -f")
			}
			if err := checkFormat(output, formatText, formatJSON, formatYAML); err != nil {
				return err
			}
			if request != "run" && request != "sync" && request != "plan" {
				return usageErrorf("--request must be run, sync or plan, not %q", request)
			}
			m, err := a.manifests(files)
			if err != nil {
				return err
			}
			msg, err := buildRequest(m, request)
			if err != nil {
				return err
			}
			format := output
			if format == formatText {
				format = formatJSON
			}
			return (&messageWriter{w: a.stdout, format: format}).write(msg)
		},
	}
	addFileFlag(cmd, &files, "manifest file, directory (its .yaml, .yml and .json files) or - for stdin; repeatable")
	cmd.Flags().StringVar(&request, "request", "run", "request to build: run (RunPodsRequest), sync or plan (one pod)")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json (the default) or yaml")
	return cmd
}

// buildRequest converts defaulted manifests into the request kind named
// by kind.
func buildRequest(m *convert.Manifests, kind string) (proto.Message, error) {
	pods, cms, secrets, err := convert.ManifestsToProto(m)
	if err != nil {
		return nil, err
	}
	if len(pods) == 0 {
		return nil, errors.New("no Pod in the manifests")
	}
	if kind == "run" {
		return &podsyncv1.RunPodsRequest{Pods: pods, ConfigMaps: cms, Secrets: secrets}, nil
	}
	if len(pods) != 1 {
		return nil, fmt.Errorf("--request %s takes exactly one Pod, the manifests hold %d", kind, len(pods))
	}
	if kind == "sync" {
		return &podsyncv1.SyncPodRequest{Pod: pods[0], ConfigMaps: cms, Secrets: secrets}, nil
	}
	return &podsyncv1.PlanPodRequest{Pod: pods[0], ConfigMaps: cms, Secrets: secrets}, nil
}
