package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// resourceWords are accepted before the pod names, as kubectl takes them
// ("get pods web").
var resourceWords = map[string]bool{"pod": true, "pods": true, "po": true}

func (a *app) newGetCommand() *cobra.Command {
	var (
		namespace     string
		allNamespaces bool
		selector      string
		phases        []string
		output        string
	)
	cmd := &cobra.Command{
		Use:     "get [pods] [NAME...]",
		Aliases: []string{"ls", "list"},
		Short:   "List pods, or show the named ones",
		Long: "get lists the pods podsyncd runs, as kubectl shows them: READY counts ready\n" +
			"containers (sidecars included), STATUS is kubectl's (Running, Completed,\n" +
			"CrashLoopBackOff, Init:0/1, …), RESTARTS adds when the last restart was.\n\n" +
			"Without names it lists every namespace unless -n is given (-A says so\n" +
			"explicitly); named pods are looked up in -n (default \"default\"). A leading\n" +
			"\"pods\" is accepted, as in kubectl.\n\n" +
			"-o wide adds IP, NODE, QOS and the sandbox; -o json and -o yaml print the\n" +
			"API's Pod messages (a kind: List for several).",
		Example: "  podsyncctl ls\n" +
			"  podsyncctl get web -o yaml\n" +
			"  podsyncctl get -l app=web -o wide\n" +
			"  podsyncctl get pods -n demo --phase Running",
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && resourceWords[args[0]] {
				args = args[1:]
			}
			if err := checkFormat(output, formatText, formatWide, formatJSON, formatYAML); err != nil {
				return err
			}
			if allNamespaces && namespace != "" {
				return usageErrorf("-A and -n exclude each other")
			}
			if len(args) > 0 && (selector != "" || len(phases) > 0 || allNamespaces) {
				return usageErrorf("names exclude -A, -l and --phase")
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			defer func() { _ = c.Close() }()
			ctx, cancel := a.callContext(cmd.Context())
			defer cancel()
			var pods []*podsyncv1.Pod
			if len(args) == 0 {
				resp, err := c.ListPods(ctx, &podsyncv1.ListPodsRequest{Namespace: namespace, LabelSelector: selector, Phases: phases})
				if err != nil {
					return err
				}
				pods = resp.GetPods()
			} else {
				for _, name := range args {
					resp, err := c.GetPod(ctx, namespaceOr(namespace), name)
					if err != nil {
						return err
					}
					pods = append(pods, resp.GetPod())
				}
			}
			switch {
			case output == formatJSON || output == formatYAML:
				if len(args) == 1 {
					return (&messageWriter{w: a.stdout, format: output}).write(pods[0])
				}
				return writePodList(a.stdout, output, pods)
			case len(pods) == 0:
				where := "in any namespace"
				if namespace != "" {
					where = "in namespace " + namespace
				}
				_, err := fmt.Fprintf(a.stderr, "No pods found %s.\n", where)
				return err
			}
			return writePodTable(a.stdout, pods, output == formatWide, a.now())
		},
		ValidArgsFunction: a.completePodNames(&namespace),
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", `namespace (lists: all namespaces when empty; names: "default" when empty)`)
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "list the pods of every namespace (the default without -n)")
	cmd.Flags().StringVarP(&selector, "selector", "l", "", `label selector, such as "app=web,tier!=db"`)
	cmd.Flags().StringSliceVar(&phases, "phase", nil, "keep pods in these phases (Pending, Running, Succeeded, Failed, Unknown)")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: wide, json or yaml")
	return cmd
}

func namespaceOr(ns string) string {
	if ns == "" {
		return "default"
	}
	return ns
}

// writePodTable prints pods as kubectl's table: NAMESPACE NAME READY
// STATUS RESTARTS AGE, and with wide IP NODE QOS SANDBOX.
func writePodTable(w io.Writer, pods []*podsyncv1.Pod, wide bool, now time.Time) error {
	header := []string{"NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"}
	if wide {
		header = append(header, "IP", "NODE", "QOS", "SANDBOX")
	}
	t := newTable(w, header...)
	for _, p := range pods {
		st := p.GetStatus()
		sum := summarizePod(p.GetSpec(), st, now)
		// kubectl: a pod asked to stop that has not ended is Terminating.
		if p.GetMetadata().GetDeletionTimestamp() != nil && st.GetPhase() != string(corev1.PodSucceeded) &&
			st.GetPhase() != string(corev1.PodFailed) {
			sum.Status = "Terminating"
		}
		// AGE is since creation, as kubectl has it; podsync's start time
		// (when it first acknowledged the pod) stands in for it.
		var created time.Time
		if ts := p.GetMetadata().GetCreationTimestamp(); ts != nil {
			created = ts.AsTime()
		} else if ts := st.GetStartTime(); ts != nil {
			created = ts.AsTime()
		}
		row := []string{p.GetMetadata().GetNamespace(), p.GetMetadata().GetName(), sum.Ready, sum.Status, sum.Restarts, age(created, now)}
		if wide {
			sandbox := "<none>"
			if id := st.GetSandboxId(); id != "" {
				sandbox = shortID(id) + " (attempt " + strconv.FormatUint(uint64(st.GetSandboxAttempt()), 10) + ")"
			}
			row = append(row, orNone(st.GetPodIp()), orNone(st.GetNodeName()), orNone(st.GetQosClass()), sandbox)
		}
		t.row(row...)
	}
	return t.flush()
}

// completePodNames completes pod names for shell completion, from
// ListPods in the namespace of -n.
func (a *app) completePodNames(namespace *string) func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, _ []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
		ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Second)
		defer cancel()
		c, err := a.client(ctx)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		defer func() { _ = c.Close() }()
		resp, err := c.ListPods(ctx, &podsyncv1.ListPodsRequest{Namespace: namespaceOr(*namespace)})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, p := range resp.GetPods() {
			if name := p.GetMetadata().GetName(); strings.HasPrefix(name, prefix) {
				out = append(out, name)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
