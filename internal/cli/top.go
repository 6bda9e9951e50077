package cli

import (
	"fmt"

	"github.com/spf13/cobra"
	apiresource "k8s.io/apimachinery/pkg/api/resource"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// topFlags are top pod's flags.
type topFlags struct {
	namespace     string
	allNamespaces bool
	containers    bool
}

func (a *app) newTopCommand() *cobra.Command {
	top := &cobra.Command{
		Use:   "top (pod|pods|node|nodes)",
		Short: "Show CPU and memory usage",
		Args:  usageArgs(cobra.NoArgs),
		// kubectl exits non-zero without a resource: say what to give.
		RunE: func(*cobra.Command, []string) error {
			return usageErrorf("top needs a resource: pod (pods, po) or node (nodes, no)")
		},
	}
	var f topFlags
	pod := &cobra.Command{
		Use:     "pod [POD]",
		Aliases: []string{"pods", "po"},
		Short:   "Show the CPU and memory usage of pods",
		Long: "top pod prints each running pod's CPU (cores, averaged since podsyncd's\n" +
			"previous sample, at most a second ago on a first call) and memory (working set),\n" +
			"as kubectl top pod does; --containers prints each container.",
		Example: "  podsyncctl top pod\n" +
			"  podsyncctl top pod web --containers\n" +
			"  podsyncctl top pod -A",
		Args: usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			defer func() { _ = c.Close() }()
			ctx, cancel := a.callContext(cmd.Context())
			defer cancel()
			var pods []*podsyncv1.PodStats
			switch {
			case len(args) == 1:
				pod, err := podArg(args[0])
				if err != nil {
					return err
				}
				st, err := c.GetPodStats(ctx, f.namespace, pod)
				if err != nil {
					return err
				}
				pods = []*podsyncv1.PodStats{st}
			default:
				ns := orDefault(f.namespace, "default")
				if f.allNamespaces {
					ns = ""
				}
				if pods, err = c.ListPodStats(ctx, ns); err != nil {
					return err
				}
				if len(pods) == 0 {
					_, _ = fmt.Fprintln(a.stderr, "No running pods found.")
					return nil
				}
			}
			return a.writeTop(pods, f)
		},
		ValidArgsFunction: a.completePodNames(&f.namespace),
	}
	pod.Flags().StringVarP(&f.namespace, "namespace", "n", "", `namespace of the pods (default "default")`)
	pod.Flags().BoolVarP(&f.allNamespaces, "all-namespaces", "A", false, "pods of every namespace")
	pod.Flags().BoolVar(&f.containers, "containers", false, "a row per container")
	top.AddCommand(pod, a.newTopNodeCommand())
	return top
}

// newTopNodeCommand is kubectl top node's table of the node: NAME
// CPU(cores) CPU(%) MEMORY(bytes) MEMORY(%), the machine's usage (or,
// from a podsyncd that does not report it, the sums of its running pods')
// against its allocatable resources.
func (a *app) newTopNodeCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "node [NAME]",
		Aliases: []string{"nodes", "no"},
		Short:   "Show the CPU and memory usage of the node, against its allocatable resources",
		Long: "top node prints, as kubectl top node does, the CPU and memory the machine\n" +
			"uses (its root cgroup's, pods and all), and their share of what the node\n" +
			"allocates to pods.",
		Args: usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			defer func() { _ = c.Close() }()
			ctx, cancel := a.callContext(cmd.Context())
			defer cancel()
			n, err := c.GetNode(ctx)
			if err != nil {
				return err
			}
			if len(args) == 1 && args[0] != n.GetName() {
				return failed("node %q not found: podsyncd runs node %q", args[0], n.GetName())
			}
			sum, err := c.StatsSummary(ctx, "")
			if err != nil {
				return err
			}
			var nanoCores, bytes uint64
			if node := sum.GetNode(); node != nil {
				nanoCores, bytes = node.GetCpu().GetUsageNanoCores(), node.GetMemory().GetWorkingSetBytes()
			} else {
				for _, p := range sum.GetPods() {
					nanoCores += p.GetCpu().GetUsageNanoCores()
					bytes += p.GetMemory().GetWorkingSetBytes()
				}
			}
			percent := func(used float64, name string) string {
				q, err := apiresource.ParseQuantity(n.GetAllocatable()[name])
				if err != nil || q.IsZero() {
					return "<unknown>"
				}
				if name == "cpu" {
					return fmt.Sprintf("%d%%", int64(used/float64(q.MilliValue())*100))
				}
				return fmt.Sprintf("%d%%", int64(used/float64(q.Value())*100))
			}
			t := newTable(a.stdout, "NAME", "CPU(cores)", "CPU(%)", "MEMORY(bytes)", "MEMORY(%)")
			t.row(n.GetName(), fmt.Sprintf("%dm", nanoCores/1_000_000), percent(float64(nanoCores/1_000_000), "cpu"),
				fmt.Sprintf("%dMi", bytes>>20), percent(float64(bytes), "memory"))
			return t.flush()
		},
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// writeTop prints kubectl top pod's table: NAME CPU(cores) MEMORY(bytes),
// with NAMESPACE first for -A and POD before NAME for --containers.
func (a *app) writeTop(pods []*podsyncv1.PodStats, f topFlags) error {
	var header []string
	if f.allNamespaces {
		header = append(header, "NAMESPACE")
	}
	if f.containers {
		header = append(header, "POD")
	}
	header = append(header, "NAME", "CPU(cores)", "MEMORY(bytes)")
	t := newTable(a.stdout, header...)
	for _, p := range pods {
		var lead []string
		if f.allNamespaces {
			lead = append(lead, p.GetNamespace())
		}
		if !f.containers {
			t.row(append(lead, p.GetName(), cores(p.GetCpu()), mebibytes(p.GetMemory()))...)
			continue
		}
		for _, c := range p.GetContainers() {
			t.row(append(lead, p.GetName(), c.GetName(), cores(c.GetCpu()), mebibytes(c.GetMemory()))...)
		}
	}
	return t.flush()
}

// cores is kubectl top's CPU cell: millicores, or <unknown> without a
// rate.
func cores(c *podsyncv1.CPUStats) string {
	if c.UsageNanoCores == nil {
		return "<unknown>"
	}
	return fmt.Sprintf("%dm", c.GetUsageNanoCores()/1_000_000)
}

// mebibytes is kubectl top's memory cell: the working set in Mi.
func mebibytes(m *podsyncv1.MemoryStats) string {
	return fmt.Sprintf("%dMi", m.GetWorkingSetBytes()>>20)
}
