package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/client"
)

// deleteFlags are delete's flags.
type deleteFlags struct {
	files          []string
	namespace      string
	all            bool
	gracePeriod    int64
	uid            string
	ignoreNotFound bool
	output         string
}

func (a *app) newDeleteCommand() *cobra.Command {
	var f deleteFlags
	cmd := &cobra.Command{
		Use:   "delete [pods] (NAME... | -f FILE... | --all) | delete (cm|secret) NAME...",
		Short: "Stop and remove pods, or delete stored ConfigMaps and Secrets",
		Long: "delete stops pods — preStop hooks, SIGTERM, SIGKILL after the grace period —\n" +
			"and removes their containers, sandboxes, volumes and logs. It returns once\n" +
			"everything is gone. Pods are named, taken from manifests (-f), or all the\n" +
			"pods of -n (every namespace without it) with --all.\n\n" +
			"A pod that does not exist is an error unless --ignore-not-found.\n\n" +
			"delete cm NAME... and delete secret NAME... remove stored objects of -n: an\n" +
			"optional source's files leave the volumes of the pods that use it, a required\n" +
			"one's stay; a container started later waits for it.",
		Example: "  podsyncctl delete web\n" +
			"  podsyncctl delete -f examples/ --grace-period 0\n" +
			"  podsyncctl delete --all -n demo\n" +
			"  podsyncctl delete cm app-config",
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				kind, names, err := parseResourceArgs(args)
				if err != nil {
					return err
				}
				switch kind {
				case resourceConfigMaps, resourceSecrets:
					return a.deleteObjectsArgs(cmd, f, kind, names)
				case resourcePods:
				default:
					return usageErrorf("delete removes pods, configmaps and secrets")
				}
				args = names
			}
			if err := f.check(args); err != nil {
				return err
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			defer func() { _ = c.Close() }()
			refs, err := a.deleteTargets(cmd.Context(), c, f, args)
			if err != nil {
				return err
			}
			return a.deletePods(cmd.Context(), c, f, refs)
		},
		ValidArgsFunction: a.completePodNames(&f.namespace),
	}
	addFileFlag(cmd, &f.files, "delete the pods of these manifests (file, directory or -); repeatable")
	cmd.Flags().StringVarP(&f.namespace, "namespace", "n", "", `namespace of the named pods (default "default"); with --all, all namespaces when empty`)
	cmd.Flags().BoolVar(&f.all, "all", false, "delete every pod of -n, or of every namespace")
	cmd.Flags().Int64Var(&f.gracePeriod, "grace-period", -1, "seconds given to the containers to stop; 0 kills at once; -1 uses each pod's terminationGracePeriodSeconds")
	cmd.Flags().StringVar(&f.uid, "uid", "", "delete only this incarnation (uid) of the pod: another one is left running and the command fails (UID_MISMATCH)")
	cmd.Flags().BoolVar(&f.ignoreNotFound, "ignore-not-found", false, "a pod that does not exist is not an error")
	cmd.Flags().StringVarP(&f.output, "output", "o", "", "output format: json or yaml (the API's DeletePodResponse messages)")
	return cmd
}

// deleteObjectsArgs deletes the named stored objects (delete cm NAME,
// delete secret/NAME).
func (a *app) deleteObjectsArgs(cmd *cobra.Command, f deleteFlags, kind resKind, names []string) error {
	if err := checkFormat(f.output, formatText); err != nil {
		return err
	}
	c, err := a.client(cmd.Context())
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	return a.deleteObjects(cmd.Context(), c, objectKindOf(kind), f, names)
}

// check checks the output format and that the pods come from exactly one
// of the names (args), -f and --all.
func (f deleteFlags) check(args []string) error {
	if err := checkFormat(f.output, formatText, formatJSON, formatYAML); err != nil {
		return err
	}
	sources := 0
	for _, set := range []bool{len(args) > 0, len(f.files) > 0, f.all} {
		if set {
			sources++
		}
	}
	if sources != 1 {
		return usageErrorf("name the pods, or give -f or --all (one of them)")
	}
	if f.uid != "" && len(args) != 1 {
		return usageErrorf("--uid takes exactly one pod name")
	}
	return nil
}

// deleteTargets returns the namespace and name of each pod to delete: the
// Pods of the manifests of -f, every pod of -n (ListPods) with --all, or
// the named pods in -n.
func (a *app) deleteTargets(ctx context.Context, c *client.Client, f deleteFlags, args []string) ([][2]string, error) {
	var refs [][2]string
	switch {
	case len(f.files) > 0:
		m, err := a.readManifests(f.files, true)
		if err != nil {
			return nil, err
		}
		if len(m.Pods) == 0 {
			return nil, errors.New("no Pod in the manifests")
		}
		// A workload's pods beyond its replicas in the file too.
		if refs, err = a.withWorkloadPods(ctx, c, manifestRefs(m), m); err != nil {
			return nil, err
		}
	case f.all:
		lctx, cancel := a.callContext(ctx)
		resp, err := c.ListPods(lctx, &podsyncv1.ListPodsRequest{Namespace: f.namespace})
		cancel()
		if err != nil {
			return nil, err
		}
		for _, p := range resp.GetPods() {
			refs = append(refs, [2]string{p.GetMetadata().GetNamespace(), p.GetMetadata().GetName()})
		}
	default:
		for _, name := range args {
			refs = append(refs, [2]string{namespaceOr(f.namespace), name})
		}
	}
	return refs, nil
}

// deletePods deletes the pods of refs in turn, each bounded by --timeout
// only, and prints each result. A pod that is not found fails the command
// after the others are deleted, unless --ignore-not-found.
func (a *app) deletePods(ctx context.Context, c *client.Client, f deleteFlags, refs [][2]string) error {
	mw := &messageWriter{w: a.stdout, format: f.output}
	var missing []string
	for _, ref := range refs {
		req := &podsyncv1.DeletePodRequest{Namespace: ref[0], Name: ref[1], Uid: f.uid}
		if f.gracePeriod >= 0 {
			req.GracePeriodSeconds = &f.gracePeriod
		}
		// Deleting waits for the grace period: bound it by --timeout
		// only.
		dctx, cancel := a.waitContext(ctx)
		resp, err := c.DeletePod(dctx, req)
		cancel()
		if err != nil {
			return err
		}
		if f.output != formatText {
			if err := mw.write(resp); err != nil {
				return err
			}
		}
		if !resp.GetFound() {
			if !f.ignoreNotFound {
				missing = append(missing, ref[0]+"/"+ref[1])
			}
			continue
		}
		if f.output == formatText {
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
}
