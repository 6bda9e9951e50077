package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// newVolumeCommand is "volume ls|rm": the node's named volumes, the
// directories persistentVolumeClaim volumes mount.
func (a *app) newVolumeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "volume (ls | rm NAME...)",
		Short: "List or remove the node's named volumes (persistentVolumeClaim)",
		Long: "A pod's persistentVolumeClaim volume is a node-local named volume under\n" +
			"podsyncd's root directory, one per namespace and claimName (a claim is its\n" +
			"namespace's, as a PersistentVolumeClaim), as podman kube play makes them:\n" +
			"created when a pod naming the claim first runs, shared by the pods of the\n" +
			"namespace naming it, and kept when they are deleted. volume ls lists them\n" +
			"with the pods that name them; volume rm removes one and its data, once no\n" +
			"pod names it.",
		Example: "  podsyncctl volume ls\n" +
			"  podsyncctl volume rm data\n" +
			"  podsyncctl volume rm -n team-a data",
		Args: usageArgs(cobra.NoArgs),
	}
	cmd.AddCommand(a.newVolumeListCommand(), a.newVolumeRemoveCommand())
	return cmd
}

func (a *app) newVolumeListCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the named volumes and the pods that name them (ListVolumes)",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(output, formatText, formatJSON, formatYAML); err != nil {
				return err
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			defer func() { _ = c.Close() }()
			ctx, cancel := a.callContext(cmd.Context())
			defer cancel()
			vols, err := c.ListVolumes(ctx)
			if err != nil {
				return err
			}
			if output != formatText {
				return (&messageWriter{w: a.stdout, format: output}).write(&podsyncv1.ListVolumesResponse{Volumes: vols})
			}
			if len(vols) == 0 {
				_, err := fmt.Fprintln(a.stderr, "No named volumes.")
				return err
			}
			t := newTable(a.stdout, "NAMESPACE", "NAME", "PODS", "PATH")
			for _, v := range vols {
				t.row(v.GetNamespace(), v.GetName(), orNone(strings.Join(v.GetPods(), ",")), v.GetPath())
			}
			return t.flush()
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json or yaml (the API's ListVolumesResponse)")
	return cmd
}

func (a *app) newVolumeRemoveCommand() *cobra.Command {
	var ignoreNotFound bool
	var namespace string
	cmd := &cobra.Command{
		Use:     "rm NAME...",
		Aliases: []string{"remove", "delete"},
		Short:   "Remove named volumes and their data (DeleteVolume)",
		Long: "rm removes each named volume and everything in it. A volume that a pod of\n" +
			"the node still names is refused: delete those pods first. A volume that does\n" +
			"not exist is an error unless --ignore-not-found.",
		Args: usageArgs(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			defer func() { _ = c.Close() }()
			for _, name := range args {
				ctx, cancel := a.callContext(cmd.Context())
				found, err := c.DeleteVolume(ctx, namespace, name)
				cancel()
				switch {
				case err != nil:
					return err
				case !found && !ignoreNotFound:
					return failed("volume %q not found in namespace %q; podsyncctl volume ls lists the named volumes", name, orDefault(namespace, "default"))
				case found:
					if _, err := fmt.Fprintf(a.stdout, "volume %q removed\n", name); err != nil {
						return err
					}
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&ignoreNotFound, "ignore-not-found", false, "a volume that does not exist is not an error")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", `namespace of the volumes (default "default")`)
	return cmd
}
