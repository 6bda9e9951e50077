package cli

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

func (a *app) newNodeCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Show the node's labels, taints, resources, system info and lease (GetNode)",
		Long: "node prints what podsyncd's admission knows of its node, as kubectl describe\n" +
			"node prints it: the labels pods' nodeSelector and required node affinity must\n" +
			"match, the taints they must tolerate, and the capacity and allocatable\n" +
			"resources their requests are admitted against; its system info (machine and\n" +
			"boot IDs, kernel, OS image, container runtime); then the node's lease: which\n" +
			"control plane drives it, under which epoch, until when (docs/api.md).",
		Example: "  podsyncctl node\n" +
			"  podsyncctl node -o yaml",
		Args: usageArgs(cobra.NoArgs),
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
			node, err := c.GetNode(ctx)
			if err != nil {
				return err
			}
			if output != formatText {
				return (&messageWriter{w: a.stdout, format: output}).write(node)
			}
			return printNode(a.stdout, node)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json or yaml (the API's Node message)")
	return cmd
}

// printNode prints the node as kubectl describe node prints those fields.
func printNode(w io.Writer, n *podsyncv1.Node) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Name:         %s\n", n.GetName())
	list := func(title string, items []string) {
		if len(items) == 0 {
			fmt.Fprintf(&b, "%-14s<none>\n", title)
			return
		}
		for i, it := range items {
			if i == 0 {
				fmt.Fprintf(&b, "%-14s%s\n", title, it)
			} else {
				fmt.Fprintf(&b, "%-14s%s\n", "", it)
			}
		}
	}
	var labels []string
	for _, k := range slices.Sorted(maps.Keys(n.GetLabels())) {
		labels = append(labels, k+"="+n.GetLabels()[k])
	}
	list("Labels:", labels)
	var taints []string
	for _, t := range n.GetTaints() {
		s := t.GetKey()
		if t.GetValue() != "" {
			s += "=" + t.GetValue()
		}
		taints = append(taints, s+":"+t.GetEffect())
	}
	list("Taints:", taints)
	for _, r := range []struct {
		title string
		l     map[string]string
	}{{"Capacity:", n.GetCapacity()}, {"Allocatable:", n.GetAllocatable()}} {
		b.WriteString(r.title + "\n")
		for _, k := range slices.Sorted(maps.Keys(r.l)) {
			fmt.Fprintf(&b, "  %-18s%s\n", k+":", r.l[k])
		}
	}
	if si := n.GetSystemInfo(); si != nil {
		b.WriteString("System Info:\n")
		for _, f := range []struct{ name, value string }{
			{"Machine ID", si.GetMachineId()}, {"System UUID", si.GetSystemUuid()}, {"Boot ID", si.GetBootId()},
			{"Kernel Version", si.GetKernelVersion()}, {"OS Image", si.GetOsImage()},
			{"Operating System", si.GetOperatingSystem()}, {"Architecture", si.GetArchitecture()},
			{"Container Runtime Version", si.GetContainerRuntimeVersion()},
		} {
			b.WriteString(strings.TrimRight(fmt.Sprintf("  %-28s%s", f.name+":", f.value), " ") + "\n")
		}
	}
	l := n.GetLease()
	switch {
	case l == nil:
		b.WriteString("Lease:        <none>\n")
	case l.GetHolder() == "":
		fmt.Fprintf(&b, "Lease:        released (epoch %d)\n", l.GetEpoch())
	default:
		fmt.Fprintf(&b, "Lease:        %s (epoch %d, renewed %s, expires %s)\n", l.GetHolder(), l.GetEpoch(),
			l.GetRenewTime().AsTime().UTC().Format(time.RFC3339), l.GetExpireTime().AsTime().UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(&b, "RequireLease: %t\n", n.GetRequireLease())
	_, err := io.WriteString(w, b.String())
	return err
}
