package cli

import (
	"context"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/client"
)

// resKind is what get, describe and delete act on, as kubectl names it.
type resKind int

const (
	resourcePods resKind = iota
	resourceConfigMaps
	resourceSecrets
	resourceEvents
	resourceNodes
	// resourceAll is kubectl's "all": here, the pods.
	resourceAll
)

// resourceWords are kubectl's names of the resources podsync has, short
// names and singulars included ("get pods web", "get po/web").
var resourceWords = map[string]resKind{
	"pod": resourcePods, "pods": resourcePods, "po": resourcePods,
	"cm": resourceConfigMaps, "configmap": resourceConfigMaps, "configmaps": resourceConfigMaps,
	"secret": resourceSecrets, "secrets": resourceSecrets,
	"event": resourceEvents, "events": resourceEvents, "ev": resourceEvents,
	"node": resourceNodes, "nodes": resourceNodes, "no": resourceNodes,
	"all": resourceAll,
}

// parseResourceArgs reads kubectl's ways to name what to get: "TYPE
// [NAME...]", "TYPE/NAME..." (pod/web, pods/web, cm/cfg), or, podsync's
// shortcut, pod names alone. A TYPE/NAME of a kind podsync does not have
// is a usage error.
func parseResourceArgs(args []string) (resKind, []string, error) {
	if len(args) == 0 {
		return resourcePods, nil, nil
	}
	if strings.Contains(args[0], "/") {
		var kind resKind
		var names []string
		for i, a := range args {
			word, name, ok := strings.Cut(a, "/")
			r, known := resourceWords[strings.ToLower(word)]
			switch {
			case !ok || name == "":
				return 0, nil, usageErrorf("%q: give every argument as TYPE/NAME, or TYPE NAME...", a)
			case !known || r == resourceAll:
				return 0, nil, usageErrorf("%q: podsync has no resource type %q; it has pods, configmaps, secrets, events and nodes", a, word)
			case i > 0 && r != kind:
				return 0, nil, usageErrorf("%q: name resources of one type at a time", a)
			}
			kind = r
			names = append(names, name)
		}
		return kind, names, nil
	}
	if r, ok := resourceWords[strings.ToLower(args[0])]; ok {
		return r, args[1:], nil
	}
	return resourcePods, args, nil
}

// getFlags are get's flags.
type getFlags struct {
	namespace     string
	allNamespaces bool
	selector      string
	fieldSelector string
	phases        []string
	output        string
	showLabels    bool
	watch         bool
}

func (a *app) newGetCommand() *cobra.Command {
	var f getFlags
	cmd := &cobra.Command{
		Use:     "get [TYPE] [NAME...] | get TYPE/NAME...",
		Aliases: []string{"ls", "list"},
		Short:   "List pods, events, ConfigMaps, Secrets or the node, or show the named ones",
		Long: "get lists what podsyncd holds, as kubectl get shows it. TYPE is pods (the\n" +
			"default; po), events (ev), configmaps (cm), secrets, nodes (no) or all; names\n" +
			"follow it, or come as TYPE/NAME (pod/web). Pods: READY counts ready containers\n" +
			"(sidecars included), STATUS is kubectl's (Running, Completed, CrashLoopBackOff,\n" +
			"Init:0/1, …), RESTARTS adds when the last restart was. Events: one line per\n" +
			"event series, with its count (\"5s (x4 over 35s)\").\n\n" +
			"Without names it lists every namespace unless -n is given (-A says so\n" +
			"explicitly); named objects are looked up in -n (default \"default\").\n\n" +
			"-o is kubectl's: wide, json, yaml (Kubernetes objects: a Pod, a kind: List for\n" +
			"several), name, jsonpath=TEMPLATE, jsonpath-file=FILE, custom-columns=SPEC;\n" +
			"proto-json and proto-yaml print the API's messages. -w follows the pods'\n" +
			"changes after the list.",
		Example: "  podsyncctl get pods\n" +
			"  podsyncctl get pod/web -o yaml\n" +
			"  podsyncctl get pods -o jsonpath='{.items[*].metadata.name}'\n" +
			"  podsyncctl get pods -o custom-columns=NAME:.metadata.name,IP:.status.podIP\n" +
			"  podsyncctl get pods --field-selector status.phase=Running --show-labels\n" +
			"  podsyncctl get events --field-selector involvedObject.name=web\n" +
			"  podsyncctl get -l app=web -o wide -w",
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, names, err := parseResourceArgs(args)
			if err != nil {
				return err
			}
			if err := f.check(kind, names); err != nil {
				return err
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			defer func() { _ = c.Close() }()
			ctx, cancel := a.callContext(cmd.Context())
			defer cancel()
			switch kind {
			case resourceConfigMaps:
				return a.getObjects(ctx, c, podsyncv1.ObjectKind_OBJECT_KIND_CONFIG_MAP, f, names)
			case resourceSecrets:
				return a.getObjects(ctx, c, podsyncv1.ObjectKind_OBJECT_KIND_SECRET, f, names)
			case resourceEvents:
				return a.getEvents(ctx, c, f, names)
			case resourceNodes:
				return a.getNodes(ctx, c, f, names)
			}
			pods, rev, err := f.fetch(ctx, c, names)
			if err != nil {
				return err
			}
			if err := a.writePods(f, names, pods, kind == resourceAll); err != nil || !f.watch {
				return err
			}
			wctx, wcancel := a.waitContext(cmd.Context())
			defer wcancel()
			return a.watchPods(wctx, c, f, names, pods, rev)
		},
		ValidArgsFunction: a.completePodNames(&f.namespace),
	}
	cmd.Flags().StringVarP(&f.namespace, "namespace", "n", "", `namespace (lists: all namespaces when empty; names: "default" when empty)`)
	cmd.Flags().BoolVarP(&f.allNamespaces, "all-namespaces", "A", false, "list the pods of every namespace (the default without -n)")
	cmd.Flags().StringVarP(&f.selector, "selector", "l", "", `label selector, such as "app=web,tier!=db"`)
	cmd.Flags().StringVar(&f.fieldSelector, "field-selector", "", "field selector, such as status.phase=Running or spec.nodeName=node-1 (pods: metadata.name, metadata.namespace, status.phase, spec.nodeName, spec.restartPolicy, status.podIP; events: involvedObject.name, involvedObject.uid, type, reason)")
	cmd.Flags().StringSliceVar(&f.phases, "phase", nil, "keep pods in these phases (Pending, Running, Succeeded, Failed, Unknown)")
	cmd.Flags().StringVarP(&f.output, "output", "o", "", "output format: "+strings.Join(kubeFormats, ", "))
	cmd.Flags().BoolVar(&f.showLabels, "show-labels", false, "add a LABELS column to the table")
	cmd.Flags().BoolVarP(&f.watch, "watch", "w", false, "after the list, print each change of the pods' status until interrupted")
	return cmd
}

// check checks the output format and that names come without -A, -l,
// --field-selector and --phase, -A without -n, and -w for pods only.
func (f getFlags) check(kind resKind, names []string) error {
	if f.output != formatText && f.output != formatWide && f.output != formatProtoJSON && f.output != formatProtoYAML {
		if _, err := newKubePrinter(f.output, os.ReadFile); err != nil {
			return err
		}
	}
	if f.allNamespaces && f.namespace != "" {
		return usageErrorf("-A and -n exclude each other")
	}
	if len(names) > 0 && (f.selector != "" || f.fieldSelector != "" || len(f.phases) > 0 || f.allNamespaces) {
		return usageErrorf("names exclude -A, -l, --field-selector and --phase")
	}
	if f.watch && kind != resourcePods && kind != resourceAll {
		return usageErrorf("-w follows pods only; use podsyncctl watch for events")
	}
	if f.fieldSelector != "" {
		if _, err := fields.ParseSelector(f.fieldSelector); err != nil {
			return usageErrorf("--field-selector %q: %v", f.fieldSelector, err)
		}
	}
	return nil
}

// podFieldSet is the fields a pod field selector may name, as the API
// server's pod field set (pkg/registry/core/pod.ToSelectableFields).
// spec.nodeName is the node the pod runs on: podsyncd's.
func podFieldSet(p *podsyncv1.Pod) fields.Set {
	node := p.GetSpec().GetNodeName()
	if node == "" {
		node = p.GetStatus().GetNodeName()
	}
	return fields.Set{
		"metadata.name":      p.GetMetadata().GetName(),
		"metadata.namespace": p.GetMetadata().GetNamespace(),
		"spec.nodeName":      node,
		"spec.restartPolicy": p.GetSpec().GetRestartPolicy(),
		"status.phase":       p.GetStatus().GetPhase(),
		"status.podIP":       p.GetStatus().GetPodIp(),
	}
}

// fieldFilter returns a filter of the objects whose field set matches
// selector (nil: all); a field the set lacks is a usage error, as the API
// server refuses it.
func fieldFilter[T any](selector string, set func(T) fields.Set, known []string) (func(T) bool, error) {
	if selector == "" {
		return nil, nil
	}
	sel, err := fields.ParseSelector(selector)
	if err != nil {
		return nil, usageErrorf("--field-selector %q: %v", selector, err)
	}
	for _, r := range sel.Requirements() {
		if !slices.Contains(known, r.Field) {
			return nil, usageErrorf("--field-selector: %q is not a known field selector: only %q", r.Field, strings.Join(known, `", "`))
		}
	}
	return func(o T) bool { return sel.Matches(set(o)) }, nil
}

var podFields = []string{"metadata.name", "metadata.namespace", "spec.nodeName", "spec.restartPolicy", "status.phase", "status.podIP"}

// fetch returns the named pods of -n (GetPod each), or without names the
// pods ListPods finds for the flags; and the revision to watch from.
func (f getFlags) fetch(ctx context.Context, c *client.Client, names []string) ([]*podsyncv1.Pod, int64, error) {
	if len(names) == 0 {
		keep, err := fieldFilter(f.fieldSelector, podFieldSet, podFields)
		if err != nil {
			return nil, 0, err
		}
		resp, err := c.ListPods(ctx, &podsyncv1.ListPodsRequest{Namespace: f.namespace, LabelSelector: f.selector, Phases: f.phases})
		if err != nil {
			return nil, 0, err
		}
		pods := resp.GetPods()
		if keep != nil {
			pods = slices.DeleteFunc(pods, func(p *podsyncv1.Pod) bool { return !keep(p) })
		}
		return pods, resp.GetRevision(), nil
	}
	var pods []*podsyncv1.Pod
	var rev int64
	for _, name := range names {
		resp, err := c.GetPod(ctx, namespaceOr(f.namespace), name)
		if err != nil {
			return nil, 0, err
		}
		pods = append(pods, resp.GetPod())
		rev = max(rev, resp.GetRevision())
	}
	return pods, rev, nil
}

// writePods prints pods in the -o format: Kubernetes Pods (one for a
// single name, a List otherwise), the API's messages, or the table (a
// note on stderr when empty). all prefixes names with "pod/", as kubectl
// get all does.
func (a *app) writePods(f getFlags, names []string, pods []*podsyncv1.Pod, all bool) error {
	switch {
	case f.output == formatProtoJSON || f.output == formatProtoYAML:
		format := protoFormat(f.output)
		if len(names) == 1 {
			return (&messageWriter{w: a.stdout, format: format}).write(pods[0])
		}
		return writePodList(a.stdout, format, pods)
	case isKubeFormat(f.output):
		p, err := newKubePrinter(f.output, os.ReadFile)
		if err != nil {
			return err
		}
		objs, err := kubePods(pods)
		if err != nil {
			return err
		}
		return p.print(a.stdout, objs, len(names) == 1)
	case len(pods) == 0:
		return a.noResources(f.namespace)
	}
	t := newPodTable(a.stdout, f, all)
	for _, p := range pods {
		t.row(p, a.now())
	}
	return t.flush()
}

// noResources says on stderr that nothing was found, in kubectl's words.
func (a *app) noResources(namespace string) error {
	msg := "No resources found\n"
	if namespace != "" {
		msg = "No resources found in " + namespace + " namespace.\n"
	}
	_, err := io.WriteString(a.stderr, msg)
	return err
}

// protoFormat is the messageWriter format of proto-json and proto-yaml.
func protoFormat(o string) string {
	if o == formatProtoYAML {
		return formatYAML
	}
	return formatJSON
}

func namespaceOr(ns string) string {
	if ns == "" {
		return "default"
	}
	return ns
}

// podTable prints pods as kubectl's table: NAMESPACE NAME READY STATUS
// RESTARTS AGE, with wide IP NODE QOS SANDBOX, and LABELS with
// --show-labels.
type podTable struct {
	t                 *table
	wide, labels, all bool
}

func newPodTable(w io.Writer, f getFlags, all bool) *podTable {
	header := []string{"NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"}
	if f.output == formatWide {
		header = append(header, "IP", "NODE", "QOS", "SANDBOX")
	}
	if f.showLabels {
		header = append(header, "LABELS")
	}
	return &podTable{t: newTable(w, header...), wide: f.output == formatWide, labels: f.showLabels, all: all}
}

func (pt *podTable) row(p *podsyncv1.Pod, now time.Time) {
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
	name := p.GetMetadata().GetName()
	if pt.all {
		name = "pod/" + name
	}
	row := []string{p.GetMetadata().GetNamespace(), name, sum.Ready, sum.Status, sum.Restarts, age(created, now)}
	if pt.wide {
		sandbox := "<none>"
		if id := st.GetSandboxId(); id != "" {
			sandbox = shortID(id) + " (attempt " + strconv.FormatUint(uint64(st.GetSandboxAttempt()), 10) + ")"
		}
		row = append(row, orNone(st.GetPodIp()), orNone(st.GetNodeName()), orNone(st.GetQosClass()), sandbox)
	}
	if pt.labels {
		row = append(row, labelsText(p.GetMetadata().GetLabels()))
	}
	pt.t.row(row...)
}

func (pt *podTable) flush() error { return pt.t.flush() }

// labelsText is kubectl's LABELS cell: k=v sorted, comma-separated, or
// <none>.
func labelsText(l map[string]string) string {
	if len(l) == 0 {
		return "<none>"
	}
	parts := make([]string, 0, len(l))
	for _, k := range slices.Sorted(maps.Keys(l)) {
		parts = append(parts, k+"="+l[k])
	}
	return strings.Join(parts, ",")
}

// writePodTable prints pods as kubectl's table (newPodTable).
func writePodTable(w io.Writer, pods []*podsyncv1.Pod, wide bool, now time.Time) error {
	f := getFlags{}
	if wide {
		f.output = formatWide
	}
	t := newPodTable(w, f, false)
	for _, p := range pods {
		t.row(p, now)
	}
	return t.flush()
}

// watchPods follows the pods' changes after rev, as kubectl get -w: a
// table row (without a header) or an object in the -o format per status
// change of a pod the flags select, until ctx ends.
func (a *app) watchPods(ctx context.Context, c *client.Client, f getFlags, names []string, listed []*podsyncv1.Pod, rev int64) error {
	known := map[string]*podsyncv1.Pod{}
	for _, p := range listed {
		known[p.GetMetadata().GetUid()] = p
	}
	keep, err := fieldFilter(f.fieldSelector, podFieldSet, podFields)
	if err != nil {
		return err
	}
	err = c.Watch(ctx, &podsyncv1.WatchPodsRequest{SinceRevision: rev, Namespace: f.namespace, LabelSelector: f.selector},
		func(m *podsyncv1.WatchPodsResponse) error {
			st := m.GetStatus()
			ref := m.GetPod()
			p, ok := known[ref.GetUid()]
			if del := m.GetDeleted(); del != nil && ok {
				// kubectl prints a deleted pod's last row: Terminating.
				delete(known, ref.GetUid())
				if p.GetMetadata().GetDeletionTimestamp() == nil {
					p = proto.Clone(p).(*podsyncv1.Pod)
					if p.Metadata == nil {
						p.Metadata = &podsyncv1.ObjectMeta{}
					}
					p.Metadata.DeletionTimestamp = del.GetTime()
				}
				st = p.GetStatus()
			}
			if st == nil {
				return nil
			}
			if !ok {
				gctx, cancel := a.callContext(ctx)
				resp, err := c.GetPod(gctx, ref.GetNamespace(), ref.GetName())
				cancel()
				if err != nil {
					return nil // gone again
				}
				p = resp.GetPod()
				known[ref.GetUid()] = p
			}
			p.Status = st
			if len(names) > 0 && (ref.GetNamespace() != namespaceOr(f.namespace) || !slices.Contains(names, ref.GetName())) ||
				len(f.phases) > 0 && !slices.Contains(f.phases, st.GetPhase()) || keep != nil && !keep(p) {
				return nil
			}
			if f.output == formatText || f.output == formatWide {
				var b strings.Builder
				t := newPodTable(&b, f, false)
				t.row(p, a.now())
				if err := t.flush(); err != nil {
					return err
				}
				// The row without the header line.
				_, row, _ := strings.Cut(b.String(), "\n")
				_, err := io.WriteString(a.stdout, row)
				return err
			}
			return a.writePods(f, []string{p.GetMetadata().GetName()}, []*podsyncv1.Pod{p}, false)
		})
	if ctx.Err() != nil && isCanceled(err) {
		return nil
	}
	return err
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
