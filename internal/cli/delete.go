package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

func (a *app) newDeleteCommand() *cobra.Command {
	var (
		files          []string
		namespace      string
		all            bool
		gracePeriod    int64
		uid            string
		ignoreNotFound bool
		output         string
	)
	cmd := &cobra.Command{
		Use:   "delete [pods] (NAME... | -f FILE... | --all)",
		Short: "Stop and remove pods",
		Long: "delete stops pods — preStop hooks, SIGTERM, SIGKILL after the grace period —\n" +
			"and removes their containers, sandboxes, volumes and logs. It returns once\n" +
			"everything is gone. Pods are named, taken from manifests (-f), or all the\n" +
			"pods of -n (every namespace without it) with --all.\n\n" +
			"A pod that does not exist is an error unless --ignore-not-found.",
		Example: "  podsyncctl delete web\n" +
			"  podsyncctl delete -f examples/ --grace-period 0\n" +
			"  podsyncctl delete --all -n demo",
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && resourceWords[args[0]] {
				args = args[1:]
			}
			if err := checkFormat(output, formatText, formatJSON, formatYAML); err != nil {
				return err
			}
			sources := 0
			for _, set := range []bool{len(args) > 0, len(files) > 0, all} {
				if set {
					sources++
				}
			}
			if sources != 1 {
				return usageErrorf("name the pods, or give -f or --all (one of them)")
			}
			if uid != "" && len(args) != 1 {
				return usageErrorf("--uid takes exactly one pod name")
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			defer func() { _ = c.Close() }()
			var refs [][2]string
			switch {
			case len(files) > 0:
				m, err := readManifests(a.stdin, files)
				if err != nil {
					return err
				}
				if len(m.Pods) == 0 {
					return errors.New("no Pod in the manifests")
				}
				refs = manifestRefs(m)
			case all:
				ctx, cancel := a.callContext(cmd.Context())
				resp, err := c.ListPods(ctx, &podsyncv1.ListPodsRequest{Namespace: namespace})
				cancel()
				if err != nil {
					return err
				}
				for _, p := range resp.GetPods() {
					refs = append(refs, [2]string{p.GetMetadata().GetNamespace(), p.GetMetadata().GetName()})
				}
			default:
				for _, name := range args {
					refs = append(refs, [2]string{namespaceOr(namespace), name})
				}
			}
			mw := &messageWriter{w: a.stdout, format: output}
			var missing []string
			for _, ref := range refs {
				req := &podsyncv1.DeletePodRequest{Namespace: ref[0], Name: ref[1], Uid: uid}
				if gracePeriod >= 0 {
					req.GracePeriodSeconds = &gracePeriod
				}
				// Deleting waits for the grace period: bound it by --timeout
				// only.
				ctx, cancel := a.waitContext(cmd.Context())
				resp, err := c.DeletePod(ctx, req)
				cancel()
				if err != nil {
					return err
				}
				if output != formatText {
					if err := mw.write(resp); err != nil {
						return err
					}
				}
				if !resp.GetFound() {
					if !ignoreNotFound {
						missing = append(missing, ref[0]+"/"+ref[1])
					}
					continue
				}
				if output == formatText {
					if _, err := fmt.Fprintf(a.stdout, "pod %q deleted\n", ref[0]+"/"+ref[1]); err != nil {
						return err
					}
				}
			}
			switch len(missing) {
			case 0:
				return nil
			case 1:
				return failed("pod %q not found", missing[0])
			}
			return failed("pods %q not found", missing)
		},
		ValidArgsFunction: a.completePodNames(&namespace),
	}
	addFileFlag(cmd, &files, "delete the pods of these manifests (file, directory or -); repeatable")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", `namespace of the named pods (default "default"); with --all, all namespaces when empty`)
	cmd.Flags().BoolVar(&all, "all", false, "delete every pod of -n, or of every namespace")
	cmd.Flags().Int64Var(&gracePeriod, "grace-period", -1, "seconds given to the containers to stop; 0 kills at once; -1 uses each pod's terminationGracePeriodSeconds")
	cmd.Flags().StringVar(&uid, "uid", "", "delete only this incarnation (uid) of the pod")
	cmd.Flags().BoolVar(&ignoreNotFound, "ignore-not-found", false, "a pod that does not exist is not an error")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json or yaml (the API's DeletePodResponse messages)")
	return cmd
}
