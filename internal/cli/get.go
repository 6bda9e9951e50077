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
	"github.com/podsync/podsync/client"
)

// resourceWords are accepted before the pod names, as kubectl takes them
// ("get pods web").
var resourceWords = map[string]bool{"pod": true, "pods": true, "po": true}

// getFlags are get's flags.
type getFlags struct {
	namespace     string
	allNamespaces bool
	selector      string
	phases        []string
	output        string
}

func (a *app) newGetCommand() *cobra.Command {
	var f getFlags
	cmd := &cobra.Command{
		Use:     "get [pods|cm|secrets] [NAME...]",
		Aliases: []string{"ls", "list"},
		Short:   "List pods, ConfigMaps or Secrets, or show the named ones",
		Long: "get lists the pods podsyncd runs, as kubectl shows them: READY counts ready\n" +
			"containers (sidecars included), STATUS is kubectl's (Running, Completed,\n" +
			"CrashLoopBackOff, Init:0/1, …), RESTARTS adds when the last restart was.\n\n" +
			"Without names it lists every namespace unless -n is given (-A says so\n" +
			"explicitly); named pods are looked up in -n (default \"default\"). A leading\n" +
			"\"pods\" is accepted, as in kubectl; \"cm\" (configmaps) or \"secrets\" lists the\n" +
			"node's stored objects instead (NAME DATA AGE; a Secret's values are never shown).\n\n" +
			"-o wide adds IP, NODE, QOS and the sandbox; -o json and -o yaml print the\n" +
			"API's Pod messages (a kind: List for several).",
		Example: "  podsyncctl ls\n" +
			"  podsyncctl get web -o yaml\n" +
			"  podsyncctl get -l app=web -o wide\n" +
			"  podsyncctl get pods -n demo --phase Running\n" +
			"  podsyncctl get cm -n demo",
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, objects := podsyncv1.ObjectKind(0), false
			if len(args) > 0 {
				kind, objects = objectWords[args[0]]
			}
			if len(args) > 0 && (resourceWords[args[0]] || objects) {
				args = args[1:]
			}
			if err := f.check(args); err != nil {
				return err
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			defer func() { _ = c.Close() }()
			ctx, cancel := a.callContext(cmd.Context())
			defer cancel()
			if objects {
				return a.getObjects(ctx, c, kind, f, args)
			}
			pods, err := f.fetch(ctx, c, args)
			if err != nil {
				return err
			}
			return a.writePods(f, args, pods)
		},
		ValidArgsFunction: a.completePodNames(&f.namespace),
	}
	cmd.Flags().StringVarP(&f.namespace, "namespace", "n", "", `namespace (lists: all namespaces when empty; names: "default" when empty)`)
	cmd.Flags().BoolVarP(&f.allNamespaces, "all-namespaces", "A", false, "list the pods of every namespace (the default without -n)")
	cmd.Flags().StringVarP(&f.selector, "selector", "l", "", `label selector, such as "app=web,tier!=db"`)
	cmd.Flags().StringSliceVar(&f.phases, "phase", nil, "keep pods in these phases (Pending, Running, Succeeded, Failed, Unknown)")
	cmd.Flags().StringVarP(&f.output, "output", "o", "", "output format: wide, json or yaml")
	return cmd
}

// check checks the output format and that names (args) come without -A,
// -l and --phase, and -A without -n.
func (f getFlags) check(args []string) error {
	if err := checkFormat(f.output, formatText, formatWide, formatJSON, formatYAML); err != nil {
		return err
	}
	if f.allNamespaces && f.namespace != "" {
		return usageErrorf("-A and -n exclude each other")
	}
	if len(args) > 0 && (f.selector != "" || len(f.phases) > 0 || f.allNamespaces) {
		return usageErrorf("names exclude -A, -l and --phase")
	}
	return nil
}

// fetch returns the named pods of -n (GetPod each), or without names the
// pods ListPods finds for the flags.
func (f getFlags) fetch(ctx context.Context, c *client.Client, names []string) ([]*podsyncv1.Pod, error) {
	if len(names) == 0 {
		resp, err := c.ListPods(ctx, &podsyncv1.ListPodsRequest{Namespace: f.namespace, LabelSelector: f.selector, Phases: f.phases})
		if err != nil {
			return nil, err
		}
		return resp.GetPods(), nil
	}
	var pods []*podsyncv1.Pod
	for _, name := range names {
		resp, err := c.GetPod(ctx, namespaceOr(f.namespace), name)
		if err != nil {
			return nil, err
		}
		pods = append(pods, resp.GetPod())
	}
	return pods, nil
}

// writePods prints pods in the -o format: one Pod message for a single
// name, a List otherwise, or the table (a note on stderr when empty).
func (a *app) writePods(f getFlags, names []string, pods []*podsyncv1.Pod) error {
	switch {
	case f.output == formatJSON || f.output == formatYAML:
		if len(names) == 1 {
			return (&messageWriter{w: a.stdout, format: f.output}).write(pods[0])
		}
		return writePodList(a.stdout, f.output, pods)
	case len(pods) == 0:
		where := "in any namespace"
		if f.namespace != "" {
			where = "in namespace " + f.namespace
		}
		_, err := fmt.Fprintf(a.stderr, "No pods found %s.\n", where)
		return err
	}
	return writePodTable(a.stdout, pods, f.output == formatWide, a.now())
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
